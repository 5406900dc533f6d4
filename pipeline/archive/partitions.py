"""Monthly partitions of ``stream_lines``: create them ahead, list them, detach or drop them.

A database module (SQLAlchemy). Since migration 0006, ``stream_lines`` is partitioned by
``RANGE (partition_at)`` (PostgreSQL declarative partitioning,
https://www.postgresql.org/docs/15/ddl-partitioning.html): one partition per UTC calendar month,
named ``stream_lines_pYYYY_MM``, plus ``stream_lines_default``, which catches a line whose month
has no partition yet (a clock far ahead, a job resubmitted from a detached month).

:func:`ensure` creates the partitions of the months asked for; when the default partition already
holds lines of such a month (PostgreSQL then refuses ``CREATE TABLE ... PARTITION OF``), their
rows are moved into a new table that is then attached (``ATTACH PARTITION``), in the same
transaction. It takes a transaction-scoped advisory lock, so sinks and ``chatscribe db
partitions ensure`` may run it at once, and a short ``lock_timeout``: creating a partition locks
the parent table, so it waits for the write in flight, never for long.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

import sqlalchemy as sa

logger = logging.getLogger(__name__)

PARENT: Final = "stream_lines"
DEFAULT: Final = "stream_lines_default"
KEY: Final = "partition_at"
LOCK_NAMESPACE: Final = "chatscribe-partitions:"
LOCK_TIMEOUT: Final = "10s"
_NAME: Final = re.compile(r"^stream_lines_p(\d{4})_(\d{2})$")


@dataclass(frozen=True)
class Partition:
    """An attached monthly partition: ``[start, end)`` of ``partition_at``, UTC."""

    name: str
    start: datetime
    end: datetime


def month_start(when: datetime) -> datetime:
    """Returns: the first instant of ``when``'s UTC month (naive input is taken as UTC)."""
    when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return datetime(when.year, when.month, 1, tzinfo=UTC)


def add_months(month: datetime, n: int) -> datetime:
    """Returns: the first instant of the month ``n`` months after ``month`` (``n`` may be < 0)."""
    index = month.year * 12 + month.month - 1 + n
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def partition_name(month: datetime) -> str:
    """Returns: ``stream_lines_pYYYY_MM`` for the month holding ``month``."""
    start = month_start(month)
    return f"{PARENT}_p{start.year:04d}_{start.month:02d}"


def ensure_ahead(conn: sa.Connection, *, now: datetime, ahead: int) -> list[str]:
    """Creates the partitions of ``now``'s month and the ``ahead`` months after it.

    Args:
        conn: A connection inside a transaction (committed by the caller).
        now: The current time.
        ahead: Months after the current one, >= 0.

    Returns:
        The names of the partitions created (empty when they all existed).

    Raises:
        ValueError: ``ahead`` is negative.
        sqlalchemy.exc.DBAPIError: Translated by the caller
            (:func:`pipeline.archive.engine.translate_errors`).
    """
    if ahead < 0:
        raise ValueError(f"ahead must be >= 0, got {ahead}")
    first = month_start(now)
    return ensure(conn, months=[add_months(first, n) for n in range(ahead + 1)])


def ensure(conn: sa.Connection, *, months: Iterable[datetime]) -> list[str]:
    """Creates the monthly partitions holding ``months`` that do not exist (module docstring).

    Returns:
        The names of the partitions created, oldest first.
    """
    conn.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    conn.execute(
        sa.text("SELECT pg_advisory_xact_lock(hashtext(:key || current_schema()))"),
        {"key": LOCK_NAMESPACE},
    )
    existing = {p.name for p in list_partitions(conn)}
    created = []
    for start in sorted({month_start(m) for m in months}):
        name = partition_name(start)
        if name not in existing:
            _create(conn, name, start, add_months(start, 1))
            created.append(name)
    if created:
        logger.info("partitions created names=%s", ",".join(created))
    return created


def _create(conn: sa.Connection, name: str, start: datetime, end: datetime) -> None:
    bounds = {"lo": start, "hi": end}
    strays = conn.execute(
        sa.text(f"SELECT EXISTS (SELECT 1 FROM {DEFAULT} WHERE {KEY} >= :lo AND {KEY} < :hi)"),
        bounds,
    ).scalar_one()
    values = f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
    if not strays:
        conn.execute(sa.text(f'CREATE TABLE "{name}" PARTITION OF {PARENT} {values}'))
        return
    conn.execute(
        sa.text(
            f'CREATE TABLE "{name}" (LIKE {PARENT}'
            " INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)"
        )
    )
    moved = conn.execute(
        sa.text(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE {KEY} >= :lo AND {KEY} < :hi"
            f' RETURNING *) INSERT INTO "{name}" SELECT * FROM moved'
        ),
        bounds,
    ).rowcount
    conn.execute(sa.text(f'ALTER TABLE {PARENT} ATTACH PARTITION "{name}" {values}'))
    logger.warning("partition created from strays name=%s moved=%d", name, moved)


def list_partitions(conn: sa.Connection) -> list[Partition]:
    """Returns the attached monthly partitions of ``stream_lines``, oldest first.

    The default partition and tables not named ``stream_lines_pYYYY_MM`` are left out.
    """
    rows = conn.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent"
            " JOIN pg_namespace n ON n.oid = p.relnamespace"
            " WHERE n.nspname = current_schema() AND p.relname = :parent"
        ),
        {"parent": PARENT},
    ).scalars()
    out = []
    for name in rows:
        match = _NAME.match(name)
        if match:
            start = datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC)
            out.append(Partition(name, start, add_months(start, 1)))
    return sorted(out, key=lambda p: p.start)


def remove(conn: sa.Connection, *, partition: Partition, action: Literal["drop", "detach"]) -> None:
    """Drops a partition, or detaches it.

    A detached partition stays a plain table of the schema, to be dumped and dropped by hand
    (``pg_dump -t``). ``ALTER TABLE ... DETACH PARTITION`` without
    ``CONCURRENTLY``, which cannot run in a transaction.
    """
    table = f'"{partition.name}"'
    conn.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    conn.execute(sa.text(f"ALTER TABLE {PARENT} DETACH PARTITION {table}"))
    if action == "drop":
        conn.execute(sa.text(f"DROP TABLE {table}"))
    logger.info("partition removed name=%s action=%s", partition.name, action)


def stray_count(conn: sa.Connection) -> int:
    """Returns: the rows in ``stream_lines_default`` (lines of a month without a partition)."""
    query = sa.text(f"SELECT count(*) FROM {DEFAULT}")
    return int(conn.execute(query).scalar_one())


def estimated_rows(conn: sa.Connection, *, name: str) -> int:
    """Returns the planner's row estimate of a table.

    ``pg_class.reltuples``; 0 before the first ``ANALYZE``.
    """
    query = sa.text(
        "SELECT greatest(c.reltuples, 0)::bigint FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relname = :t"
    )
    return int(conn.execute(query, {"t": name}).scalar_one_or_none() or 0)
