r"""Replay: a job's NDJSON exactly as received, from the archive's raw lines.

A database module (SQLAlchemy). ``stream_lines.raw`` holds each line's bytes as received
(without its ``\n``; ``terminated`` says whether one followed), so writing the lines of an
attempt in ``line_no`` order, each followed by ``\n`` when it was terminated, gives back the
stream byte for byte (design.md, "Flow": replay is a byte copy). ``--sorted`` orders the lines
by their ``sort`` member instead (field notes, "Merging lines into messages": order by ``sort``
when lines arrive out of order); a line without ``sort`` stays behind every line the stream
had reached when it arrived. Lines whose content was redacted or deleted replay as stored, not
as received.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Final

import sqlalchemy as sa

from models.chat import SessionSettings
from pipeline.errors import ReplayError


@dataclass(frozen=True)
class StoredLine:
    """One archived line: bytes as stored, receive time, terminator flag, ``sort`` if any."""

    line_no: int
    received_at: datetime
    raw: bytes
    terminated: bool
    sort: float | None
    redaction: str | None

    def wire_bytes(self) -> bytes:
        r"""Returns: the line as it came off the wire: ``raw`` plus ``\n`` when terminated."""
        return self.raw + b"\n" if self.terminated else self.raw


_LINES = """
SELECT line_no, received_at, raw, terminated, redaction,
       CASE WHEN jsonb_typeof(payload -> 'sort') = 'number'
            THEN (payload ->> 'sort')::double precision END AS sort
FROM stream_lines WHERE job_id = :job_id AND attempt = :attempt ORDER BY line_no
"""
_ATTEMPT = """
SELECT coalesce(
    (SELECT nullif(last_attempt, 0) FROM jobs WHERE job_id = :job_id),
    (SELECT max(attempt) FROM stream_lines WHERE job_id = :job_id))
"""


def read_attempt(
    conn: sa.Connection, *, job_id: str, attempt: int | None = None
) -> tuple[int, list[StoredLine]]:
    """Reads an attempt's archived lines in received order (``line_no``).

    Args:
        conn: A connection.
        job_id: The job.
        attempt: The attempt (default: the job's last attempt).

    Returns:
        ``(attempt, lines)``.

    Raises:
        ReplayError: No such job, or the attempt has no stored lines.
    """
    if attempt is None:
        attempt = conn.execute(sa.text(_ATTEMPT), {"job_id": job_id}).scalar()
        if attempt is None:
            raise ReplayError(f"job {job_id} is not in the archive", job_id=job_id)
    params = {"job_id": job_id, "attempt": attempt}
    rows = conn.execute(sa.text(_LINES), params)
    lines = [
        StoredLine(
            line_no=r.line_no,
            received_at=r.received_at,
            raw=bytes(r.raw),
            terminated=r.terminated,
            sort=r.sort,
            redaction=r.redaction,
        )
        for r in rows
    ]
    if not lines:
        raise ReplayError(
            f"job {job_id} attempt {attempt} has no archived lines", job_id=job_id, attempt=attempt
        )
    return attempt, lines


def by_sort(lines: Sequence[StoredLine]) -> list[StoredLine]:
    """Returns: ``lines`` ordered by ``sort`` (stable).

    A line without ``sort`` (``__usage__``, error lines) takes the highest ``sort`` received
    before it, so it stays behind everything the stream had reached when it arrived.
    """
    keyed = []
    reached = float("-inf")
    for line in lines:
        if line.sort is not None:
            reached = max(reached, line.sort)
        keyed.append((line.sort if line.sort is not None else reached, line))
    return [line for _, line in sorted(keyed, key=lambda pair: pair[0])]


def ndjson(lines: Sequence[StoredLine], *, sort: bool = False) -> Iterator[bytes]:
    """Yields: each line's wire bytes, in received order or (``sort``) by ``sort``."""
    for line in by_sort(lines) if sort else lines:
        yield line.wire_bytes()


def write_ndjson(out: BinaryIO, lines: Sequence[StoredLine], *, sort: bool = False) -> int:
    """Writes the lines to a binary stream; returns the number of bytes written."""
    written = 0
    for chunk in ndjson(lines, sort=sort):
        out.write(chunk)
        written += len(chunk)
    out.flush()
    return written


_FIND_CONVERSATION = """
SELECT j.job_id, j.session_settings FROM jobs j
WHERE j.question = :question AND j.identity = :identity AND j.last_attempt > 0
  AND EXISTS (SELECT 1 FROM stream_lines s
              WHERE s.job_id = j.job_id AND s.attempt = j.last_attempt)
  {run_filter}
ORDER BY (j.status = 'completed') DESC, j.finished_at DESC NULLS LAST, j.job_id
LIMIT :limit
"""
MAX_CANDIDATES: Final = 1000
"""Jobs of one question and identity compared for their row-level scope, newest first."""


def _same_scope(stored: object, asked: SessionSettings) -> bool:
    if not isinstance(stored, dict):
        return False
    try:
        archived = SessionSettings.model_validate(stored)
    except ValueError:
        return False
    return archived.row_level_scope() == asked.row_level_scope()


def find_conversation(
    engine: sa.Engine, *, question: str, settings: SessionSettings, run_id: str | None = None
) -> tuple[str, list[StoredLine]]:
    """Finds the archived conversation that answered ``question`` asked as ``settings``.

    The replay server's lookup (:mod:`pipeline.replay.server`): among the jobs with archived
    lines asked by the same identity with the same row-level scope
    (:meth:`models.chat.UserIdentity.row_level_scope`: user attributes, groups, security
    context; a conversation archived for other attributes showed other rows), a completed one
    first, then the latest finished.

    Args:
        engine: The archive's engine.
        question: The question, exactly as asked.
        settings: The request's ``sessionSettings``.
        run_id: Only this run's jobs (None: any run).

    Returns:
        ``(job_id, lines of its last attempt)``.

    Raises:
        ReplayError: No such conversation is archived for this identity and scope.
    """
    identity = settings.user_key
    run_filter = "AND j.run_id = :run_id" if run_id else ""
    query = sa.text(_FIND_CONVERSATION.format(run_filter=run_filter))
    params = {"question": question, "identity": identity, "run_id": run_id}
    with engine.connect() as conn:
        rows = conn.execute(query, {**params, "limit": MAX_CANDIDATES}).all()
        found = next((r.job_id for r in rows if _same_scope(r.session_settings, settings)), None)
        if found is None:
            raise ReplayError(
                f"no archived conversation for this question as {identity}"
                " with these row-level attributes",
                job_id="",
            )
        _, lines = read_attempt(conn, job_id=found)
    return found, lines
