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
import time
import uuid
from collections.abc import Callable
from typing import Final

from models.records import ChatJob
from pipeline.archive.engine import create_engine
from pipeline.archive.runs import (
    PastQuestion,
    count_rows,
    past_questions,
    record_run,
    run_progress,
    run_results,
)
from pipeline.chat.targets import OutboundPolicy
from pipeline.errors import RunNotFoundError
from pipeline.runs.runner import ARCHIVE_TABLES, RunOutcome
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings

POLL_INTERVAL_S: Final = 0.5


def rerun_jobs(
    past: list[PastQuestion], *, run_id: str, new_run_id: str, chat_url: str | None
) -> list[ChatJob]:
    """Builds the new run's jobs from the old run's archived jobs.

    Args:
        past: The old run's questions (:func:`pipeline.archive.runs.past_questions`).
        run_id: The old run (for the error).
        new_run_id: The new run's id.
        chat_url: Chat endpoint for every job (None: each job's archived URL).

    Returns:
        The jobs, in the old run's submission order, each with a fresh id.

    Raises:
        RunNotFoundError: The old run has no job with a question and an identity.
    """
    if not past:
        raise RunNotFoundError(run_id)
    return [
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
        for row in past
    ]


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
        ChatUrlRefusedError: A job's chat URL is one the workers refuse (nothing submitted).
    """
    new_run_id = str(uuid.uuid4())
    engine = create_engine(settings)
    try:
        past = past_questions(engine, run_id=run_id)
        jobs = rerun_jobs(past, run_id=run_id, new_run_id=new_run_id, chat_url=chat_url)
        urls = sorted({job.chat_url for job in jobs})
        policy = OutboundPolicy.from_settings(settings)
        for url in urls:
            policy.check(url, own_key=True)
        record_run(
            engine,
            run_id=new_run_id,
            name=f"rerun of {past[0].run_name or run_id}",
            source_file=None,
            chat_url=urls[0] if len(urls) == 1 else None,
            job_count=len(jobs),
            created_by=getpass.getuser(),
            options={"rerun_of": run_id},
            rerun_of=run_id,
        )
        started = time.monotonic()
        await submit_jobs(settings, jobs)
        deadline = started + timeout_s
        while True:
            progress = await asyncio.to_thread(
                run_progress, engine, run_id=new_run_id, expected=len(jobs)
            )
            if progress.done or time.monotonic() >= deadline:
                break
            if check_alive is not None:
                check_alive()
            await asyncio.sleep(POLL_INTERVAL_S)
        return RunOutcome(
            run_id=new_run_id,
            results=run_results(engine, run_id=new_run_id),
            finished=progress.done,
            elapsed_s=time.monotonic() - started,
            archived=count_rows(engine, run_id=new_run_id, tables=ARCHIVE_TABLES),
        )
    finally:
        engine.dispose()
