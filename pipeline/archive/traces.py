"""Archived conversations as turns and tool calls, for the OpenTelemetry export.

A database module (SQLAlchemy) used by :mod:`pipeline.otel`: :func:`iter_turns` reads every
normalised job attempt of a run, or finished since a time, with its answer and its tool calls
(SQL, row counts, errors) and the receive times of the lines that carried them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from pipeline.archive.engine import PAIRS_PER_QUERY, translate_errors

# Each query's columns are its row class's fields in order (rows are built by position).
_TURNS = """
SELECT j.job_id, j.run_id, j.normalised_attempt AS attempt, j.question, j.persona, j.identity,
       j.chat_id, j.chat_url, j.status, j.error, j.error_type, j.submitted_at, j.started_at,
       j.first_line_at, j.finished_at, a.content AS answer, a.source AS answer_source
FROM jobs j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.normalised_attempt
WHERE j.normalised_attempt IS NOT NULL
  AND (CAST(:run_id AS text) IS NULL OR j.run_id = :run_id)
  AND (CAST(:since AS timestamptz) IS NULL OR j.finished_at >= :since)
  AND (CAST(:jobs AS text[]) IS NULL OR (j.job_id, j.normalised_attempt) IN (
       SELECT * FROM unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[]))))
ORDER BY j.submitted_at, j.job_id
"""
_TOOL_CALLS = """
SELECT t.job_id, t.attempt, t.message_id, t.name, t.kind, CAST(t.input AS text) AS input,
       t.input_raw, CAST(t.result AS text) AS result, CAST(t.error AS text) AS error,
       t.payload_error, t.complete, s.sql_query AS sql, s.total_rows, s.returned_rows,
       s.error AS sql_error,
       (SELECT l.received_at FROM stream_lines l WHERE l.job_id = t.job_id
         AND l.attempt = t.attempt AND l.line_no = m.first_line LIMIT 1) AS started_at,
       (SELECT l.received_at FROM stream_lines l WHERE l.job_id = t.job_id
         AND l.attempt = t.attempt AND l.line_no = m.last_line LIMIT 1) AS ended_at
FROM tool_calls t
JOIN messages m USING (job_id, attempt, message_id)
LEFT JOIN sql_queries s USING (job_id, attempt, message_id)
JOIN unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS p(job_id, attempt)
  ON p.job_id = t.job_id AND p.attempt = t.attempt
ORDER BY t.job_id, m.first_line
"""


@dataclass(frozen=True)
class ToolCallRow:
    """One archived tool call of a turn.

    Attributes:
        message_id: The tool-call message's id (unique within the attempt).
        name, kind: The tool's name (``cubeSqlApi``) and kind (``meta``, ``sql``, ``other``).
        input, result, error: The call's payloads as JSON text (PostgreSQL's rendering of the
            stored ``jsonb``: read once, never decoded and encoded again), or None.
        input_raw: The input as sent, when it did not parse.
        payload_error: Why a payload did not parse, or None.
        complete: False when the stream ended before the call's result.
        sql, total_rows, returned_rows, sql_error: The SQL tool's query, its row counts and error.
        started_at, ended_at: When the call's first and last lines were received (UTC), or None.
    """

    message_id: str
    name: str | None
    kind: str
    input: str | None
    input_raw: str | None
    result: str | None
    error: str | None
    payload_error: str | None
    complete: bool
    sql: str | None
    total_rows: int | None
    returned_rows: int | None
    sql_error: str | None
    started_at: datetime | None
    ended_at: datetime | None


@dataclass(frozen=True)
class TurnRow:
    """One normalised job attempt: a question asked as one identity, and what came back.

    Attributes:
        job_id, run_id, attempt: The attempt.
        question, persona, identity: What was asked, by which persona, as which identity
            (row-level security, e.g. ``external:analyst-1``).
        chat_id, chat_url: The thread and the agent's chat endpoint.
        status, error, error_type: The job's outcome.
        submitted_at, started_at, first_line_at, finished_at: Its times (UTC), each or None.
        answer, answer_source: The final answer and where it came from, or None.
        tool_calls: The attempt's tool calls in stream order.
    """

    job_id: str
    run_id: str
    attempt: int
    question: str | None
    persona: str | None
    identity: str | None
    chat_id: str | None
    chat_url: str | None
    status: str
    error: str | None
    error_type: str | None
    submitted_at: datetime | None
    started_at: datetime | None
    first_line_at: datetime | None
    finished_at: datetime | None
    answer: str | None
    answer_source: str | None
    tool_calls: list[ToolCallRow] = field(default_factory=list)


def read_turns(
    engine: sa.Engine,
    *,
    run_id: str | None = None,
    since: datetime | None = None,
    pairs: Sequence[tuple[str, int]] | None = None,
) -> list[TurnRow]:
    """Returns: :func:`iter_turns`'s turns as a list (same arguments and errors)."""
    return list(iter_turns(engine, run_id=run_id, since=since, pairs=pairs))


def iter_turns(
    engine: sa.Engine,
    *,
    run_id: str | None = None,
    since: datetime | None = None,
    pairs: Sequence[tuple[str, int]] | None = None,
) -> Iterator[TurnRow]:
    """Yields the normalised attempts of a run, or finished since a time, with their tool calls.

    The turns are read through a server-side cursor, :data:`PAIRS_PER_QUERY` at a time, each
    page's tool calls in one query: memory stays bounded by a page, whatever the archive's size.

    Args:
        engine: The archive's engine.
        run_id: Only this run's jobs, when given.
        since: Only jobs finished at or after this time (timezone-aware), when given.
        pairs: Only these ``(job_id, attempt)`` pairs, when given (each still the job's
            normalised attempt).

    Yields:
        The turns ordered by submission time, each with its tool calls in stream order.

    Raises:
        ArchiveUnavailableError, ArchiveSchemaError: Translated PostgreSQL failures.
    """
    params = {
        "run_id": run_id,
        "since": since,
        "jobs": None if pairs is None else [p[0] for p in pairs],
        "attempts": None if pairs is None else [p[1] for p in pairs],
    }
    with translate_errors("read turns for export"), engine.connect() as conn:
        paged = conn.execution_options(stream_results=True, yield_per=PAIRS_PER_QUERY)
        for page in paged.execute(sa.text(_TURNS), params).partitions():
            turns = {(row.job_id, row.attempt): TurnRow(*row) for row in page}
            _attach_tool_calls(conn, turns)
            yield from turns.values()


def _attach_tool_calls(conn: sa.Connection, turns: dict[tuple[str, int], TurnRow]) -> None:
    params = {"jobs": [p[0] for p in turns], "attempts": [p[1] for p in turns]}
    for job_id, attempt, *values in conn.execute(sa.text(_TOOL_CALLS), params):
        turns[(job_id, attempt)].tool_calls.append(ToolCallRow(*values))
