"""Benchmark: a run against an agent that enforces a limit (issue 13, "Concurrency that fits").

The agent (:mod:`bench.limited_chat`) takes ``max_streams`` streams at once, paces each turn over
``turn_s`` seconds, and answers 429 with ``Retry-After`` above its limit. One ``chatscribe
worker`` (default settings: concurrency ceiling 200, adaptive per-target limit starting at 16)
and one ``chatscribe sink`` run ``jobs`` jobs against it; nothing tells the worker the limit.

* ours: jobs the agent served per second over its busy window (first stream opened to last
  stream closed);
* baseline: the agent's own limit, ``max_streams / turn_s`` jobs/s (a client that knew the
  limit and kept exactly that many streams open, with no gap between jobs); target ≥ 0.9;
* details: failed jobs, 429s sent by the agent and archived as absorbed, mean streams over the
  window and over the run's middle (limit first reached → last stream opened).

``ratelimit-<N>-steady`` gives that middle on its own: mean streams at the agent against its
limit, without the ramp-up and the final drain (which a client that knows the limit pays too).

A second result compares the same jobs/s with a plain asyncio + httpx reader that *knows* the
limit (exactly ``max_streams`` readers, :func:`bench.reader.read_all`) against a fresh agent, in
the same run: what this machine allows at that moment, without Kafka or the archive.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

from bench import processes
from bench.archive_schema import BenchSpace
from bench.reader import read_all
from bench.results import Result, Target
from bench.transcripts import Transcript
from bench.workload import bench_jobs, request_bodies
from pipeline.archive.engine import create_engine
from pipeline.archive.runs import run_progress, run_throttling
from pipeline.runs.submit import submit_jobs

MAX_STREAMS: Final = 50
TURN_S: Final = 2.0
RETRY_AFTER_S: Final = 1
RUN_TIMEOUT_S: Final = 600.0
TARGET: Final = Target(">=", 0.9)


@dataclass(frozen=True)
class RateLimitFigures:
    """One run's figures (module docstring)."""

    jobs: int
    by_status: dict[str, int]
    agent: dict[str, Any]
    throttled_archived: int
    throttled_jobs: int
    run_s: float


def _agent(name: str) -> tuple[processes.Child, int]:
    port = processes.free_port()
    agent = processes.start(
        name, "bench.limited_chat", "--port", str(port),
        "--api-key", processes.BENCH_API_KEY, "--max-streams", str(MAX_STREAMS),
        "--turn-s", str(TURN_S), "--retry-after-s", str(RETRY_AFTER_S),
    )  # fmt: skip
    return agent, port


def reader_jobs_per_s(transcripts: list[Transcript], jobs: int) -> float:
    """Returns: jobs/s of a plain reader keeping exactly ``MAX_STREAMS`` streams open."""
    agent, port = _agent("limited-chat-reader")
    try:
        processes.wait_healthy(agent, port)
        url = processes.chat_url(port)
        bodies = request_bodies(bench_jobs(transcripts, jobs, chat_url=url))
        run = asyncio.run(
            read_all(url, bodies, api_key=processes.BENCH_API_KEY, concurrency=MAX_STREAMS)
        )
    finally:
        agent.stop()
    if run.failed:
        raise RuntimeError(f"the reader saw {run.failed} failed streams")
    return jobs / run.elapsed_s


def measure(transcripts: list[Transcript], jobs: int) -> RateLimitFigures:
    """Runs jobs through a worker and a sink against the limited agent, then the reader.

    Runs ``jobs`` jobs through a worker and a sink against the limited agent, then the same streams
    through the reader.

    Raises:
        ChildError: A process died. TimeoutError: the run did not finish in time.
    """
    agent, port = _agent("limited-chat")
    url = processes.chat_url(port)
    space = BenchSpace.new("ratelimit", api_key=processes.BENCH_API_KEY, chat_url=url)
    children = [agent]
    try:
        processes.wait_healthy(agent, port)
        space.create()
        env = processes.pipeline_env(space.settings)
        env.pop("CHATSCRIBE_WORKER_CONCURRENCY")  # the default, as a user runs it
        for name in ("worker", "sink"):
            children.append(processes.start(f"ratelimit-{name}", "pipeline.cli.app", name, env=env))
        figures = _run(space, bench_jobs(transcripts, jobs, chat_url=url), port, children)
    finally:
        for child in reversed(children):
            child.stop()
        space.drop()
    return figures


def _run(
    space: BenchSpace, jobs: list[Any], port: int, children: list[processes.Child]
) -> RateLimitFigures:
    settings = space.settings
    started = time.monotonic()
    asyncio.run(submit_jobs(settings, jobs))
    engine = create_engine(settings)
    run_id = jobs[0].run_id
    try:
        while True:
            progress = run_progress(engine, run_id=run_id, expected=len(jobs))
            if progress.done:
                break
            for child in children:
                child.check()
            if time.monotonic() - started > RUN_TIMEOUT_S:
                raise TimeoutError(f"{progress.finished} of {len(jobs)} jobs finished in time")
            time.sleep(0.5)
        throttling = run_throttling(engine, run_id=run_id)
    finally:
        engine.dispose()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as response:
        agent = json.load(response)
    return RateLimitFigures(
        jobs=len(jobs),
        by_status=progress.by_status,
        agent=agent,
        throttled_archived=throttling.answers,
        throttled_jobs=throttling.jobs,
        run_s=time.monotonic() - started,
    )


def results(transcripts: list[Transcript], jobs: int) -> list[Result]:
    """Returns: the ``ratelimit-<jobs>`` result (module docstring)."""
    f = measure(transcripts, jobs)
    reader = reader_jobs_per_s(transcripts, jobs)
    agent = f.agent
    window_s = agent["window_s"] or float("nan")
    details = {
        "jobs": f.jobs,
        "by_status": f.by_status,
        "failed": f.by_status.get("failed", 0),
        "throttled_by_agent": agent["throttled"],
        "throttled_archived": f.throttled_archived,
        "throttled_jobs": f.throttled_jobs,
        "agent_window_s": agent["window_s"],
        "mean_streams": agent["mean_streams"],
        "steady_mean_streams": agent["steady_mean_streams"],
        "ramp_s": agent["ramp_s"],
        "drain_s": agent["drain_s"],
        "peak_streams": agent["peak"],
        "run_s": f.run_s,
        "reader_jobs_per_s": reader,
    }
    label = f"the agent's limit: {MAX_STREAMS} streams of {TURN_S:g} s turns"
    ours = agent["served"] / window_s
    return [
        Result(
            f"ratelimit-{f.jobs}",
            ours,
            MAX_STREAMS / TURN_S,
            "jobs/s",
            label,
            target=TARGET,
            details=details,
        ),
        Result(
            f"ratelimit-{f.jobs}-steady",
            agent["steady_mean_streams"],
            float(MAX_STREAMS),
            "streams",
            "the agent's limit, from the limit first reached to the last stream opened",
            target=TARGET,
        ),
        Result(
            f"ratelimit-{f.jobs}-vs-reader",
            ours,
            reader,
            "jobs/s",
            f"a plain httpx reader keeping exactly {MAX_STREAMS} streams open (knows the limit)",
        ),
    ]
