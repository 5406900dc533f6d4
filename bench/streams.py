"""Benchmark 2, stream driving: one worker's JobRunner against plain httpx, C streams at once.

Each measurement runs in a fresh process (:mod:`bench.drive`) against the synthetic endpoint:

* ``worker``: JobRunner + JobOutput + an idempotent aiokafka producer, one ChatClient for all
  streams, as :mod:`pipeline.worker.app` runs jobs, on the event loop it runs them on (uvloop,
  :func:`pipeline.worker.app.run_worker`); faust's consumption of ``chat.requests`` is not
  included (the end-to-end benchmark has it);
* ``httpx``: the baseline, plain httpx reading and discarding on asyncio's own event loop (as
  a plain script runs, and as the paced benchmark's reader does), one ``AsyncClient`` per 5
  streams (the fastest plain-httpx layout here; see ``bench/README.md``);
* ``httpx-one-client``: the same with one ``AsyncClient`` for all streams, as a naive script
  would (httpcore's pool degrades with the number of connections it holds; the worker's
  ChatClient splits its connections into pools of ``pipeline.chat.client.STREAMS_PER_POOL``, so the
  like-for-like baseline is the per-5 one);
* ``floor``: the worker's client and Kafka output with none of the job's logic (retries,
  deadline, abort, admission, events beyond ``started`` and ``completed``): a floor for ``worker``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Final

from bench import processes
from bench.archive_schema import BenchSpace

SHARD: Final = 5
"""Streams per ``AsyncClient`` in the baseline, as the worker's ``STREAMS_PER_POOL``: among the
fastest plain-httpx layouts measured here (2026-11-27, C=100, 1,000 streams, clients sharing one
SSL context: per 3 0.65-0.69, per 5 0.67-0.68, per 10 0.88-0.89 ms of CPU per stream)."""
WORKER_LOOP: Final = "uvloop"
"""The worker process's event loop (``pipeline.worker.app``); until 2026-11-27 the worker mode
ran on asyncio's, which cost it 12-15% more CPU per line than the worker pays (``bench/history.md``,
issue 13's first round)."""


@dataclass(frozen=True)
class Drive:
    """One measurement's figures, as :mod:`bench.drive` prints them."""

    figures: dict[str, Any]

    @property
    def lines_per_s(self) -> float:
        """Lines read (worker: produced and acknowledged) per second."""
        return float(self.figures["lines"]) / float(self.figures["elapsed_s"])

    @property
    def streams_per_s(self) -> float:
        """Streams finished per second."""
        return float(self.figures["completed"]) / float(self.figures["elapsed_s"])

    def latency_ms(self, key: str) -> float:
        """Returns: a latency percentile (``p50``, ``p99``) in milliseconds."""
        return float(self.figures["latency_ms"][key])

    def rss_kib_per_stream(self) -> float:
        """Peak RSS growth over the timed part divided by the concurrency, KiB."""
        grown = self.figures["rss_peak_kib"] - self.figures["rss_before_kib"]
        return float(grown) / float(self.figures["concurrency"])


def drive(
    mode: str,
    *,
    url: str,
    space: BenchSpace,
    concurrency: int,
    streams: int,
    streams_per_client: int,
    profile: str | None = None,
    warm_up_question: str | None = None,
    loop: str = "asyncio",
) -> Drive:
    """Runs one :mod:`bench.drive` process and returns its figures.

    Raises:
        RuntimeError: The process failed (its output is in the message).
    """
    import subprocess
    import sys

    args = [
        sys.executable, "-m", "bench.drive", "--mode", mode, "--url", url,
        "--jobs", str(streams), "--concurrency", str(concurrency),
        "--streams-per-client", str(streams_per_client), "--api-key", processes.BENCH_API_KEY,
        "--loop", loop,
    ]  # fmt: skip
    if profile:
        args += ["--profile", profile]
    if warm_up_question:
        args += ["--warm-up-question", warm_up_question]
    env = {**os.environ, **processes.pipeline_env(space.settings)}
    done = subprocess.run(
        args, cwd=processes.ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.drive {mode} C={concurrency} failed:\n{done.stderr[-4000:]}")
    return Drive(json.loads(done.stdout.strip().splitlines()[-1]))


def measure_level(
    url: str, space: BenchSpace, *, concurrency: int, streams: int
) -> dict[str, Drive]:
    """Measures every mode at one concurrency (baseline first)."""
    common: dict[str, Any] = {
        "url": url, "space": space, "concurrency": concurrency, "streams": streams,
    }  # fmt: skip
    found = {
        "httpx": drive("httpx", streams_per_client=SHARD, **common),
        "httpx-one-client": drive("httpx", streams_per_client=0, **common),
        "worker": drive("worker", streams_per_client=0, loop=WORKER_LOOP, **common),
        "floor": drive("floor", streams_per_client=0, loop=WORKER_LOOP, **common),
    }
    return found
