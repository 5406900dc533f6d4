"""Full-text search over questions and answers, for the console's Search page.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

Two GIN expression indexes (PostgreSQL documentation, "Text Search", 12.2.2 "Creating
Indexes"): ``to_tsvector('english', coalesce(jobs.question, ''))`` and
``to_tsvector('english', coalesce(answers.content, ''))``. :mod:`pipeline.archive.console_queries`
searches with exactly these expressions so the planner uses the indexes. Expression indexes
follow every UPDATE, so a question or answer that retention redacts or deletes is found only by
what it now holds.

``ix_jobs_run_page`` (``run_id, submitted_at, job_id``) serves a run's jobs page in submission
order without sorting the run.
"""

from __future__ import annotations

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

QUESTION_TSV = "to_tsvector('english'::regconfig, coalesce(question, ''))"
ANSWER_TSV = "to_tsvector('english'::regconfig, coalesce(content, ''))"


def upgrade() -> None:
    op.execute(f"CREATE INDEX ix_jobs_question_fts ON jobs USING gin ({QUESTION_TSV})")
    op.execute(f"CREATE INDEX ix_answers_content_fts ON answers USING gin ({ANSWER_TSV})")
    op.create_index("ix_jobs_run_page", "jobs", ["run_id", "submitted_at", "job_id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_run_page", table_name="jobs")
    op.drop_index("ix_answers_content_fts", table_name="answers")
    op.drop_index("ix_jobs_question_fts", table_name="jobs")
