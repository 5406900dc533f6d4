"""Runs written straight into a migrated schema for the review tests (issue 26).

``COPY`` as the console bench writes them (:func:`bench.console_pages._copy_run`: each job
completed with an answer and one SQL result ``[["UA", n]]``), plus the message of that SQL call,
which a job's results are ordered by (:func:`pipeline.archive.diff.load_run`).
"""

from __future__ import annotations

import psycopg

from bench.console_pages import _copy_run
from pipeline.settings import Settings
from tests.conftest import psycopg_conninfo


def copy_run(settings: Settings, run_id: str, jobs: int) -> list[str]:
    """Writes a completed run of ``jobs`` jobs; returns their ids in submission order."""
    dsn = psycopg_conninfo(settings.database_url.get_secret_value())
    with psycopg.connect(dsn) as conn:
        _copy_run(conn, settings.database_schema, run_id, jobs)
        conn.execute(f'SET search_path = "{settings.database_schema}"')
        conn.execute(
            "INSERT INTO messages (job_id, attempt, message_id, role, is_final, is_delta_merged,"
            " first_line, last_line, extra) SELECT job_id, 1, 't1', 'assistant', false, false,"
            " 2, 2, '{}' FROM jobs WHERE run_id = %s",
            (run_id,),
        )
    return [f"{run_id}-{n:06d}" for n in range(jobs)]
