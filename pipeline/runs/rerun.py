"""``chatscribe rerun RUN_ID``: ask a past run's questions again, as the same identities.

The archive keeps every job's question, persona, ``sessionSettings`` (wire JSON), branch and
Chat API URL, so a run can be repeated without its questions file: each job becomes a new job
(fresh id) of a new run whose ``runs.rerun_of`` names the old one, sent to ``chat_url`` (default:
each job's own URL). Then the run is followed and read back exactly like ``chatscribe batch``
(:mod:`pipeline.runs.runner`), and ``chatscribe diff OLD NEW`` compares the two.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa

from models.records import ChatJob
from pipeline.archive.diff import RunNotFoundError
from pipeline.archive.engine import create_engine
from pipeline.archive.runs import count_rows, run_progress, run_results
from pipeline.runs.runner import ARCHIVE_TABLES, RunOutcome
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings

POLL_INTERVAL_S: Final = 0.5

_OLD_JOBS = """
SELECT j.question, j.persona, j.session_settings, j.chat_url, j.active_branch_name, r.name,
       r.options
FROM "{schema}".jobs j LEFT JOIN "{schema}".runs r ON r.run_id = j.run_id
WHERE j.run_id = :run_id AND j.question IS NOT NULL AND j.session_settings IS NOT NULL
ORDER BY j.submitted_at, j.job_id
"""
_RECORD = """
INSERT INTO "{schema}".runs (run_id, name, source_file, chat_url, created_by, job_count, options,
                             rerun_of)
VALUES (:run_id, :name, NULL, :chat_url, :created_by, :job_count, CAST(:options AS jsonb), :old)
ON CONFLICT (run_id) DO NOTHING
"""


def rerun_jobs(
    conn: sa.Connection, *, schema: str, run_id: str, new_run_id: str, chat_url: str | None
) -> tuple[str | None, list[ChatJob]]:
    """Builds the new run's jobs from the old run's archived jobs.

    Returns:
        ``(old run name, jobs)`` in the old run's submission order.

    Raises:
        RunNotFoundError: The old run has no job with a question and an identity.
    """
    rows = conn.execute(sa.text(_OLD_JOBS.format(schema=schema)), {"run_id": run_id}).all()
    if not rows:
        raise RunNotFoundError(run_id)
    jobs = [
        ChatJob.model_validate(
            {
                "job_id": str(uuid.uuid4()),
                "run_id": new_run_id,
                "question": row.question,
                "persona": row.persona,
                "session_settings": row.session_settings,
                "chat_url": chat_url or row.chat_url,
                "active_branch_name": row.active_branch_name,
            }
        )
        for row in rows
    ]
    return rows[0].name, jobs


async def rerun(
    settings: Settings,
    run_id: str,
    *,
    chat_url: str | None = None,
    timeout_s: float = 600.0,
    check_alive: Callable[[], None] | None = None,
) -> RunOutcome:
    """Asks a past run's questions again as a new run linked to it (module docstring).

    Args:
        settings: Kafka, PostgreSQL and topic settings.
        run_id: The run to repeat.
        chat_url: Chat endpoint for every job (default: each job's archived URL).
        timeout_s: Seconds to wait for the new run.
        check_alive: Called at every poll; raises to stop waiting.

    Returns:
        The new run's outcome (its ``run_id`` is new; ``runs.rerun_of`` is ``run_id``).

    Raises:
        RunNotFoundError: The old run is not in the archive.
    """
    new_run_id = str(uuid.uuid4())
    schema = settings.database_schema
    engine = create_engine(settings)
    try:
        with engine.begin() as conn:
            name, jobs = rerun_jobs(
                conn, schema=schema, run_id=run_id, new_run_id=new_run_id, chat_url=chat_url
            )
            conn.execute(sa.text(_RECORD.format(schema=schema)), _run_row(name, jobs, run_id))
        started = time.monotonic()
        await submit_jobs(settings, jobs)
        deadline = started + timeout_s
        while True:
            progress = await asyncio.to_thread(
                run_progress, engine, schema=schema, run_id=new_run_id, expected=len(jobs)
            )
            if progress.done or time.monotonic() >= deadline:
                break
            if check_alive is not None:
                check_alive()
            await asyncio.sleep(POLL_INTERVAL_S)
        return RunOutcome(
            run_id=new_run_id,
            results=run_results(engine, schema=schema, run_id=new_run_id),
            finished=progress.done,
            elapsed_s=time.monotonic() - started,
            archived=count_rows(engine, schema=schema, run_id=new_run_id, tables=ARCHIVE_TABLES),
        )
    finally:
        engine.dispose()


def _run_row(name: str | None, jobs: list[ChatJob], old: str) -> dict[str, Any]:
    urls = sorted({job.chat_url for job in jobs})
    return {
        "run_id": jobs[0].run_id,
        "name": f"rerun of {name or old}",
        "chat_url": urls[0] if len(urls) == 1 else None,
        "created_by": getpass.getuser(),
        "job_count": len(jobs),
        "options": json.dumps({"rerun_of": old}),
        "old": old,
    }
