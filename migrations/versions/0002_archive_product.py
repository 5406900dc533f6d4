"""The archive as a product: rerun links, hash chains, redaction marks, touched views, outbox.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

* ``runs.rerun_of``: the run a ``chatscribe rerun`` asked again.
* ``stream_lines.raw_sha256``: sha256 of the line as received (before any redaction);
  ``chain_hash``: sha256(previous line's ``chain_hash`` + line key + ``raw_sha256``), see
  :mod:`pipeline.archive.chain`; ``redaction`` (``redacted``/``deleted``) and ``redacted_at`` mark a row
  whose ``raw`` no longer holds the received bytes (:mod:`pipeline.archive.retention`).
  ``ix_stream_lines_unchained`` (partial, ``chain_hash IS NULL``) finds lines waiting for a
  predecessor; it stays empty in the common case.
* ``sql_queries.views``/``members``: what the SQL touched (sqlglot), kept when content expires.
* ``answers.published_at``: when the compact answer record reached ``chat.answers`` (an outbox:
  NULL until Kafka acknowledged it).

Existing rows get NULL hashes; ``chatscribe verify`` reports them as unchained, never as changed.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("runs", sa.Column("rerun_of", sa.Text()))
    op.add_column("stream_lines", sa.Column("raw_sha256", sa.LargeBinary()))
    op.add_column("stream_lines", sa.Column("chain_hash", sa.LargeBinary()))
    op.add_column("stream_lines", sa.Column("redaction", sa.Text()))
    op.add_column("stream_lines", sa.Column("redacted_at", TZ))
    op.create_check_constraint(
        "ck_stream_lines_redaction",
        "stream_lines",
        "redaction IN ('redacted', 'deleted')",
    )
    op.create_index(
        "ix_stream_lines_unchained",
        "stream_lines",
        ["job_id", "attempt", "line_no"],
        postgresql_where=sa.text("chain_hash IS NULL"),
    )
    op.add_column("sql_queries", sa.Column("views", pg.ARRAY(sa.Text())))
    op.add_column("sql_queries", sa.Column("members", pg.ARRAY(sa.Text())))
    op.add_column("answers", sa.Column("published_at", TZ))
    op.create_index(
        "ix_answers_unpublished",
        "answers",
        ["job_id", "attempt"],
        postgresql_where=sa.text("published_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_answers_unpublished", table_name="answers")
    op.drop_column("answers", "published_at")
    op.drop_column("sql_queries", "members")
    op.drop_column("sql_queries", "views")
    op.drop_index("ix_stream_lines_unchained", table_name="stream_lines")
    op.drop_constraint("ck_stream_lines_redaction", "stream_lines")
    for column in ("redacted_at", "redaction", "chain_hash", "raw_sha256"):
        op.drop_column("stream_lines", column)
    op.drop_column("runs", "rerun_of")
