"""Seals of complete attempts: what ``chatscribe verify`` recomputes beyond the line chain.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

One ``attempt_seals`` row per normalised (job, attempt) (:mod:`pipeline.archive.seals`): the
attempt's ``line_count`` and chain head, the sha256 of its stored bytes for each redacted or
deleted line, of the job's identity columns and of each derived table's rows, and ``seal``, the sha256
of them all. The sink writes it when it normalises the attempt; ``retention apply`` writes it
again after changing content (``reason``). Each seal is also appended to the anchor file
outside PostgreSQL when ``CHATSCRIBE_CHAIN_ANCHOR_DIR`` is set.

Attempts normalised before this revision are sealed by the upgrade as they are then (reason
``migrated``), with the same code the sink uses; they are in no anchor, so a ``verify`` with an
anchor reports them ``unanchored``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from pipeline.archive import seals

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

CHUNK = 500
"""Attempts sealed per statement by the upgrade."""


def upgrade() -> None:
    op.create_table(
        "attempt_seals",
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("line_count", sa.Integer, nullable=False),
        sa.Column("head", sa.LargeBinary),
        sa.Column("redacted", JSONB(none_as_null=True), nullable=False),
        sa.Column("job_sha256", sa.LargeBinary),
        sa.Column("derived", JSONB(none_as_null=True), nullable=False),
        sa.Column("seal", sa.LargeBinary, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column(
            "sealed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("job_id", "attempt", name="pk_attempt_seals"),
        sa.CheckConstraint(
            "reason IN ('normalised', 'job_changed', 'redacted', 'deleted', 'migrated')",
            name="ck_attempt_seals_reason",
        ),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT job_id, attempt FROM answers ORDER BY 1, 2"))
    pairs = [(r.job_id, r.attempt) for r in rows]
    for start in range(0, len(pairs), CHUNK):
        seals.seal_attempts(conn, pairs[start : start + CHUNK], reason="migrated")


def downgrade() -> None:
    op.drop_table("attempt_seals")
