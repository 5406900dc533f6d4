"""``stream_lines`` partitioned by month; an index for the audit's time window.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

Why ``stream_lines`` only: it holds ~300 rows per job attempt (every delta of an LLM-paced
stream) and nearly all of the archive's bytes; ``job_events``, ``messages``, ``tool_calls`` and
``sql_queries`` hold a handful of rows per attempt, are read only by key (job, attempt), and
keep their content metadata through retention by design, so they stay plain tables, as do
``jobs``, ``runs`` and ``answers`` (issue 13, point 4).

The partition key, ``partition_at``, is the time the *job* was submitted, carried on every line
record (header ``chatscribe-job-at``, :attr:`models.records.LineEnvelope.partition_at`), or the
line's ``received_at`` when the record does not carry it (records written before this change).
Either way it is a function of the Kafka record alone, so a record delivered twice carries the
same value, lands in the same partition, and the primary key ``(job_id, attempt, line_no,
partition_at)`` -- PostgreSQL requires a partitioned table's unique keys to include the partition
key -- still absorbs it with ``ON CONFLICT``. The idempotency key stays (job, attempt, line_no):
an attempt number is used by one stream read only (:mod:`pipeline.worker.attempts`), and all of
a job's lines go to one partition, so retention drops or detaches whole jobs.

Upgrade: the table is renamed ``stream_lines_0004``, a partitioned ``stream_lines`` is created
``LIKE`` it (every column, default and check constraint, whatever the revisions before this one
added) plus ``partition_at``; its other indexes are created again by their definitions; monthly
partitions ``stream_lines_pYYYY_MM`` cover every month holding a line, the current month and the
next, and ``stream_lines_default`` catches the rest; the rows are copied (``partition_at`` =
``received_at``, the rule for records without the header) and the old table dropped. The views
of 0003 read ``stream_lines`` and are dropped and created again from their own definitions. The
copy rewrites the table once (it needs as much free disk as ``stream_lines`` takes) and holds the
migration's lock while it runs (:mod:`migrations.env`): stop the sinks first.

``ix_jobs_asked_at`` indexes ``coalesce(started_at, submitted_at)``, the time ``chatscribe audit
--since/--until`` filters on, so an audit of a window does not scan every job.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

TABLE = "stream_lines"
LIKE = (
    "INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING STORAGE"
    " INCLUDING COMPRESSION INCLUDING COMMENTS"
)
KEY = "job_id, attempt, line_no"


def _views(conn: sa.Connection) -> list[tuple[str, str]]:
    """Every view of the schema, in creation order, with its definition."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c"
            " WHERE c.relkind = 'v' AND c.relnamespace = current_schema()::regnamespace"
            " ORDER BY c.oid"
        )
    )
    return [(r[0], r[1]) for r in rows]


def _indexes(conn: sa.Connection, table: str) -> list[tuple[str, str, bool]]:
    """``(name, definition, is_primary)`` of ``table``'s indexes."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisprimary FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = CAST(:t AS regclass)"
            " ORDER BY c.relname"
        ),
        {"t": table},
    )
    return [(r[0], r[1], bool(r[2])) for r in rows]


def _set_aside(conn: sa.Connection, suffix: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Drops the views, renames the table and its indexes; returns the views and the
    definitions of the non-primary indexes, to create again."""
    views = _views(conn)
    for name, _ in reversed(views):
        op.execute(f'DROP VIEW "{name}"')
    indexes = _indexes(conn, TABLE)
    op.execute(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_{suffix}")
    for name, _, _ in indexes:
        op.execute(f'ALTER INDEX "{name}" RENAME TO "{name}_{suffix}"')
    return views, [definition for _, definition, primary in indexes if not primary]


def _restore(views: list[tuple[str, str]], indexes: list[str]) -> None:
    for definition in indexes:
        op.execute(definition)
    for name, query in views:
        op.execute(f'CREATE VIEW "{name}" AS {query}')


def _month(when: datetime) -> datetime:
    when = when.astimezone(UTC)
    return datetime(when.year, when.month, 1, tzinfo=UTC)


def _next(month: datetime) -> datetime:
    return datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)


def _months(conn: sa.Connection) -> list[datetime]:
    """The months holding a line, the current month and the next."""
    low, high = conn.execute(
        sa.text(f"SELECT min(received_at), max(received_at) FROM {TABLE}_0004")
    ).one()
    now = _month(datetime.now(UTC))
    month, last = _month(low or now), max(_month(high or now), _next(now))
    out = []
    while month <= last:
        out.append(month)
        month = _next(month)
    return out


def upgrade() -> None:
    conn = op.get_bind()
    views, indexes = _set_aside(conn, "0004")
    op.execute(
        f"CREATE TABLE {TABLE} (LIKE {TABLE}_0004 {LIKE},"
        " partition_at timestamptz NOT NULL) PARTITION BY RANGE (partition_at)"
    )
    op.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT pk_{TABLE} PRIMARY KEY ({KEY}, partition_at)")
    for month in _months(conn):
        op.execute(
            f"CREATE TABLE {TABLE}_p{month.year:04d}_{month.month:02d} PARTITION OF {TABLE}"
            f" FOR VALUES FROM ('{month.isoformat()}') TO ('{_next(month).isoformat()}')"
        )
    op.execute(f"CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT")
    op.execute(f"INSERT INTO {TABLE} SELECT o.*, o.received_at FROM {TABLE}_0004 AS o")
    op.execute(f"DROP TABLE {TABLE}_0004")
    _restore(views, indexes)
    op.execute("CREATE INDEX ix_jobs_asked_at ON jobs ((coalesce(started_at, submitted_at)))")


def downgrade() -> None:
    conn = op.get_bind()
    op.execute("DROP INDEX ix_jobs_asked_at")
    views, indexes = _set_aside(conn, "0006")
    op.execute(f"CREATE TABLE {TABLE} (LIKE {TABLE}_0006 {LIKE})")
    op.execute(f"ALTER TABLE {TABLE} DROP COLUMN partition_at")
    op.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT pk_{TABLE} PRIMARY KEY ({KEY})")
    columns = ", ".join(
        f'"{c}"'
        for c in conn.execute(
            sa.text(
                "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass)"
                " AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
            ),
            {"t": TABLE},
        ).scalars()
    )
    op.execute(
        f"INSERT INTO {TABLE} ({columns}) SELECT DISTINCT ON ({KEY}) {columns}"
        f" FROM {TABLE}_0006 ORDER BY {KEY}, partition_at"
    )
    op.execute(f"DROP TABLE {TABLE}_0006")
    _restore(views, indexes)
