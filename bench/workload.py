"""Benchmark workloads: chat jobs over the recorded transcripts, and the recording itself.

``python -m bench record`` asks every (question, persona) of ``examples/questions.yaml`` of our
Chat API (``chatscribe api serve`` under uvicorn, a child process) and saves the streams as
``bench/data/transcripts.jsonl``; the synthetic endpoint serves them back.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from bench import processes
from bench.reader import read_all
from bench.transcripts import FIXTURE, Transcript, save_transcripts
from models.chat import SessionSettings
from models.records import ChatJob
from pipeline.runs.batch import expand_jobs, load_questions
from pipeline.worker.job_runner import chat_request

QUESTIONS: Final = processes.ROOT / "examples" / "questions.yaml"
JOB_DEADLINE_S: Final = 120.0


def bench_jobs(
    transcripts: Sequence[Transcript], count: int, *, chat_url: str, run_id: str | None = None
) -> list[ChatJob]:
    """Returns: ``count`` jobs asking the transcripts' questions in turn, fresh job ids."""
    run = run_id or f"bench-{uuid.uuid4().hex[:8]}"
    jobs = []
    for index in range(count):
        transcript = transcripts[index % len(transcripts)]
        jobs.append(
            ChatJob(
                job_id=str(uuid.uuid4()),
                run_id=run,
                question=transcript.question,
                persona=transcript.persona,
                session_settings=SessionSettings.model_validate(transcript.session_settings),
                chat_url=chat_url,
                deadline_s=JOB_DEADLINE_S,
            )
        )
    return jobs


def request_bodies(jobs: Sequence[ChatJob]) -> list[dict[str, Any]]:
    """Returns: each job's chat request as sent on the wire (what the worker sends)."""
    return [chat_request(job).to_wire() for job in jobs]


def questions_jobs(chat_url: str, path: Path = QUESTIONS) -> list[ChatJob]:
    """Returns: one job per (question, persona) of a questions file, in file order."""
    return expand_jobs(load_questions(path), run_id="bench-record", chat_url=chat_url)


def record(path: Path = FIXTURE) -> list[Transcript]:
    """Records every question of ``examples/questions.yaml`` from our Chat API into ``path``.

    Raises:
        ChildError: The Chat API did not start.
        httpx.HTTPError: A stream failed.
    """
    port = processes.free_port()
    env = {"CHATSCRIBE_API_KEYS": processes.BENCH_API_KEY}
    api = processes.start(
        "record-chat-api", "pipeline.cli.app", "api", "serve", "--port", str(port), env=env
    )
    try:
        processes.wait_healthy(api, port)
        url = processes.chat_url(port)
        jobs = questions_jobs(url)
        run = asyncio.run(
            read_all(
                url,
                request_bodies(jobs),
                api_key=processes.BENCH_API_KEY,
                concurrency=1,
                keep_lines=True,
            )
        )
    finally:
        api.stop()
    transcripts = [
        Transcript(
            question=job.question,
            persona=job.persona or "",
            session_settings=job.session_settings.to_wire(),
            lines=tuple(stats.kept),
        )
        for job, stats in zip(jobs, run.streams, strict=True)
    ]
    save_transcripts(transcripts, path)
    return transcripts
