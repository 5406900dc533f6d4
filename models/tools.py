"""Typed views of toolCall payloads: metadata search and SQL.

``toolCall.input`` and ``toolCall.result`` are JSON *strings* (interface, "toolCall object").
This module parses them for the metadata tool (``svcMeta``; hosted ``cubeMeta``) and the SQL tool
(``svcSqlApi``; hosted ``cubeSqlApi``/``cubeSqlApiWithChart``). A SQL tool call is recognised by
its payload (``sqlQuery``, or the older ``query``) as well as its name (field notes, "Tool names
and payloads"). Payload members we do not model stay in ``model_extra``.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models import json_values, wire
from models.chat import ToolCall
from models.errors import ToolPayloadError

ToolKind = Literal["meta", "sql", "other"]
_T = TypeVar("_T", bound="_Payload")


class _Payload(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")


class MetaMember(_Payload):
    """A member in a metadata search result: ``view.member`` name, type, measure ``aggType``."""

    name: str
    title: str | None = None
    description: str | None = None
    type: str | None = None
    agg_type: str | None = Field(default=None, alias="aggType")


class MetaCube(_Payload):
    """A cube or view in a metadata search result."""

    name: str
    type: str | None = None
    title: str | None = None
    description: str | None = None
    members: tuple[MetaMember, ...] = ()


class MetaInput(_Payload):
    """``svcMeta`` input: ``{"searchQuery": str}``."""

    search_query: str | None = Field(default=None, alias="searchQuery")


class MetaResult(_Payload):
    """``svcMeta`` result: ``{"cubes": [...], "searchQuery": str}`` or ``{"error": ...}``."""

    cubes: tuple[MetaCube, ...] = ()
    search_query: str | None = Field(default=None, alias="searchQuery")
    error: Any = None


class SqlInput(_Payload):
    """``svcSqlApi`` input (interface, "svcSqlApi tool", input fields).

    ``query`` is the older payload's name for the SQL (field notes); :attr:`sql` reads either.
    """

    sql_query: str | None = Field(default=None, alias="sqlQuery")
    query: str | None = None
    query_title: str | None = Field(default=None, alias="queryTitle")
    description: str | None = None
    user_request: str | None = Field(default=None, alias="userRequest")
    memory_id: str | None = Field(default=None, alias="memoryId")
    vega_spec: str | None = Field(default=None, alias="vegaSpec")

    @property
    def sql(self) -> str | None:
        """Returns: the SQL text from ``sqlQuery`` or the older ``query``."""
        return self.sql_query if self.sql_query is not None else self.query


class SchemaColumn(_Payload):
    """One result column: ``{"name", "column_type"}`` (e.g. ``String``, ``Int64``, ``Double``)."""

    name: str
    column_type: str | None = None


class SqlResult(_Payload):
    """``svcSqlApi`` result (interface, "svcSqlApi tool", result fields).

    ``data`` rows are arrays (values often strings) or, in the older payload, objects; at most
    100 are returned and ``totalRows`` counts them all. A failed call carries ``error``.
    """

    sql_query: str | None = Field(default=None, alias="sqlQuery")
    query_title: str | None = Field(default=None, alias="queryTitle")
    description: str | None = None
    user_request: str | None = Field(default=None, alias="userRequest")
    columns: tuple[SchemaColumn, ...] | None = Field(default=None, alias="schema")
    data: list[Any] | None = None
    total_rows: int | None = Field(default=None, alias="totalRows")
    uuid: str | None = None
    vega_spec: str | None = Field(default=None, alias="vegaSpec")
    annotation: dict[str, Any] | None = None
    error: Any = None


def wire_name(model: type[BaseModel], field: str) -> str:
    """Returns: the member name ``field`` of ``model`` has on the wire (its alias, or its name).

    The typed models above are the one source of truth for payload member names: code that
    reads payloads leniently as dicts (:mod:`pipeline.transcript.tool_calls`) takes its keys
    from here, so a renamed member cannot drift between the two.

    Raises:
        KeyError: ``model`` has no field ``field``.
    """
    info = model.model_fields[field]
    return info.alias or field


def load_payload(text: str | None, *, tool_name: str, part: str) -> dict[str, Any] | None:
    """Parses a toolCall payload string.

    Args:
        text: The JSON string as received, or None when absent.
        tool_name: The tool's name, for the error.
        part: ``"input"`` or ``"result"``, for the error.

    Returns:
        The decoded JSON object, or None when ``text`` is None.

    Raises:
        ToolPayloadError: ``text`` is not JSON, or not a JSON object.
    """
    if text is None:
        return None
    try:
        value = json_values.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolPayloadError(
            f"{part} is not JSON: {exc}", tool_name=tool_name, part=part
        ) from exc
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise ToolPayloadError(
            f"{part} is JSON {kind}, not an object", tool_name=tool_name, part=part
        )
    return value


def classify(call: ToolCall) -> ToolKind:
    """Says which tool a call is, by name or, failing that, by payload.

    Returns:
        ``"meta"`` for ``svcMeta``/``cubeMeta``; ``"sql"`` for the SQL tool names or any payload
        with ``sqlQuery`` or ``query`` (field notes: recognise a SQL tool call by its payload);
        ``"other"`` otherwise. Payloads that are not JSON count as ``"other"``.
    """
    if call.name in wire.META_TOOL_NAMES:
        return "meta"
    if call.name in wire.SQL_TOOL_NAMES:
        return "sql"
    for text, part in ((call.input, "input"), (call.result, "result")):
        try:
            payload = load_payload(text, tool_name=call.name or "", part=part)
        except ToolPayloadError:
            continue
        if payload is not None and (_SQL_QUERY in payload or _OLD_QUERY in payload):
            return "sql"
    return "other"


_SQL_QUERY = wire_name(SqlInput, "sql_query")
_OLD_QUERY = wire_name(SqlInput, "query")


def _typed(model: type[_T], call: ToolCall, part: Literal["input", "result"]) -> _T | None:
    name = call.name or ""
    payload = load_payload(getattr(call, part), tool_name=name, part=part)
    if payload is None:
        return None
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ToolPayloadError(
            f"{part} has an unexpected shape: {exc}", tool_name=name, part=part
        ) from exc


def meta_input(call: ToolCall) -> MetaInput | None:
    """Returns: the parsed metadata-search input, None when absent. Raises ToolPayloadError."""
    return _typed(MetaInput, call, "input")


def meta_result(call: ToolCall) -> MetaResult | None:
    """Returns: the parsed metadata-search result, None when absent. Raises ToolPayloadError."""
    return _typed(MetaResult, call, "result")


def sql_input(call: ToolCall) -> SqlInput | None:
    """Returns: the parsed SQL tool input, None when absent. Raises ToolPayloadError."""
    return _typed(SqlInput, call, "input")


def sql_result(call: ToolCall) -> SqlResult | None:
    """Returns: the parsed SQL tool result, None when absent. Raises ToolPayloadError."""
    return _typed(SqlResult, call, "result")
