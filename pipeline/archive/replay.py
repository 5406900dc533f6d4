"""Replay: a job's NDJSON exactly as received, from the archive's raw lines.

A database module (SQLAlchemy). ``stream_lines.raw`` holds each line's bytes as received
(without its ``\\n``; ``terminated`` says whether one followed), so writing the lines of an
attempt in ``line_no`` order, each followed by ``\\n`` when it was terminated, gives back the
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
from typing import BinaryIO

import sqlalchemy as sa


class ReplayError(LookupError):
    """The job, or the attempt, has no archived lines.

    Attributes:
        job_id, attempt: What was asked for.
    """

    def __init__(self, message: str, *, job_id: str, attempt: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.attempt = attempt


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
        """Returns: the line as it came off the wire: ``raw`` plus ``\\n`` when terminated."""
        return self.raw + b"\n" if self.terminated else self.raw


_LINES = """
SELECT line_no, received_at, raw, terminated, redaction,
       CASE WHEN jsonb_typeof(payload -> 'sort') = 'number'
            THEN (payload ->> 'sort')::double precision END AS sort
FROM "{schema}".stream_lines WHERE job_id = :job_id AND attempt = :attempt ORDER BY line_no
"""
_ATTEMPT = """
SELECT coalesce(
    (SELECT nullif(last_attempt, 0) FROM "{schema}".jobs WHERE job_id = :job_id),
    (SELECT max(attempt) FROM "{schema}".stream_lines WHERE job_id = :job_id))
"""


def read_attempt(
    conn: sa.Connection, *, schema: str, job_id: str, attempt: int | None = None
) -> tuple[int, list[StoredLine]]:
    """Reads an attempt's archived lines in received order (``line_no``).

    Args:
        conn: A connection.
        schema: The archive's schema.
        job_id: The job.
        attempt: The attempt (default: the job's last attempt).

    Returns:
        ``(attempt, lines)``.

    Raises:
        ReplayError: No such job, or the attempt has no stored lines.
    """
    if attempt is None:
        attempt = conn.execute(sa.text(_ATTEMPT.format(schema=schema)), {"job_id": job_id}).scalar()
        if attempt is None:
            raise ReplayError(f"job {job_id} is not in the archive", job_id=job_id)
    params = {"job_id": job_id, "attempt": attempt}
    rows = conn.execute(sa.text(_LINES.format(schema=schema)), params)
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
    """Returns: ``lines`` ordered by ``sort`` (stable); a line without ``sort`` (``__usage__``,
    error lines) takes the highest ``sort`` received before it, so it stays behind everything
    the stream had reached when it arrived."""
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
