"""Run a questions file through the pipeline and collect its results.

Flow: validate the file → ensure the topics exist → record the run in PostgreSQL → publish an
``accepted`` event and the job for every (question, persona) → wait until the archive holds every
job finished and normalised → read the results back from PostgreSQL. The report is built from
what the archive holds, not from anything in memory, so it shows what was really recorded.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from models import wire
from models.records import RateLimits
from pipeline.archive.engine import ArchiveEngine, create_engine
from pipeline.archive.runs import (
    JobResult,
    RunInfo,
    RunProgress,
    count_rows,
    read_run,
    record_run,
    run_progress,
    run_results,
)
from pipeline.chat.targets import OutboundPolicy
from pipeline.errors import RunNotFoundError
from pipeline.runs.batch import expand_jobs, load_questions
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

ARCHIVE_TABLES = ("stream_lines", "messages", "tool_calls", "sql_queries", "answers")
POLL_INTERVAL_S = 0.5


@dataclass(frozen=True)
class RunOutcome:
    """What a run produced.

    Attributes:
        run_id: The run.
        results: One entry per job, from the archive.
        finished: False when the wait timed out before every job finished.
        elapsed_s: Seconds from the run's creation to the end of the wait.
        archived: Rows per archive table for this run.
    """

    run_id: str
    results: list[JobResult]
    finished: bool
    elapsed_s: float
    archived: dict[str, int]

    def footer(self) -> str:
        """Returns: a line with the run's elapsed time and archived row counts."""
        counts = ", ".join(f"{n:,} {table}" for table, n in self.archived.items())
        return f"run {self.run_id} took {self.elapsed_s:.1f} s; archived {counts}"


@dataclass(frozen=True)
class SubmittedRun:
    """A run whose jobs Kafka has acknowledged (``chatscribe batch --detach`` prints the id).

    Attributes:
        run_id: The run (a UUID string).
        job_count: Jobs published.
    """

    run_id: str
    job_count: int


async def run_questions_file(
    settings: Settings,
    path: Path,
    *,
    chat_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    show_progress: bool = True,
    check_alive: Callable[[], None] | None = None,
    limits: RateLimits | None = None,
    target_limits: RateLimits | None = None,
    max_jobs: int | None = None,
    repeat: int | None = None,
) -> RunOutcome:
    """Submits a questions file as a run and waits for it.

    :func:`submit_questions_file`, then :func:`wait_for_run`.

    Args:
        settings: Pipeline settings (Kafka, PostgreSQL, default chat URL).
        path: The questions YAML (:mod:`pipeline.runs.batch`).
        chat_url: Chat endpoint overriding ``settings.chat_url``.
        api_key: Chat API key for these jobs; None: the worker's own.
        timeout_s: Seconds to wait for every job to finish.
        show_progress: Draw a progress bar on stderr.
        check_alive: Called at every poll; raises to stop waiting (the demo checks that its
            child processes are still running).
        limits: Run limits overriding the file's ``limits`` (:func:`submit_questions_file`).
        target_limits: Agent limits overriding the file's ``targetLimits``
            (:func:`submit_questions_file`).
        max_jobs: As for :func:`submit_questions_file`.
        repeat: As for :func:`submit_questions_file`.

    Raises:
        QuestionsFileError: The file is invalid (nothing is submitted).
        ChatUrlRefusedError: As for :func:`submit_questions_file`.
        RecordDeliveryError: Kafka did not acknowledge a job.
    """
    run = await submit_questions_file(
        settings,
        path,
        chat_url=chat_url,
        api_key=api_key,
        limits=limits,
        target_limits=target_limits,
        max_jobs=max_jobs,
        repeat=repeat,
    )
    return await wait_for_run(
        settings,
        run.run_id,
        timeout_s=timeout_s,
        show_progress=show_progress,
        check_alive=check_alive,
    )


async def submit_questions_file(
    settings: Settings,
    path: Path,
    *,
    chat_url: str | None = None,
    api_key: str | None = None,
    limits: RateLimits | None = None,
    target_limits: RateLimits | None = None,
    max_jobs: int | None = None,
    repeat: int | None = None,
) -> SubmittedRun:
    """Records a run in PostgreSQL and publishes its jobs; returns once Kafka acknowledged all.

    Args:
        settings: Pipeline settings (Kafka, PostgreSQL, default chat URL).
        path: The questions YAML (:mod:`pipeline.runs.batch`).
        chat_url: Chat endpoint overriding ``settings.chat_url``.
        api_key: Chat API key for these jobs; None: the worker's own.
        limits: Limits of the run, enforced by the workers together; each one set wins over
            the file's ``limits``.
        target_limits: Limits of the run's agent, enforced by the workers together; each one
            set wins over the file's ``targetLimits``.
        max_jobs: Most jobs the file may expand to; None: ``settings.run_max_jobs``.
        repeat: How many times each (question, persona) is asked; None: the file's
            ``repeat`` (:func:`pipeline.runs.batch.expand_jobs`).

    Returns:
        The run's id and job count.

    Raises:
        QuestionsFileError: The file is invalid or expands to more than ``max_jobs`` jobs
            (nothing is recorded or submitted).
        ChatUrlRefusedError: A job's chat URL is one the workers refuse
            (:class:`pipeline.chat.targets.OutboundPolicy` of these settings; nothing is
            recorded or submitted).
        RecordDeliveryError: Kafka did not acknowledge a job (resubmitting is safe).
    """
    questions = load_questions(path)
    run_id = str(uuid.uuid4())
    url = chat_url or settings.chat_url
    jobs = expand_jobs(
        questions,
        run_id=run_id,
        chat_url=url,
        api_key=api_key,
        limits=limits,
        target_limits=target_limits,
        max_jobs=max_jobs or settings.run_max_jobs,
        path=path,
        repeat=repeat,
    )
    policy = OutboundPolicy.from_settings(settings)
    for target in sorted({job.chat_url for job in jobs}):
        policy.check(target, own_key=api_key is None)
    first = jobs[0]
    options: dict[str, object] = {
        "api_key_given": api_key is not None,
        "repeat": repeat or questions.repeat,
    }
    for name, value in (("limits", first.limits), ("target_limits", first.target_limits)):
        if value is not None:
            options[name] = value.model_dump(exclude_none=True)
    engine = create_engine(settings)
    try:
        record_run(
            engine,
            run_id=run_id,
            name=questions.name,
            source_file=str(path),
            chat_url=url,
            job_count=len(jobs),
            created_by=getpass.getuser(),
            options=options,
        )
    finally:
        engine.dispose()
    await submit_jobs(settings, jobs)
    logger.info(
        "run submitted run_id=%s jobs=%d topic=%s",
        run_id,
        len(jobs),
        settings.topic(wire.TOPIC_REQUESTS),
    )
    return SubmittedRun(run_id=run_id, job_count=len(jobs))


async def wait_for_run(
    settings: Settings,
    run_id: str,
    *,
    timeout_s: float = 600.0,
    show_progress: bool = False,
    check_alive: Callable[[], None] | None = None,
) -> RunOutcome:
    """Waits until every job of a recorded run is finished in the archive, or ``timeout_s``.

    Args:
        settings: PostgreSQL URL and schema.
        run_id: A run recorded by :func:`submit_questions_file`.
        timeout_s: Seconds to wait; 0 reads the run's state once.
        show_progress: Draw a progress bar on stderr.
        check_alive: Called at every poll; raises to stop waiting.

    Returns:
        The outcome read from the archive (``finished`` False when the wait timed out).

    Raises:
        RunNotFoundError: No run ``run_id`` is recorded.
    """
    engine = create_engine(settings)
    try:
        run = await asyncio.to_thread(read_run, engine, run_id=run_id)
        if run is None:
            raise RunNotFoundError(run_id, message=f"no run {run_id!r} in the archive")
        started = time.monotonic()
        progress = await _wait(
            engine, settings, run_id, run.job_count, timeout_s, show_progress, check_alive
        )
        return RunOutcome(
            run_id=run_id,
            results=run_results(engine, run_id=run_id),
            finished=progress.done,
            elapsed_s=_elapsed(run, started),
            archived=count_rows(engine, run_id=run_id, tables=ARCHIVE_TABLES),
        )
    finally:
        engine.dispose()


def _elapsed(run: RunInfo, waited_from: float) -> float:
    """Returns: seconds from the run's creation to now.

    The wait's own time if the clocks of this machine and PostgreSQL disagree.
    """
    since_created = (datetime.now(UTC) - run.created_at).total_seconds()
    return since_created if since_created >= 0 else time.monotonic() - waited_from


async def _wait(
    engine: ArchiveEngine,
    settings: Settings,
    run_id: str,
    expected: int,
    timeout_s: float,
    show: bool,
    check_alive: Callable[[], None] | None,
) -> RunProgress:
    deadline = time.monotonic() + timeout_s
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, disable=not show, transient=False) as bar:
        task = bar.add_task("jobs finished", total=expected)
        while True:
            progress = await asyncio.to_thread(
                run_progress, engine, run_id=run_id, expected=expected
            )
            bar.update(
                task,
                completed=progress.finished,
                description=f"jobs finished {_statuses(progress)}",
            )
            if progress.done or time.monotonic() >= deadline:
                return progress
            if check_alive is not None:
                check_alive()
            await asyncio.sleep(POLL_INTERVAL_S)


def _statuses(progress: RunProgress) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(progress.by_status.items()))
