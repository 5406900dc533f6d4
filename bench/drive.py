"""One stream-driving measurement, in a fresh process: ``python -m bench.drive ...``.

Modes (issue 6, benchmark 2):

* ``httpx``: the baseline, :func:`bench.reader.read_all` (read and discard);
* ``worker``: what a worker does per job without faust's consumption of ``chat.requests``:
  :class:`pipeline.worker.job_runner.JobRunner` with :class:`pipeline.kafka.clients.JobOutput` on a
  real idempotent aiokafka producer (``started``, every line to ``chat.lines``, ``first_line``, the
  terminal event, all acknowledged by Kafka before a job counts as done), with the worker process's
  collector settings (:func:`pipeline.collector.settle`);
* ``floor``: the same client, output and producers without the job's logic
  (:func:`drive_floor`): the least a worker can spend per stream.

All read the same jobs (the fixture's questions in turn) from the synthetic endpoint at the
same concurrency, after the same warm-up. A fresh process per measurement keeps the resident
set size honest: ``rss_peak - rss_before`` over the timed part, divided by the concurrency, is
the memory per in-flight stream. The figures go to stdout as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Final

from aiokafka import AIOKafkaProducer

from bench.reader import read_all
from bench.results import summary
from bench.transcripts import load_transcripts, sent_at_of
from bench.workload import bench_jobs, request_bodies
from models import wire
from models.records import ChatJob, EventKind, Headers, JobEvent, LineHeaders
from pipeline import collector
from pipeline.chat.client import ChatClient
from pipeline.kafka.clients import LINES_LINGER_MS, JobOutput, create_producer, ensure_topics
from pipeline.settings import Settings
from pipeline.worker.job_control import JobControl, chat_request
from pipeline.worker.job_runner import JobRunner

RSS_SAMPLE_S: Final = 0.02
KAFKA_MODES: Final = ("worker", "floor")
Producers = tuple[AIOKafkaProducer, AIOKafkaProducer]
"""The worker's producers: lifecycle events (no linger), lines (:data:`LINES_LINGER_MS`)."""
PAGE_KIB: Final = os.sysconf("SC_PAGE_SIZE") // 1024


def rss_kib() -> int:
    """Returns: this process's resident set size in KiB (``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE_KIB


class RssPeak:
    """Samples the resident set size every :data:`RSS_SAMPLE_S` while running."""

    def __init__(self) -> None:
        self.before = rss_kib()
        self.peak = self.before
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RssPeak:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task
        self.peak = max(self.peak, rss_kib())

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_kib())
            await asyncio.sleep(RSS_SAMPLE_S)


class TimedOutput(JobOutput):
    """A :class:`JobOutput` that notes.

    Per line, the delay from the server's send stamp to the moment the line is handed to the
    producer.
    """

    latencies_s: list[float]

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        """Notes the line's delay since the synthetic API sent it, then sends it."""
        sent_at = sent_at_of(raw)
        if sent_at is not None:
            self.latencies_s.append(time.time() - sent_at)
        await super().send_line(raw, headers)


@asynccontextmanager
async def started_producers(settings: Settings) -> AsyncIterator[Producers]:
    """Starts the worker's two producers (events; lines, lingering) and stops them on exit.

    Started before the timed part, as a worker process starts them once, not per batch of jobs
    (each start connects and fetches metadata: ~4 ms of CPU and ~20 ms here).
    """
    producer = create_producer(settings, client_id="bench-drive")
    lines_producer = create_producer(
        settings, client_id="bench-drive-lines", linger_ms=LINES_LINGER_MS
    )
    await producer.start()
    try:
        await lines_producer.start()
        try:
            yield producer, lines_producer
        finally:
            await lines_producer.stop()
    finally:
        await producer.stop()


async def drive_worker(
    settings: Settings,
    producers: Producers,
    jobs: Sequence[ChatJob],
    *,
    concurrency: int,
    streams_per_client: int,
    latencies: list[float],
) -> dict[str, int]:
    """Runs ``jobs`` through JobRunners, ``concurrency`` at once.

    Args:
        settings: Kafka settings of the producer.
        producers: Started producers (:func:`started_producers`).
        jobs: The jobs to run.
        concurrency: Streams open at once (a job's slot is free once its stream closed,
            while its records are still being acknowledged, as in the worker).
        latencies: Filled with the per-line delays, in seconds.
        streams_per_client: Concurrent jobs sharing one :class:`ChatClient` (and runner);
            0: one client for all, as ``pipeline.worker.app`` does.

    Returns:
        ``{"lines": lines produced, "completed": jobs completed}``.
    """
    producer, lines_producer = producers
    loops = min(concurrency, len(jobs))
    per_client = streams_per_client or max(loops, 1)
    client_settings = settings.model_copy(update={"worker_concurrency": per_client})
    clients = [ChatClient(client_settings) for _ in range(0, loops, per_client)]
    runners = [JobRunner(c, job_deadline_s=120.0, worker_id="bench-drive") for c in clients]
    free: asyncio.Queue[int] = asyncio.Queue()  # stream slots; slot n uses runner n // per_client
    for number in range(loops):
        free.put_nowait(number)
    done = {"lines": 0, "completed": 0}

    async def one(job: ChatJob, slot: _Slot) -> None:
        output = TimedOutput(producer, settings, job.job_id, lines_producer=lines_producer)
        output.latencies_s = latencies
        try:
            event = await runners[slot.number // per_client].run(
                job, output, control=JobControl(observer=slot)
            )
        finally:
            slot.stream_ended()  # a run that failed before its stream closed frees it here
        done["lines"] += event.line_count or 0
        done["completed"] += event.kind == "completed"

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:  # the next job takes a slot once a stream closes, as in the worker
                group.create_task(one(job, _Slot(await free.get(), free)))
    finally:
        for chat_client in clients:
            await chat_client.aclose()
    return done


async def drive_floor(
    settings: Settings,
    producers: Producers,
    jobs: Sequence[ChatJob],
    *,
    concurrency: int,
    latencies: list[float],
) -> dict[str, int]:
    """The least a worker can do per job: the worker's client and output, no job logic.

    Per job, with the same :class:`ChatClient` and :class:`JobOutput` as :func:`drive_worker`:
    a ``started`` event, acknowledged; every line with its headers; the lines acknowledged;
    a ``completed`` event, acknowledged. No retries, deadline, abort, admission, first-line
    event, byte checks or metrics: what is left is the HTTP read and the Kafka records, so this
    mode's CPU per stream is a floor for the worker's (``stream-c<C>-floor``).

    Returns:
        ``{"lines": lines produced, "completed": jobs completed}``.
    """
    producer, lines_producer = producers
    client = ChatClient(settings.model_copy(update={"worker_concurrency": concurrency}))
    slots = asyncio.Semaphore(concurrency)
    done = {"lines": 0, "completed": 0}

    async def one(job: ChatJob) -> None:
        async with slots:
            output = TimedOutput(producer, settings, job.job_id, lines_producer=lines_producer)
            output.latencies_s = latencies
            headers = LineHeaders(1, job.submitted_at)
            await output.send_event(_event(job, "started"))
            await output.delivered()
            count = 0
            async with aclosing(client.stream_chat(job.chat_url, chat_request(job))) as lines:
                async for line in lines:
                    count += 1
                    at = line.received_at
                    await output.send_line(line.raw, headers.of(line.line_no, at, True, None))
        await output.delivered()
        await output.send_event(_event(job, "completed", line_count=count))
        await output.delivered()
        done["lines"] += count
        done["completed"] += 1

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(job))
    finally:
        await client.aclose()
    return done


def _event(job: ChatJob, kind: EventKind, **fields: Any) -> JobEvent:
    return JobEvent(job_id=job.job_id, run_id=job.run_id, kind=kind, attempt=1, **fields)


class _Slot:
    """A stream slot, given back when the job's stream closes (``Throttling.stream_ended``).

    As :class:`pipeline.worker.admission.Ticket` does in the worker: the next job calls while
    the previous one's last records and terminal event are still being acknowledged by Kafka.
    """

    def __init__(self, number: int, free: asyncio.Queue[int]) -> None:
        self.number = number
        self._free = free
        self._held = True

    def stream_ended(self) -> None:
        if self._held:
            self._free.put_nowait(self.number)
            self._held = False

    def throttled(self, retry_after_s: float | None) -> None:
        return None

    def accepted(self) -> None:
        return None

    def first_line(self, latency_s: float) -> None:
        return None

    async def admitted(self) -> None:
        if not self._held:  # another call of the same job (after a 429): a slot again
            self.number = await self._free.get()
            self._held = True


async def _run_mode(
    args: argparse.Namespace,
    settings: Settings,
    producers: Producers | None,
    jobs: Sequence[ChatJob],
    latencies: list[float],
) -> dict[str, int]:
    if args.mode == "floor":
        assert producers is not None
        return await drive_floor(
            settings, producers, jobs, concurrency=args.concurrency, latencies=latencies
        )
    if producers is not None:
        return await drive_worker(
            settings,
            producers,
            jobs,
            concurrency=args.concurrency,
            streams_per_client=args.streams_per_client,
            latencies=latencies,
        )
    run = await read_all(
        args.url,
        request_bodies(jobs),
        api_key=args.api_key,
        concurrency=args.concurrency,
        streams_per_client=args.streams_per_client,
    )
    latencies.extend(run.latencies_s)
    return {"lines": run.lines, "completed": len(run.streams), "failed": run.failed}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Warms up, then times the mode's run of ``args.jobs`` jobs; returns the figures."""
    transcripts = load_transcripts()
    settings = Settings(worker_concurrency=args.concurrency, api_key=args.api_key)
    warm = bench_jobs(transcripts, min(args.concurrency, 10), chat_url=args.url)
    if args.warm_up_question:
        warm = [job.model_copy(update={"question": args.warm_up_question}) for job in warm]
    jobs = bench_jobs(transcripts, args.jobs, chat_url=args.url)
    async with AsyncExitStack() as stack:
        producers = None
        if args.mode in KAFKA_MODES:
            await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS))
            producers = await stack.enter_async_context(started_producers(settings))
        await _run_mode(args, settings, producers, warm, [])
        if args.mode in KAFKA_MODES:
            collector.settle()  # as pipeline.worker.app.run_worker does once started
        else:
            gc.collect()
        latencies: list[float] = []
        profiler = _profiler(args.profile)
        async with RssPeak() as rss:
            started, cpu_started = time.perf_counter(), time.process_time()
            done = await _run_mode(args, settings, producers, jobs, latencies)
            elapsed, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    if profiler is not None:
        _write_profile(profiler, Path(args.profile))
    return {
        "mode": args.mode,
        "concurrency": args.concurrency,
        "streams_per_client": args.streams_per_client,
        "streams": args.jobs,
        "completed": done["completed"],
        "failed": done.get("failed", len(jobs) - done["completed"]),
        "lines": done["lines"],
        "elapsed_s": elapsed,
        "cpu_s": cpu_s,
        "latency_ms": summary([s * 1000 for s in latencies]),
        "rss_before_kib": rss.before,
        "rss_peak_kib": rss.peak,
    }


def _profiler(path: str | None) -> Any:
    if not path:
        return None
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.002, async_mode="disabled")
    profiler.start()
    return profiler


def _write_profile(profiler: Any, path: Path) -> None:
    profiler.stop()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profiler.output_text(unicode=True, show_all=False), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (see ``--help``); Kafka settings come from ``CHATSCRIBE_*`` variables."""
    parser = argparse.ArgumentParser(description="One stream-driving measurement.")
    parser.add_argument("--mode", choices=("httpx", *KAFKA_MODES), required=True)
    parser.add_argument("--url", required=True, help="The synthetic chat endpoint.")
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--streams-per-client", type=int, default=0, help="0: one client.")
    parser.add_argument("--api-key", default="bench-key")
    parser.add_argument("--warm-up-question", default=None, help="Asked by the warm-up jobs.")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--profile", default=None, help="Write a pyinstrument profile here.")
    args = parser.parse_args(argv)
    if args.loop == "uvloop":  # as the worker process runs (pipeline.worker.app.run_worker)
        import uvloop

        figures = uvloop.run(measure(args))
    else:
        figures = asyncio.run(measure(args))
    sys.stdout.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
