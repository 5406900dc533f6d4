"""Tool calls of a transcript as archive rows (pure, no I/O).

A message with ``toolCall`` gives one :class:`ToolCallRow`; a SQL tool call also gives one
:class:`SqlQueryRow`. Rules (``chat-api-interface.md``, "toolCall object", "svcMeta tool",
"svcSqlApi tool"; ``field-notes.md``, "Tool names and payloads"):

* The tool name is kept as received; the kind comes from :func:`models.tools.classify`, so the
  hosted names (``cubeMeta``, ``cubeSqlApi``) and SQL recognised by payload count.
* ``input`` and ``result`` are JSON strings: they are parsed, and string members holding a JSON
  object or array (``vegaSpec`` ...) are parsed too. A payload that is not a JSON object stays
  only in its ``*_raw`` column, with the reason in ``payload_error``.
* A failed tool's result has an ``error`` member; it is kept in ``error``.
* SQL members are read by wire name from the parsed payloads (result first, then input), so the
  older payload (``{"query"}`` in, ``{"data": [{...}], "annotation"}`` out) maps too. The wire
  names come from the typed payload models (:func:`models.tools.wire_name` of
  :class:`models.tools.SqlInput` / :class:`models.tools.SqlResult`), the one source of truth;
  reading stays lenient (a member of an unexpected type is None, the rest of the row is kept),
  which validating the whole payload against the models would not be.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from models import json_values, tools
from models.chat import ToolCall
from models.errors import ToolPayloadError
from pipeline.transcript.sql_refs import touched

_IN, _OUT = tools.SqlInput, tools.SqlResult
SQL_QUERY = tools.wire_name(_OUT, "sql_query")
OLD_QUERY = tools.wire_name(_IN, "query")
QUERY_TITLE = tools.wire_name(_OUT, "query_title")
DESCRIPTION = tools.wire_name(_OUT, "description")
USER_REQUEST = tools.wire_name(_OUT, "user_request")
MEMORY_ID = tools.wire_name(_IN, "memory_id")
SCHEMA = tools.wire_name(_OUT, "columns")
DATA = tools.wire_name(_OUT, "data")
TOTAL_ROWS = tools.wire_name(_OUT, "total_rows")
UUID = tools.wire_name(_OUT, "uuid")
VEGA_SPEC = tools.wire_name(_OUT, "vega_spec")
ANNOTATION = tools.wire_name(_OUT, "annotation")
ERROR = tools.wire_name(_OUT, "error")

MAX_NESTING = 8
"""How deep :func:`unnest` looks for JSON strings inside a payload."""
_NESTED_JSON = re.compile(r'"(?:\s|\\[bfnrt/"\\]|\\u[0-9a-fA-F]{4})*[\[{]')
"""In a payload's JSON text: a string that may start (after whitespace, raw or escaped) with
``{`` or ``[``. Without a match :func:`unnest` would change nothing, so it is not called."""


class ArchiveRow:
    """Mixin for frozen dataclasses whose fields are the columns of one archive table."""

    def to_row(self) -> dict[str, Any]:
        """Returns: ``{column: value}`` for the table; tuples become lists."""
        assert dataclasses.is_dataclass(self)
        return {f.name: _listify(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ToolCallRow(ArchiveRow):
    """One tool call: a row of ``tool_calls``.

    ``input``/``result`` are the parsed payloads (JSON objects, nested JSON strings parsed),
    ``input_raw``/``result_raw`` the strings as received, ``error`` the result's ``error``
    member, ``payload_error`` why a payload could not be parsed, ``complete`` whether the
    result has arrived.
    """

    job_id: str
    attempt: int
    message_id: str
    name: str | None
    kind: tools.ToolKind
    input: dict[str, Any] | None
    result: dict[str, Any] | None
    input_raw: str | None
    result_raw: str | None
    error: Any
    payload_error: str | None
    complete: bool


@dataclass(frozen=True)
class SqlQueryRow(ArchiveRow):
    """One SQL tool call's query and result summary: a row of ``sql_queries``.

    ``rows`` are the returned rows as sent (arrays, or objects in the older payload; the
    service returns at most 100); ``returned_rows`` counts them; ``total_rows`` is
    ``totalRows``; ``vega_spec`` is the parsed Vega-Lite spec; ``views`` and ``members``
    (``view.member``) are what the SQL reads (:func:`pipeline.transcript.sql_refs.touched`).
    """

    job_id: str
    attempt: int
    message_id: str
    tool_name: str | None
    sql_query: str | None
    query_title: str | None
    description: str | None
    user_request: str | None
    memory_id: str | None
    result_schema: list[Any] | None
    total_rows: int | None
    result_uuid: str | None
    vega_spec: Any
    rows: list[Any] | None
    returned_rows: int | None
    error: str | None
    views: tuple[str, ...] = ()
    members: tuple[str, ...] = ()


def tool_call_row(job_id: str, attempt: int, message_id: str, call: ToolCall) -> ToolCallRow:
    """Maps a merged ``toolCall`` to its row.

    Args:
        job_id: The row's job.
        attempt: The row's attempt.
        message_id: The tool call's message id.
        call: The tool call with the latest ``name``, ``input`` and ``result`` sent.

    Returns:
        The row; payload problems are recorded in ``payload_error``, never raised.
    """
    parsed_input, input_error = parse_payload(call, "input")
    parsed_result, result_error = parse_payload(call, "result")
    problems = [e for e in (input_error, result_error) if e]
    return ToolCallRow(
        job_id=job_id,
        attempt=attempt,
        message_id=message_id,
        name=call.name,
        kind=tools.classify(call),
        input=parsed_input,
        result=parsed_result,
        input_raw=call.input,
        result_raw=call.result,
        error=(parsed_result or {}).get(ERROR),
        payload_error="; ".join(problems) or None,
        complete=call.result is not None,
    )


def parse_payload(
    call: ToolCall, part: Literal["input", "result"]
) -> tuple[dict[str, Any] | None, str | None]:
    """Parses ``call.input`` or ``call.result``.

    Returns:
        ``(object, None)`` with nested JSON strings parsed (see :func:`unnest`); ``(None, None)``
        when the part is absent; ``(None, reason)`` when it is not a JSON object.
    """
    text = getattr(call, part)
    try:
        value = tools.load_payload(text, tool_name=call.name or "", part=part)
    except ToolPayloadError as exc:
        return None, str(exc)
    if value is None:
        return None, None
    if not _NESTED_JSON.search(text):
        return value, None
    return {k: _unnest_member(v) for k, v in value.items()}, None


def _unnest_member(value: Any) -> Any:
    """:func:`unnest` of a payload's member.

    Skipped when its JSON text has no candidate (a result's ``data`` rows are most of it, a
    ``vegaSpec`` string beside them is the match).
    """
    if isinstance(value, dict | list) and not _NESTED_JSON.search(_json_text(value)):
        return value
    return unnest(value, MAX_NESTING)


def _json_text(value: Any) -> str:
    """Returns: ``value`` as JSON text for :data:`_NESTED_JSON` to search.

    Written by orjson (several times faster than ``json.dumps`` on a result's rows); what it
    refuses (integers beyond 64 bits, lone surrogates) by ``json.dumps``. The two differ only
    in separators and in how ``NaN`` is written, never between a string's opening quote and
    its first character, which is all the pattern looks at.
    """
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


def unnest(value: Any, depth: int = MAX_NESTING) -> Any:
    """Replaces strings that hold a JSON object or array by the parsed value, recursively.

    Args:
        value: A decoded JSON value.
        depth: How many levels to descend.

    Returns:
        The value with such strings parsed; other strings (``"245"``, text) are left alone.
    """
    if depth <= 0:
        return value
    if isinstance(value, dict):
        return {k: unnest(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [unnest(v, depth - 1) for v in value]
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            parsed = json_values.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict | list):
            return unnest(parsed, depth - 1)
    return value


def sql_query_row(call: ToolCallRow) -> SqlQueryRow:
    """Maps a SQL tool call (``kind == "sql"``) to its ``sql_queries`` row.

    Args:
        call: The tool call's row, payloads already parsed.

    Returns:
        The row; members missing or of an unexpected type are None.
    """
    given = call.input or {}
    got = call.result or {}
    data = got.get(DATA)
    rows = data if isinstance(data, list) else None
    schema = got.get(SCHEMA)
    error = got.get(ERROR)
    sql = _first_text(SQL_QUERY, got, given) or _first_text(OLD_QUERY, given, got)
    refs = touched(sql)
    return SqlQueryRow(
        job_id=call.job_id,
        attempt=call.attempt,
        message_id=call.message_id,
        tool_name=call.name,
        sql_query=sql,
        query_title=_first_text(QUERY_TITLE, got, given),
        description=_first_text(DESCRIPTION, got, given),
        user_request=_first_text(USER_REQUEST, got, given),
        memory_id=_first_text(MEMORY_ID, given, got),
        result_schema=schema if isinstance(schema, list) else _object_schema(rows, got),
        total_rows=_integer(got.get(TOTAL_ROWS)),
        result_uuid=_first_text(UUID, got),
        vega_spec=got.get(VEGA_SPEC, given.get(VEGA_SPEC)),
        rows=rows,
        returned_rows=len(rows) if rows is not None else None,
        error=None if error is None else error_text(error),
        views=refs.views,
        members=refs.members,
    )


def read_sql_early(call: ToolCall) -> None:
    """Reads a SQL tool call's query now, into :func:`.sql_refs.touched`'s cache.

    For :class:`pipeline.transcript.normalise.Fold`, when a line brings a tool call's result:
    the attempt's end then finds the query read (sqlglot, ~1 ms a query), instead of reading
    the queries of every attempt ending in one sink batch together. Only the input payload is
    parsed (the result, up to megabytes of rows, is parsed once, at the end); a result that
    carries another query than its input is read at the end. Nothing is returned or kept here
    beyond that cache; a call that is not SQL, or whose input does not parse, is left alone.
    """
    given, _ = parse_payload(call, "input")
    if given is None:
        return
    sql = _first_text(SQL_QUERY, given) or _first_text(OLD_QUERY, given)
    if sql is not None and tools.classify(call) == "sql":
        touched(sql)


def _object_schema(rows: list[Any] | None, got: dict[str, Any]) -> list[Any] | None:
    """The older payload's rows are objects.

    Their keys (first row's order) become the schema, with the type from ``annotation``
    (``{"measures"|"dimensions": {name: {"type"}}}``) when given (field notes, "Tool names and
    payloads").
    """
    if not rows or not all(isinstance(row, dict) for row in rows):
        return None
    annotation = got.get(ANNOTATION)
    types: dict[str, Any] = {}
    if isinstance(annotation, dict):
        for group in annotation.values():
            if isinstance(group, dict):
                types.update({k: v.get("type") for k, v in group.items() if isinstance(v, dict)})
    names = list(dict.fromkeys(key for row in rows for key in row))
    return [{"name": name, "column_type": types.get(name)} for name in names]


def error_text(error: Any) -> str:
    """Returns: an ``error`` member as text (strings as they are, other JSON serialised)."""
    return error if isinstance(error, str) else json.dumps(error, sort_keys=True)


def _first_text(name: str, *sources: dict[str, Any]) -> str | None:
    for source in sources:
        value = source.get(name)
        if isinstance(value, str):
            return value
    return None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _listify(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
