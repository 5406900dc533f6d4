"""Every archive column that holds content, and what retention leaves in it.

A database module (SQLAlchemy). Retention (:mod:`pipeline.archive.retention`) must reach every
copy of a job's content: the raw lines, their parsed payload, every derived row, the job row
and its lifecycle events. :data:`CONTENT` lists each such column with the SQL expression that
``delete`` sets it to; :data:`KEPT` lists every other text, JSON, array or byte column of
:mod:`pipeline.archive.tables` with the reason it holds no content (keys, closed value sets,
hashes, who asked, the model's member names). ``tests/unit/pipeline/test_retention_columns.py``
fails when a table gains such a column that is in neither, so the lists stay complete.

``delete`` (:func:`delete_columns`) runs one ``UPDATE`` per table; ``redact``
(:func:`redact_columns`) applies the redaction rules to every string a content column holds
(text, array elements, and strings anywhere inside ``jsonb``), row by row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import sqlalchemy as sa

from pipeline.archive import tables
from pipeline.archive.redaction import Redactor

_IDENTITY_KEYS: Final = ("externalId", "internalId")
_IDENTITY_ONLY: Final = (
    "CASE WHEN session_settings IS NULL THEN NULL ELSE jsonb_strip_nulls(jsonb_build_object("
    + ", ".join(f"'{k}', session_settings -> '{k}'" for k in _IDENTITY_KEYS)
    + ")) END"
)

CONTENT: Final[dict[tuple[str, str], str]] = {
    ("jobs", "question"): "NULL",
    ("jobs", "session_settings"): _IDENTITY_ONLY,  # who asked stays (audit's --user)
    ("jobs", "error"): "NULL",  # may quote the agent's error body
    ("job_events", "payload"): "payload - 'job' - 'error'",  # the job: question, settings
    ("stream_lines", "raw"): "'\\x'::bytea",
    ("stream_lines", "payload"): "NULL",
    ("stream_lines", "parse_error"): "NULL",
    ("messages", "content"): "NULL",
    ("messages", "thinking"): "NULL",
    ("messages", "extra"): "'{}'::jsonb",
    ("tool_calls", "input"): "NULL",
    ("tool_calls", "result"): "NULL",
    ("tool_calls", "input_raw"): "NULL",
    ("tool_calls", "result_raw"): "NULL",
    ("tool_calls", "error"): "NULL",
    ("tool_calls", "payload_error"): "NULL",  # a validation message quotes the input
    ("sql_queries", "sql_query"): "NULL",  # literals of the question
    ("sql_queries", "query_title"): "NULL",
    ("sql_queries", "description"): "NULL",
    ("sql_queries", "user_request"): "NULL",
    ("sql_queries", "vega_spec"): "NULL",  # chart titles, inline data
    ("sql_queries", "rows"): "NULL",
    ("sql_queries", "error"): "NULL",
    ("answers", "content"): "NULL",
    ("answers", "stream_errors"): "'{}'::text[]",
}
"""``(table, column) → SQL expression`` that ``delete`` sets the column to."""

_KEY: Final = "key"
KEPT: Final[dict[tuple[str, str], str]] = {
    **{("runs", c): "run metadata from the batch command line" for c in ("name", "source_file")},
    ("runs", "run_id"): _KEY,
    ("runs", "chat_url"): "the target called",
    ("runs", "created_by"): "who started the run (audit)",
    ("runs", "options"): "limits and flags of the run, no question",
    ("runs", "rerun_of"): _KEY,
    ("jobs", "job_id"): _KEY,
    ("jobs", "run_id"): _KEY,
    ("jobs", "persona"): "the persona's name in the questions file",
    ("jobs", "identity"): "who asked (audit trail)",
    ("jobs", "chat_url"): "the target called",
    ("jobs", "active_branch_name"): "the thread's branch name",
    ("jobs", "chat_id"): "the thread's id",
    ("jobs", "status"): "closed set",
    ("jobs", "worker_id"): "process id",
    ("jobs", "error_type"): "exception class name",
    ("job_events", "job_id"): _KEY,
    ("job_events", "kind"): "closed set",
    ("stream_lines", "job_id"): _KEY,
    ("stream_lines", "chat_id"): "the thread's id",
    ("stream_lines", "message_id"): "the message's id",
    ("stream_lines", "raw_sha256"): "hash (tamper evidence)",
    ("stream_lines", "chain_hash"): "hash (tamper evidence)",
    ("stream_lines", "redaction"): "closed set",
    ("messages", "job_id"): _KEY,
    ("messages", "message_id"): _KEY,
    ("messages", "role"): "closed set",
    ("messages", "graph_path"): "the agent's node names",
    ("messages", "tool_name"): "the tool's name",
    ("tool_calls", "job_id"): _KEY,
    ("tool_calls", "message_id"): _KEY,
    ("tool_calls", "name"): "the tool's name",
    ("tool_calls", "kind"): "closed set",
    ("sql_queries", "job_id"): _KEY,
    ("sql_queries", "message_id"): _KEY,
    ("sql_queries", "tool_name"): "the tool's name",
    ("sql_queries", "memory_id"): "the result's id",
    ("sql_queries", "result_uuid"): "the result's id",
    ("sql_queries", "result_schema"): "column names and types of the model",
    ("sql_queries", "views"): "the model's view names (audit)",
    ("sql_queries", "members"): "the model's member names (audit)",
    ("answers", "job_id"): _KEY,
    ("answers", "chat_id"): "the thread's id",
    ("answers", "message_id"): "the message's id",
    ("answers", "source"): "closed set",
    ("attempt_seals", "job_id"): _KEY,
    ("attempt_seals", "head"): "hash (tamper evidence)",
    ("attempt_seals", "redacted"): "line numbers and hashes (tamper evidence)",
    ("attempt_seals", "job_sha256"): "hash (tamper evidence)",
    ("attempt_seals", "derived"): "table names and hashes (tamper evidence)",
    ("attempt_seals", "seal"): "hash (tamper evidence)",
    ("attempt_seals", "reason"): "closed set",
    ("reviewers", "name"): _KEY,
    ("reviewers", "token_sha256"): "hash of the reviewer's token",
    ("review_queues", "queue_id"): _KEY,
    ("review_queues", "filter"): "run ids, persona and view names, counts",
    ("review_queues", "reviewers"): "reviewer names",
    ("review_queues", "compare_run"): _KEY,
    ("review_queues", "created_by"): "who made the queue (audit)",
    ("review_items", "queue_id"): _KEY,
    ("review_items", "job_id"): _KEY,
    ("review_items", "pair_job_id"): _KEY,
    **{("review_verdicts", c): _KEY for c in ("queue_id", "job_id", "pair_job_id")},
    ("review_verdicts", "reviewer"): "who signed off (audit)",
    ("review_verdicts", "verdict"): "closed set",
    ("review_verdicts", "labels"): "the reviewer's labels",
    **{
        ("review_verdicts", c): "a reviewer's sign-off, append-only and chained: kept as written"
        for c in ("comment", "expected")
    },
    **{("review_verdicts", c): "hash (tamper evidence)" for c in ("prev_hash", "hash")},
}
"""``(table, column) → why it holds no content``, for every other text/JSON/array/byte column."""

LINE_COLUMNS: Final = (("stream_lines", "raw"),)
"""Rewritten by the line redaction itself (:func:`pipeline.archive.retention.redact_content`);
``payload`` is parsed again from the rewritten bytes and then walked like every other column."""


def delete_columns(conn: sa.Connection, job_ids: Sequence[str]) -> int:
    """Sets every :data:`CONTENT` column of ``job_ids``' rows to its deleted value.

    Lines are also marked ``deleted`` (``redaction``, ``redacted_at``).

    Returns:
        Lines newly deleted.
    """
    lines = 0
    for table in _tables():
        columns = [(c, e) for (t, c), e in CONTENT.items() if t == table]
        sets = ", ".join(f"{c} = {e}" for c, e in columns)
        statement = f"UPDATE {table} SET {sets} WHERE job_id = ANY(:jobs)"
        if table == "stream_lines":
            statement = (
                f"UPDATE stream_lines SET {sets}, redaction = 'deleted', redacted_at = now()"
                " WHERE job_id = ANY(:jobs) AND redaction IS DISTINCT FROM 'deleted'"
            )
        result = conn.execute(sa.text(statement), {"jobs": list(job_ids)})
        lines += result.rowcount if table == "stream_lines" else 0
    return lines


def redact_columns(conn: sa.Connection, job_ids: Sequence[str], redactor: Redactor) -> int:
    """Applies ``redactor`` to every string of every :data:`CONTENT` column of ``job_ids``.

    :data:`LINE_COLUMNS` are left to the line redaction.

    Returns:
        Rows changed.
    """
    changed = 0
    for name in _tables():
        table = tables.metadata.tables[name]
        columns = [table.c[c] for (t, c) in CONTENT if t == name and (t, c) not in LINE_COLUMNS]
        if not columns:
            continue
        key = list(table.primary_key.columns)
        query = sa.select(*key, *columns).where(
            table.c.job_id.in_(list(job_ids)), sa.or_(*(c.is_not(None) for c in columns))
        )
        for row in conn.execute(query).all():
            values = {c.name: redact_value(row._mapping[c.name], redactor) for c in columns}
            new = {k: v for k, v in values.items() if v != row._mapping[k]}
            if new:
                where = sa.and_(*(k == row._mapping[k.name] for k in key))
                conn.execute(table.update().where(where).values(**new))
                changed += 1
    return changed


def redact_value(value: Any, redactor: Redactor) -> Any:
    """Returns: ``value`` with every string in it redacted (dicts, lists; other values kept)."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, list):
        return [redact_value(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(v, redactor) for k, v in value.items()}
    return value


def _tables() -> list[str]:
    return sorted({t for t, _ in CONTENT})
