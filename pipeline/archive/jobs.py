"""Archive writes for lifecycle events: per-job locks, ``job_events`` and ``jobs`` rows.

A database module used by :class:`pipeline.archive.writer.ArchiveWriter` inside its transaction. The
``jobs`` row is read, folded with the batch's events by the pure
:func:`pipeline.transcript.lifecycle.fold` and written back; the per-job advisory lock taken first
makes that read-modify-write safe when several sinks share the topics.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from models.archive import storable_row
from models.records import JobEvent
from pipeline.archive.tables import job_events, jobs
from pipeline.transcript.lifecycle import COLUMNS, JobState, fold

_LOCK_NAMESPACE: Final = b"chatscribe-job:"
_LOCK_SQL: Final = sa.text(
    "SELECT count(pg_advisory_xact_lock(k)) FROM"
    " (SELECT k FROM unnest(CAST(:keys AS bigint[])) AS k ORDER BY k) AS sorted_keys"
)


@functools.lru_cache(maxsize=16384)
def lock_key(job_id: str) -> int:
    """Returns: the signed 64-bit advisory-lock key of a job (BLAKE2b of its id).

    Cached: a sink batch at 1,000 paced streams locks ~1,000 jobs, nearly all of them locked by
    the batch before (~1 µs of hashing each, against a dictionary lookup).
    """
    digest = hashlib.blake2b(_LOCK_NAMESPACE + job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_jobs(conn: sa.Connection, job_ids: Iterable[str]) -> None:
    """Takes the transaction-scoped advisory lock of every job.

    In key order (no deadlock between sinks locking overlapping sets); released at commit or
    rollback.
    """
    keys = sorted({lock_key(job_id) for job_id in job_ids})
    if keys:
        conn.execute(_LOCK_SQL, {"keys": keys})


def insert_events(conn: sa.Connection, events: Sequence[JobEvent]) -> int:
    """Inserts events into ``job_events``, keeping the first of each (job, attempt, kind).

    Returns:
        How many rows were new.
    """
    rows = [_event_row(event) for event in events]
    if not rows:
        return 0
    return len(conn.execute(_INSERT_EVENTS, rows).all())


def upsert_jobs(conn: sa.Connection, events: Sequence[JobEvent]) -> int:
    """Folds the events into their jobs' rows and writes changes.

    The fold is :mod:`pipeline.transcript.lifecycle`'s.

    Returns:
        How many ``jobs`` rows changed.
    """
    by_job: dict[str, list[JobEvent]] = defaultdict(list)
    for event in events:
        by_job[event.job_id].append(event)
    if not by_job:
        return 0
    current = read_states(conn, by_job)
    changed = []
    for job_id, job_events_ in sorted(by_job.items()):
        before = current.get(job_id)
        after = fold(before, job_events_)
        if after != before:
            changed.append(storable_row(after.to_row()))
    if changed:
        conn.execute(_UPSERT_JOBS, changed)
    return len(changed)


def read_states(conn: sa.Connection, job_ids: Iterable[str]) -> dict[str, JobState]:
    """Returns: the lifecycle columns of the existing ``jobs`` rows among ``job_ids``."""
    ids = sorted(set(job_ids))
    query = sa.select(*(jobs.c[c] for c in COLUMNS)).where(jobs.c.job_id.in_(ids))
    return {row.job_id: JobState(**row._asdict()) for row in conn.execute(query)}


def _event_row(event: JobEvent) -> dict[str, Any]:
    row = {
        "job_id": event.job_id,
        "attempt": event.attempt,
        "kind": event.kind,
        "at": event.at,
        "line_count": event.line_count,
        "payload": json.loads(event.to_value()),
    }
    return storable_row(row)


def _upsert_jobs() -> Any:
    statement = pg_insert(jobs)
    updates: dict[str, Any] = {c: statement.excluded[c] for c in COLUMNS if c != "job_id"}
    updates["updated_at"] = sa.func.now()
    return statement.on_conflict_do_update(index_elements=["job_id"], set_=updates)


_INSERT_EVENTS: Final = pg_insert(job_events).on_conflict_do_nothing().returning(job_events.c.kind)
"""One statement run with a list of rows: SQLAlchemy's "insertmanyvalues" sends them as
multi-row ``INSERT``s of a cached compilation (where ``.values(rows)`` compiled a new statement
of thousands of parameters per batch), and ``RETURNING`` lists only the rows inserted.
Source: https://docs.sqlalchemy.org/en/20/core/connections.html#engine-insertmanyvalues."""
_UPSERT_JOBS: Final = _upsert_jobs()
