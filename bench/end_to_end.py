"""Benchmark 3, end to end: jobs through Kafka, a worker process and a sink process.

A bench space (schema with the commit clock, topics) and real processes, ``chatscribe worker``
and ``chatscribe sink`` (one; the suite also runs the large size with two sinks in one consumer
group, ``e2e-<N>-2sinks``), against the synthetic endpoint. After a warm-up
job (faust joins its group, the sink its own), each size's jobs are submitted with
:func:`pipeline.runs.submit.submit_jobs` (``accepted`` event and job record each) and the run waits
until every job's ``answers`` row is committed.

* jobs/s: jobs over the time from submission to the last commit;
* archive delay per job: commit time (``bench_commits``, a deferred trigger:
  :mod:`bench.archive_schema`) minus the ``received_at`` of the job's last line in the worker;
* bytes on disk per archived line: growth of ``pg_total_relation_size`` of the archive tables
  over the run, divided by the lines archived.

Baseline, in the same run: the same streams read directly at the worker's concurrency with
plain httpx (:func:`bench.reader.read_all`), no Kafka, no archive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psycopg
from aiokafka.admin import AIOKafkaAdminClient

from bench import processes
from bench.archive_schema import BenchSpace, conninfo
from bench.reader import read_all
from bench.transcripts import Transcript, stamp_line
from bench.workload import bench_jobs, request_bodies
from models.records import ChatJob
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings

WORKER_CONCURRENCY: Final = 50
POLL_S: Final = 0.25
RUN_TIMEOUT_S: Final = 600.0
_COMMITTED: Final = """
SELECT count(DISTINCT (job_id, attempt)) FROM {schema}.bench_commits WHERE job_id = ANY(%s)
"""
"""Polled every :data:`POLL_S` while the run goes on. The delays' query aggregates every line of
the run's jobs: polled, it cost PostgreSQL ~25 µs of CPU per archived line at 1,000 streams and
took that CPU from the pipeline it measures (issue 13, third round)."""
_DELAYS: Final = """
SELECT EXTRACT(EPOCH FROM c.committed_at - l.last_at)::float8,
       EXTRACT(EPOCH FROM c.committed_at)::float8
FROM {schema}.bench_commits AS c
JOIN (SELECT job_id, attempt, max(received_at) AS last_at, count(*) AS lines
      FROM {schema}.stream_lines WHERE job_id = ANY(%s) GROUP BY job_id, attempt) AS l
  USING (job_id, attempt)
"""


@dataclass(frozen=True)
class EndToEndFigures:
    """One size's figures.

    Attributes:
        jobs, lines: Jobs archived and their lines.
        elapsed_s: Submission start to the last commit.
        baseline_s: The baseline's wall time for the same streams.
        delays_s: Per job, commit time minus its last line's arrival at the worker.
        archive_bytes: Growth of the archive tables' size over the run, in bytes.
        raw_bytes: The streams' NDJSON bytes as served (send stamps included).
    """

    jobs: int
    lines: int
    elapsed_s: float
    baseline_s: float
    delays_s: list[float]
    archive_bytes: int
    raw_bytes: int


class Stack:
    """The worker and sink processes on a bench space, against ``chat_url``."""

    def __init__(
        self,
        chat_url: str,
        *,
        concurrency: int = WORKER_CONCURRENCY,
        sinks: int = 1,
        profile_dir: Path | None = None,
    ) -> None:
        self.chat_url = chat_url
        self.sinks = sinks
        self.profile_dir = profile_dir
        self.space = BenchSpace.new(
            "e2e",
            worker_concurrency=concurrency,
            api_key=processes.BENCH_API_KEY,
            chat_url=chat_url,
        )
        self.children: list[processes.Child] = []

    def __enter__(self) -> Stack:
        self.space.create(commit_clock=True)
        try:
            env = processes.pipeline_env(self.space.settings)
            names = ["worker", *["sink"] * self.sinks]
            for n, name in enumerate(names):
                args: list[str] = ["pipeline.cli.app", name]
                if self.profile_dir is not None:  # pyinstrument writes its text when it exits
                    out = self.profile_dir / f"profile-{self.space.schema}-{name}-{n}.txt"
                    args = ["pyinstrument", "--no-color", "-o", str(out), "-m", *args]
                child = processes.start(f"e2e-{name}-{n}", *args, env=env)
                self.children.append(child)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for child in self.children:
            child.stop()
        self.space.drop()

    def run(self, jobs: Sequence[ChatJob]) -> tuple[float, list[float], list[float]]:
        """Submits ``jobs`` and waits for all of them to be archived.

        Returns:
            (submission start as epoch seconds, per-job delays, per-job commit epochs).

        Raises:
            ChildError: The worker or the sink died.
            TimeoutError: Not all archived within :data:`RUN_TIMEOUT_S`.
        """
        ids = [job.job_id for job in jobs]
        started = time.time()
        asyncio.run(submit_jobs(self.space.settings, jobs))
        deadline = time.monotonic() + RUN_TIMEOUT_S
        schema = f'"{self.space.schema}"'
        with psycopg.connect(conninfo(self.space.settings), autocommit=True) as conn:
            while True:  # the cheap count while the pipeline runs; the delays once, after
                row = conn.execute(_COMMITTED.format(schema=schema), (ids,)).fetchone()
                committed = int(row[0]) if row else 0
                if committed >= len(ids):
                    rows = conn.execute(_DELAYS.format(schema=schema), (ids,)).fetchall()
                    return started, [r[0] for r in rows], [r[1] for r in rows]
                for child in self.children:
                    child.check()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{committed} of {len(ids)} jobs archived in time")
                time.sleep(POLL_S)

    def archive_bytes(self) -> int:
        """Returns: the archive tables' total size in bytes."""
        return sum(self.space.relation_bytes().values())


def measure(
    transcripts: Sequence[Transcript], sizes: Sequence[int], *, chat_url: str, sinks: int = 1
) -> list[EndToEndFigures]:
    """Runs each size through one stack (after a warm-up job), then its baseline.

    Args:
        transcripts: The recorded streams to serve.
        sizes: Numbers of jobs, one measurement each.
        chat_url: The synthetic Chat API's chat URL.
        sinks: Sink processes in the stack (one consumer group; per-job advisory locks).
    """
    figures = []
    with Stack(chat_url, sinks=sinks) as stack:
        stack.run(bench_jobs(transcripts, 2, chat_url=chat_url))
        asyncio.run(wait_for_members(stack.space.settings.sink_group, sinks, stack.space.settings))
        stack.run(bench_jobs(transcripts, 2, chat_url=chat_url))  # after the rebalance
        for size in sizes:
            jobs = bench_jobs(transcripts, size, chat_url=chat_url)
            before = stack.archive_bytes()
            started, delays, commits = stack.run(jobs)
            grown = stack.archive_bytes() - before
            served = [transcripts[i % len(transcripts)].lines for i in range(size)]
            lines = sum(len(s) for s in served)
            raw_bytes = sum(len(stamp_line(x, started)) + 1 for s in served for x in s)
            baseline = asyncio.run(
                read_all(
                    chat_url,
                    request_bodies(jobs),
                    api_key=processes.BENCH_API_KEY,
                    concurrency=WORKER_CONCURRENCY,
                    streams_per_client=10,
                )
            )
            figures.append(
                EndToEndFigures(
                    jobs=size,
                    lines=lines,
                    elapsed_s=max(commits) - started,
                    baseline_s=baseline.elapsed_s,
                    delays_s=delays,
                    archive_bytes=grown,
                    raw_bytes=raw_bytes,
                )
            )
    return figures


async def wait_for_members(
    group: str, members: int, settings: Settings, *, timeout_s: float = 60.0
) -> None:
    """Waits until consumer group ``group`` is ``Stable`` with ``members`` members.

    Raises:
        TimeoutError: Not so within ``timeout_s``.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                (response,) = await admin.describe_consumer_groups([group])
                (found,) = response.to_object()["groups"]
                if found["state"] == "Stable" and len(found["members"]) == members:
                    return
                await asyncio.sleep(0.3)
    finally:
        await admin.close()
