"""Review queues, reviewers and verdicts: human sign-off that ``chatscribe verify`` covers.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

* ``reviewers``: a named identity and the sha256 of its token (the token itself is shown once,
  by ``chatscribe review reviewers add``); ``revoked_at`` set by ``revoke``.
* ``review_queues``: a filter over the archive (``filter``, as given) and the reviewers
  assigned; ``review_items`` the jobs it selected, in order (``pair_job_id``: the other run's
  job of a pairwise queue).
* ``review_verdicts``: one row per verdict, appended, never updated (:mod:`pipeline.archive.
  verdicts`): ``seq`` counts from 1 without a gap, and ``hash`` = sha256(``prev_hash`` + the
  row's canonical JSON) chains every verdict to the one before, so an edited or deleted row is
  found by ``chatscribe verify``. A trigger refuses ``UPDATE``, ``DELETE`` and ``TRUNCATE`` of
  the table (a superuser can still bypass it; the chain is what catches that).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

VERDICTS = (
    "'correct', 'incorrect', 'needs_follow_up', 'not_applicable', 'a_better', 'b_better', 'equal'"
)


def _tz(name: str, *, nullable: bool = False, now: bool = False) -> sa.Column:  # type: ignore[type-arg]
    default = sa.func.now() if now else None
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable, server_default=default)


def upgrade() -> None:
    op.create_table(
        "reviewers",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("token_sha256", sa.LargeBinary, nullable=False),
        _tz("added_at", now=True),
        _tz("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_reviewers"),
    )
    op.create_index("ix_reviewers_token_sha256", "reviewers", ["token_sha256"], unique=True)
    op.create_table(
        "review_queues",
        sa.Column("queue_id", sa.Text, nullable=False),
        sa.Column("filter", JSONB(none_as_null=True), nullable=False),
        sa.Column("reviewers", ARRAY(sa.Text), nullable=False),
        sa.Column("compare_run", sa.Text),
        sa.Column("item_count", sa.Integer, nullable=False),
        _tz("created_at", now=True),
        sa.Column("created_by", sa.Text),
        sa.PrimaryKeyConstraint("queue_id", name="pk_review_queues"),
    )
    op.create_table(
        "review_items",
        sa.Column("queue_id", sa.Text, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("pair_job_id", sa.Text),
        sa.PrimaryKeyConstraint("queue_id", "position", name="pk_review_items"),
    )
    op.create_table(
        "review_verdicts",
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("queue_id", sa.Text, nullable=False),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("pair_job_id", sa.Text),
        sa.Column("reviewer", sa.Text, nullable=False),
        sa.Column("verdict", sa.Text, nullable=False),
        sa.Column("labels", ARRAY(sa.Text), nullable=False),
        sa.Column("comment", sa.Text),
        sa.Column("expected", JSONB(none_as_null=True)),
        sa.Column("supersedes", sa.BigInteger),
        _tz("created_at"),
        sa.Column("prev_hash", sa.LargeBinary, nullable=False),
        sa.Column("hash", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_review_verdicts"),
        sa.CheckConstraint(f"verdict IN ({VERDICTS})", name="ck_review_verdicts_verdict"),
    )
    op.create_index("ix_review_verdicts_job_id_seq", "review_verdicts", ["job_id", "seq"])
    op.create_index("ix_review_verdicts_queue_id_seq", "review_verdicts", ["queue_id", "seq"])
    op.execute(
        """
        CREATE FUNCTION review_verdicts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'review_verdicts is append-only: % refused (a changed verdict is a'
            ' new row that supersedes the old)', TG_OP;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER review_verdicts_append_only BEFORE UPDATE OR DELETE ON review_verdicts"
        " FOR EACH ROW EXECUTE FUNCTION review_verdicts_append_only()"
    )
    op.execute(
        "CREATE TRIGGER review_verdicts_no_truncate BEFORE TRUNCATE ON review_verdicts"
        " FOR EACH STATEMENT EXECUTE FUNCTION review_verdicts_append_only()"
    )


def downgrade() -> None:
    op.drop_table("review_verdicts")
    op.execute("DROP FUNCTION review_verdicts_append_only()")
    op.drop_table("review_items")
    op.drop_table("review_queues")
    op.drop_table("reviewers")
