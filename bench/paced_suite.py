"""Benchmark "paced" (issue 13) as :class:`bench.results.Result` lines, per concurrency.

Every figure is against the plain reader measured in the same run on the same streams, except
where the issue sets an absolute bound (whole pipeline <= 250 us per line, sink <= 0.5 ms per
line, archive delay p99 < 1 s): there the printed baseline is that bound. The whole pipeline is
the issue's sum: worker, sink, PostgreSQL and the Kafka broker (their CPU over the run,
:func:`bench.paced.server_cpu_s`); its bound applies where the issue measured it, from C=200 up
(at C=8 a line costs the fixed per-request and per-transaction costs the low rate cannot share;
the sink's own bound is the one for that rate).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

from bench import paced
from bench.results import Result, Target

READER: Final = "plain asyncio+httpx reader of the same streams (own process), same C"
WORKER_CPU_TARGET: Final = Target("<=", 1.3)
SATURATED_LINES_TARGET: Final = Target(">=", 0.6)
PIPELINE_US_BOUND: Final = 250.0
SINK_US_BOUND: Final = 500.0
ARCHIVE_DELAY_BOUND_S: Final = 1.0
AT_MOST_BOUND: Final = Target("<=", 1.0)


def paced_results(
    chat_url: str,
    scale: paced.PacedScale,
    *,
    profile_dir: Path | None = None,
    agent_pid: int | None = None,
) -> Iterator[Result]:
    """Runs every level and yields its results as soon as the level is done.

    ``profile_dir``, ``agent_pid``: :func:`bench.paced.measure_level`.
    """
    for level in scale.levels:
        found = paced.measure_level(chat_url, level, profile_dir=profile_dir, agent_pid=agent_pid)
        yield from level_results(found)


def level_results(f: paced.PacedFigures) -> list[Result]:
    """Returns: one level's result lines (module docstring)."""
    c = f.level.concurrency
    name = f"paced-c{c}"
    details = f.details()
    worker_us, sink_us = f.per_line_us(f.worker_cpu_s), f.per_line_us(f.sink_cpu_s)
    postgres_us, kafka_us = f.per_line_us(f.postgres_cpu_s), f.per_line_us(f.kafka_cpu_s)
    reader_s = float(f.reader["elapsed_s"])
    results = [
        Result(f"{name}-jobs", f.level.jobs / f.elapsed_s, f.level.jobs / reader_s, "jobs/s",
               READER, details=details),
        Result(f"{name}-lines", f.lines / f.elapsed_s, f.reader_lines_per_s, "lines/s", READER,
               target=SATURATED_LINES_TARGET if c >= 1000 else None),
        Result(f"{name}-worker-cpu", worker_us, f.reader_cpu_us, "us/line", READER,
               target=WORKER_CPU_TARGET if c == 200 else None),
        Result(f"{name}-sink-cpu", sink_us, SINK_US_BOUND, "us/line",
               "the issue's bound for the sink (0.5 ms per line)",
               target=AT_MOST_BOUND if c <= 8 else None),
        Result(f"{name}-agent-cpu", f.per_line_us(f.agent_cpu_s), f.reader_cpu_us, "us/line",
               "the reader's (the paced agent's own cost: its pacer and HTTP)"),
        Result(f"{name}-postgres-cpu", postgres_us, f.reader_cpu_us, "us/line",
               "the reader's (PostgreSQL's own CPU: every backend, the sink's and the bench's)"),
        Result(f"{name}-kafka-cpu", kafka_us, f.reader_cpu_us, "us/line",
               "the reader's (the broker's own CPU)"),
        Result(f"{name}-pipeline-cpu", worker_us + sink_us + postgres_us + kafka_us,
               PIPELINE_US_BOUND, "us/line",
               "the issue's bound (250 us per line: worker + sink + PostgreSQL + Kafka)",
               target=AT_MOST_BOUND if c >= 200 else None),
    ]  # fmt: skip
    reader_ms = f.reader["latency_ms"]
    for pct in ("p50", "p99"):
        kafka = details["kafka_latency_ms"].get(pct, 0.0)
        archived = details["archive_latency_ms"].get(pct, 0.0)
        results += [
            Result(f"{name}-kafka-latency-{pct}", kafka, reader_ms.get(pct, 0.0), "ms",
                   "send stamp to arrival in the reader"),
            Result(f"{name}-archive-latency-{pct}", archived, reader_ms.get(pct, 0.0), "ms",
                   "send stamp to arrival in the reader"),
        ]  # fmt: skip
    delay = details["job_archive_delay_ms"].get("p99", 0.0) / 1000
    results += [
        Result(f"{name}-archive-delay-p99", delay, ARCHIVE_DELAY_BOUND_S, "s",
               "the issue's bound (p99 < 1 s)", target=AT_MOST_BOUND),
        Result(f"{name}-streams-in-flight", f.max_in_flight, c, "streams",
               "the worker's concurrency setting (most jobs running at once)"),
        Result(f"{name}-queue-wait-p99", details["job_queue_wait_ms"].get("p99", 0.0) / 1000,
               ARCHIVE_DELAY_BOUND_S, "s", "1 s (a job's wait in chat.requests)"),
        Result(f"{name}-memory", f.worker_rss_kib / c, _reader_rss(f) / c, "KiB/stream",
               "peak RSS growth / C of the reader"),
    ]  # fmt: skip
    return results


def _reader_rss(f: paced.PacedFigures) -> float:
    return float(f.reader["rss_peak_kib"] - f.reader["rss_before_kib"])
