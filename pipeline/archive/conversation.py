"""One conversation as the console shows it: the job, its messages, tool calls, SQL, timeline.

A database module (SQLAlchemy) reading the normalised rows of a job's last attempt
(``messages``, ``tool_calls``, ``sql_queries``, ``answers``), its lifecycle events over every
attempt (``job_events``), its lines' redaction marks (``stream_lines.redaction``) and the
verification of its hash chain (:func:`pipeline.archive.chain.verify`). Content that retention
redacted or deleted is read as it now is (NULL or rewritten): nothing here recovers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from pipeline.archive.chain import VerifyReport, verify


@dataclass(frozen=True)
class Turn:
    """One message of the attempt, in stream order, with its tool call and SQL if any.

    Attributes:
        role: ``user``, ``assistant``, ``tool`` ... as the stream said.
        tool: ``{"name", "kind", "input", "result", "error", "payload_error"}`` or None.
        query: ``{"sql", "title", "schema", "rows", "total_rows", "returned_rows", "error",
            "vega_spec", "views", "members"}`` or None.
    """

    message_id: str
    role: str | None
    content: str | None
    thinking: str | None
    is_final: bool
    tool_name: str | None
    first_line: int
    last_line: int
    tool: dict[str, Any] | None = None
    query: dict[str, Any] | None = None
    redaction: str | None = None
    """``deleted`` or ``redacted`` when retention changed a line of this message."""


@dataclass(frozen=True)
class Conversation:
    """Everything the Conversation page shows of one job.

    Attributes:
        job: The ``jobs`` row as a dict (``session_settings`` included).
        attempt: The attempt shown (the job's last).
        turns: The attempt's messages in stream order.
        answer: The ``answers`` row of the attempt as a dict, or None.
        events: Every attempt's lifecycle events, ``[{"attempt", "kind", "at", "payload"}]``
            oldest first.
        redactions: Lines per mark, ``{"redacted": n, "deleted": n}`` (only marks present).
        chain: The hash-chain verification of the job.
    """

    job: dict[str, Any]
    attempt: int
    turns: list[Turn]
    answer: dict[str, Any] | None
    events: list[dict[str, Any]]
    redactions: dict[str, int]
    chain: VerifyReport
    attempts_lines: dict[int, int] = field(default_factory=dict)


_JOB = "SELECT * FROM jobs WHERE job_id = :job_id"
_TURNS = """
SELECT m.message_id, m.role, m.content, m.thinking, m.is_final, m.tool_name, m.first_line,
       m.last_line,
       CASE WHEN t.message_id IS NOT NULL THEN jsonb_build_object(
           'name', t.name, 'kind', t.kind, 'input', t.input, 'result', t.result,
           'input_raw', t.input_raw, 'error', t.error,
           'payload_error', t.payload_error) END AS tool,
       CASE WHEN q.message_id IS NOT NULL THEN jsonb_build_object(
           'sql', q.sql_query, 'title', q.query_title, 'schema', q.result_schema, 'rows', q.rows,
           'total_rows', q.total_rows, 'returned_rows', q.returned_rows, 'error', q.error,
           'vega_spec', q.vega_spec, 'views', q.views, 'members', q.members) END AS query
FROM messages m
LEFT JOIN tool_calls t USING (job_id, attempt, message_id)
LEFT JOIN sql_queries q USING (job_id, attempt, message_id)
WHERE m.job_id = :job_id AND m.attempt = :attempt
ORDER BY m.sort NULLS LAST, m.first_line, m.message_id
"""
_ANSWER = """
SELECT content, source, message_id, line_no, stream_errors FROM answers
WHERE job_id = :job_id AND attempt = :attempt
"""
_EVENTS = """
SELECT attempt, kind, at, line_count, payload FROM job_events WHERE job_id = :job_id
ORDER BY at, attempt
"""
_MARKED_LINES = """
SELECT line_no, redaction FROM stream_lines
WHERE job_id = :job_id AND attempt = :attempt AND redaction IS NOT NULL
"""
_MARKS = """
SELECT attempt, redaction, count(*) AS n FROM stream_lines WHERE job_id = :job_id
GROUP BY attempt, redaction
"""


def read_conversation(conn: sa.Connection, *, job_id: str) -> Conversation | None:
    """Reads one job's conversation (module docstring).

    Args:
        conn: A (read-only) connection.
        job_id: The job.

    Returns:
        The conversation, or None when the archive has no such job.
    """
    job = conn.execute(sa.text(_JOB), {"job_id": job_id}).mappings().first()
    if job is None:
        return None
    params = {"job_id": job_id, "attempt": job["last_attempt"]}
    rows = conn.execute(sa.text(_MARKED_LINES), params)
    marked: dict[int, str] = {int(r.line_no): str(r.redaction) for r in rows}
    turns = [_turn(r._asdict(), marked) for r in conn.execute(sa.text(_TURNS), params)]
    answer = conn.execute(sa.text(_ANSWER), params).mappings().first()
    events = [dict(r._mapping) for r in conn.execute(sa.text(_EVENTS), params)]
    redactions: dict[str, int] = {}
    lines: dict[int, int] = {}
    for row in conn.execute(sa.text(_MARKS), params):
        lines[row.attempt] = lines.get(row.attempt, 0) + int(row.n)
        if row.redaction is not None:
            redactions[row.redaction] = redactions.get(row.redaction, 0) + int(row.n)
    return Conversation(
        job=dict(job),
        attempt=int(job["last_attempt"]),
        turns=turns,
        answer=dict(answer) if answer is not None else None,
        events=events,
        redactions=redactions,
        chain=verify(conn, job_id=job_id),
        attempts_lines=lines,
    )


def _turn(row: dict[str, Any], marked: dict[int, str]) -> Turn:
    lines = range(row["first_line"], row["last_line"] + 1)
    marks = {marked[n] for n in lines if n in marked}
    redaction = "deleted" if "deleted" in marks else ("redacted" if marks else None)
    return Turn(**row, redaction=redaction)
