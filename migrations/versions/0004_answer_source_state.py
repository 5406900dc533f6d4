"""Answers may come from the thread's state (``answers.source = 'state'``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

A takeover that fetches the thread's state (issue 4, "Delivery") gets no ``final`` line; its
answer is read from the ``__state__`` line's messages (:mod:`pipeline.transcript.thread_state`) and
recorded with ``source = 'state'``.
"""

from __future__ import annotations

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def _source_check(values: tuple[str, ...]) -> None:
    quoted = ", ".join(f"'{v}'" for v in values)
    op.drop_constraint("ck_answers_source", "answers", type_="check")
    op.create_check_constraint("ck_answers_source", "answers", f"source IN ({quoted})")


def upgrade() -> None:
    _source_check(("final", "state", "fallback", "none"))


def downgrade() -> None:
    op.execute("UPDATE answers SET source = 'fallback' WHERE source = 'state'")
    _source_check(("final", "fallback", "none"))
