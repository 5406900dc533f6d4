"""The archive: runs, jobs, job events, raw lines and the rows derived from them.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Every table is written out here (not generated from ``models/archive.py``), so this revision
stays what it was when later ones change the tables; ``tests/integration/pipeline/
test_archive.py`` checks the two agree. Names are unqualified: ``migrations/env.py`` sets
``search_path`` to the target schema.

``try_jsonb(text)`` casts text to jsonb and gives NULL where PostgreSQL refuses it (``\\u0000``,
lone surrogates, ``NaN``, numbers out of range): the line writer's fallback when a batch holds
a line Python parses but jsonb cannot store.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

TZ = sa.DateTime(timezone=True)
NOW = sa.text("now()")

TRY_JSONB = """
CREATE FUNCTION try_jsonb(value text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN value::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$
"""


def _check(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    quoted = ", ".join(f"'{v}'" for v in values)
    return sa.CheckConstraint(f"{column} IN ({quoted})", name=name)


def _key(*columns: str, table: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*columns, name=f"pk_{table}")


def _runs_and_jobs() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text()),
        sa.Column("source_file", sa.Text()),
        sa.Column("chat_url", sa.Text()),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        sa.Column("created_by", sa.Text()),
        sa.Column("job_count", sa.Integer()),
        sa.Column("options", pg.JSONB()),
        _key("run_id", table="runs"),
    )
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("persona", sa.Text()),
        sa.Column("question", sa.Text()),
        sa.Column("session_settings", pg.JSONB()),
        sa.Column("identity", sa.Text()),
        sa.Column("chat_url", sa.Text()),
        sa.Column("active_branch_name", sa.Text()),
        sa.Column("chat_id", sa.Text()),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_attempt", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("worker_id", sa.Text()),
        sa.Column("line_count", sa.Integer()),
        sa.Column("http_status", sa.Integer()),
        sa.Column("error", sa.Text()),
        sa.Column("error_type", sa.Text()),
        sa.Column("submitted_at", TZ),
        sa.Column("started_at", TZ),
        sa.Column("first_line_at", TZ),
        sa.Column("finished_at", TZ),
        sa.Column("normalised_attempt", sa.Integer()),
        sa.Column("updated_at", TZ, nullable=False, server_default=NOW),
        _key("job_id", table="jobs"),
        _check(
            "status",
            ("submitted", "running", "completed", "failed", "aborted"),
            "ck_jobs_status",
        ),
    )
    op.create_index("ix_jobs_run_id", "jobs", ["run_id"])


def _events_and_lines() -> None:
    op.create_table(
        "job_events",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("line_count", sa.Integer()),
        sa.Column("payload", pg.JSONB(), nullable=False),
        sa.Column("archived_at", TZ, nullable=False, server_default=NOW),
        _key("job_id", "attempt", "kind", table="job_events"),
        _check(
            "kind",
            ("accepted", "started", "first_line", "completed", "failed", "aborted"),
            "ck_job_events_kind",
        ),
    )
    op.create_table(
        "stream_lines",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("received_at", TZ, nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.Column("terminated", sa.Boolean(), nullable=False),
        sa.Column("chat_id", sa.Text()),
        sa.Column("parse_error", sa.Text()),
        sa.Column("message_id", sa.Text()),
        sa.Column("payload", pg.JSONB()),
        sa.Column("archived_at", TZ, nullable=False, server_default=NOW),
        _key("job_id", "attempt", "line_no", table="stream_lines"),
    )
    op.execute(TRY_JSONB)


def _messages_and_tool_calls() -> None:
    op.create_table(
        "messages",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("role", sa.Text()),
        sa.Column("graph_path", pg.ARRAY(sa.Text())),
        sa.Column("content", sa.Text()),
        sa.Column("thinking", sa.Text()),
        sa.Column("sort", pg.DOUBLE_PRECISION()),
        sa.Column("is_final", sa.Boolean(), nullable=False),
        sa.Column("is_in_process", sa.Boolean()),
        sa.Column("is_delta_merged", sa.Boolean(), nullable=False),
        sa.Column("first_line", sa.Integer(), nullable=False),
        sa.Column("last_line", sa.Integer(), nullable=False),
        sa.Column("tool_name", sa.Text()),
        sa.Column("extra", pg.JSONB(), nullable=False),
        _key("job_id", "attempt", "message_id", table="messages"),
    )
    op.create_table(
        "tool_calls",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text()),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("input", pg.JSONB()),
        sa.Column("result", pg.JSONB()),
        sa.Column("input_raw", sa.Text()),
        sa.Column("result_raw", sa.Text()),
        sa.Column("error", pg.JSONB()),
        sa.Column("payload_error", sa.Text()),
        sa.Column("complete", sa.Boolean(), nullable=False),
        _key("job_id", "attempt", "message_id", table="tool_calls"),
        _check("kind", ("meta", "sql", "other"), "ck_tool_calls_kind"),
    )


def _queries_and_answers() -> None:
    op.create_table(
        "sql_queries",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text()),
        sa.Column("sql_query", sa.Text()),
        sa.Column("query_title", sa.Text()),
        sa.Column("description", sa.Text()),
        sa.Column("user_request", sa.Text()),
        sa.Column("memory_id", sa.Text()),
        sa.Column("result_schema", pg.JSONB()),
        sa.Column("total_rows", sa.Integer()),
        sa.Column("result_uuid", sa.Text()),
        sa.Column("vega_spec", pg.JSONB()),
        sa.Column("rows", pg.JSONB()),
        sa.Column("returned_rows", sa.Integer()),
        sa.Column("error", sa.Text()),
        _key("job_id", "attempt", "message_id", table="sql_queries"),
    )
    op.create_table(
        "answers",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Text()),
        sa.Column("content", sa.Text()),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("message_id", sa.Text()),
        sa.Column("line_no", sa.Integer()),
        sa.Column("stream_errors", pg.ARRAY(sa.Text()), nullable=False),
        sa.Column("normalised_at", TZ, nullable=False, server_default=NOW),
        _key("job_id", "attempt", table="answers"),
        _check("source", ("final", "fallback", "none"), "ck_answers_source"),
    )


def upgrade() -> None:
    _runs_and_jobs()
    _events_and_lines()
    _messages_and_tool_calls()
    _queries_and_answers()


def downgrade() -> None:
    for table in (
        "answers",
        "sql_queries",
        "tool_calls",
        "messages",
        "stream_lines",
        "job_events",
        "jobs",
        "runs",
    ):
        op.drop_table(table)
    op.execute("DROP FUNCTION IF EXISTS try_jsonb(text)")
