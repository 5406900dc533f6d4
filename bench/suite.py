"""The benchmarks of issue 6 as :class:`bench.results.Result` lists, at a given scale.

Each ``*_results`` function runs one benchmark (its module holds the method) and turns its
figures into results: ours against the baseline measured in the same run, with the issue's
target where it sets one. Growth (benchmark 5) compares each of benchmarks 1 and 3 at two sizes
10x apart, and the archive's bytes on disk per line against the lines' own NDJSON bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from bench import (
    archive_growth,
    chat_api_bench,
    console_pages,
    end_to_end,
    otel_export,
    sink_ingest,
    streams,
)
from bench.archive_schema import BenchSpace
from bench.results import Result, Target, summary
from bench.transcripts import Transcript

SINK_TARGET: Final = Target(">=", 0.5)
GROWTH_LATENCY_TARGET: Final = Target("<=", 1.3)
GROWTH_RATE_TARGET: Final = Target(">=", 1 / 1.3)
STREAM_TARGET: Final = Target(">=", 0.8)
ARCHIVE_DELAY_TARGET_S: Final = 1.0


@dataclass(frozen=True)
class Scale:
    """Sizes of one scale (``small`` for development, ``full`` for ``make bench``).

    Attributes:
        sink_lines: Benchmark 1's two sizes (10x apart), lines.
        stream_levels: Benchmark 2's (concurrency, streams) pairs.
        e2e_jobs: Benchmark 3's two sizes (10x apart), jobs.
        chat_rounds: Times benchmark 4 asks the questions file.
        archive_lines: Archive sizes of the growth benchmark (issue 13), lines; the first is
            the baseline.
    """

    sink_lines: tuple[int, int]
    stream_levels: tuple[tuple[int, int], ...]
    e2e_jobs: tuple[int, int]
    chat_rounds: int
    archive_lines: tuple[int, ...] = (100_000, 1_000_000, 10_000_000)


SCALES: Final = {
    "small": Scale(
        (500, 5_000), ((1, 20), (10, 50), (100, 200)), (20, 200), 1, (100_000, 1_000_000)
    ),
    "full": Scale(
        (5_000, 50_000), ((1, 100), (10, 300), (100, 1_000), (500, 1_000)), (100, 1_000), 5
    ),
}


def _k(size: int) -> str:
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def sink_results(
    transcripts: Sequence[Transcript], scale: Scale
) -> tuple[list[Result], list[sink_ingest.IngestFigures]]:
    """Benchmark 1 at both sizes (lines only), and once with derived rows at the small size."""
    results: list[Result] = []
    figures = []
    label = "psycopg binary COPY of the same rows into stream_lines, 5,000 rows/transaction"
    for size in scale.sink_lines:
        f = sink_ingest.measure(transcripts, size, derived=False)
        figures.append(f)
        details: dict[str, Any] = {"lines": f.lines, "raw_bytes": f.raw_bytes, "sink_s": f.sink_s}
        details |= {"copy_s": f.copy_s, "sink_bytes": f.sink_bytes, "copy_bytes": f.copy_bytes}
        results.append(
            Result(
                f"sink-ingest-{_k(size)}",
                f.lines / f.sink_s,
                f.lines / f.copy_s,
                "lines/s",
                label,
                target=SINK_TARGET,
                details=details,
            )
        )
    size = scale.sink_lines[0]
    f = sink_ingest.measure(transcripts, size, derived=True)
    results.append(
        Result(
            f"sink-ingest-derived-{_k(size)}",
            f.lines / f.sink_s,
            f.lines / f.copy_s,
            "lines/s",
            label + " (ours also normalises every job into the derived tables)",
            details={"sink_s": f.sink_s, "copy_s": f.copy_s, "sink_bytes": f.sink_bytes},
        )
    )
    return results, figures


def stream_results(url: str, scale: Scale) -> Iterator[Result]:
    """Benchmark 2 at every concurrency of the scale, yielding each level's results at once."""
    space = BenchSpace.new("streams")
    space.create()
    try:
        for concurrency, count in scale.stream_levels:
            yield from _level(url, space, concurrency, count)
    finally:
        space.drop()


def _level(url: str, space: BenchSpace, concurrency: int, count: int) -> list[Result]:
    found = streams.measure_level(url, space, concurrency=concurrency, streams=count)
    ours, base, one = found["worker"], found["httpx"], found["httpx-one-client"]
    name = f"stream-c{concurrency}"
    label = (
        f"plain asyncio+httpx reading the same {count} streams, one AsyncClient per {streams.SHARD}"
    )
    target = STREAM_TARGET if concurrency == 100 else None
    details = {mode: drive.figures for mode, drive in found.items()}
    results = [
        Result(
            name,
            ours.lines_per_s,
            base.lines_per_s,
            "lines/s",
            label,
            target=target,
            details=details,
        ),
        Result(f"{name}-streams", ours.streams_per_s, base.streams_per_s, "streams/s", label),
        Result(
            f"{name}-floor",
            found["floor"].lines_per_s,
            base.lines_per_s,
            "lines/s",
            label + "; ours: the worker's client and Kafka output without the job's logic",
        ),
        Result(
            f"{name}-one-client",
            ours.lines_per_s,
            one.lines_per_s,
            "lines/s",
            "plain httpx with one AsyncClient for all streams (the naive script)",
        ),
    ]
    for pct in ("p50", "p99"):
        added = ours.latency_ms(pct) - base.latency_ms(pct)
        results.append(
            Result(
                f"{name}-latency-{pct}",
                ours.latency_ms(pct),
                base.latency_ms(pct),
                "ms",
                "server send stamp to arrival in the httpx baseline",
                details={"worker_added_ms": added},
            )
        )
    results.append(
        Result(
            f"{name}-memory",
            ours.rss_kib_per_stream(),
            base.rss_kib_per_stream(),
            "KiB/stream",
            "peak RSS growth / C of the httpx baseline",
        )
    )
    return results


def e2e_results(
    transcripts: Sequence[Transcript], scale: Scale, url: str
) -> tuple[list[Result], list[end_to_end.EndToEndFigures]]:
    """Benchmark 3 at both sizes with one sink.

    And at the large size with two sinks (one consumer group, ``-2sinks``); the growth figures
    use the one-sink runs.
    """
    figures = end_to_end.measure(transcripts, scale.e2e_jobs, chat_url=url)
    scaled_out = end_to_end.measure(transcripts, scale.e2e_jobs[1:], chat_url=url, sinks=2)
    results = []
    for f, suffix in [*((f, "") for f in figures), *((f, "-2sinks") for f in scaled_out)]:
        name = f"e2e-{_k(f.jobs)}{suffix}"
        delays = summary(f.delays_s)
        label = "the same streams read directly (plain httpx, 50 at once), no Kafka, no archive"
        details: dict[str, Any] = {"jobs": f.jobs, "lines": f.lines, "elapsed_s": f.elapsed_s}
        details |= {"baseline_s": f.baseline_s, "archive_delay_s": delays}
        results += [
            Result(
                name, f.jobs / f.elapsed_s, f.jobs / f.baseline_s, "jobs/s", label, details=details
            ),
            Result(
                f"{name}-archive-delay-p50",
                delays["p50"],
                ARCHIVE_DELAY_TARGET_S,
                "s",
                "the target (1 s)",
            ),
            Result(
                f"{name}-archive-delay-p99",
                delays["p99"],
                ARCHIVE_DELAY_TARGET_S,
                "s",
                "the target (1 s)",
                target=Target("<=", 1.0),
            ),
        ]
    return results, figures


def chat_results(rounds: int, synthetic_url: str) -> list[Result]:
    """Benchmark 4."""
    f = chat_api_bench.measure(rounds, synthetic_url=synthetic_url)
    label = "the synthetic endpoint replaying our agent's recorded answers, same concurrency"
    ours_first = summary([(s.first_line_s or 0) * 1000 for s in f.ours.streams])
    base_first = summary([(s.first_line_s or 0) * 1000 for s in f.replay.streams])
    tool_ms = 1000 * sum(f.sql_tool_s) / len(f.sql_tool_s)
    duck_ms = 1000 * sum(f.duckdb_s) / len(f.duckdb_s)
    questions = len(f.ours.streams)
    return [
        Result(
            "chat-api-questions",
            questions / f.ours.elapsed_s,
            len(f.replay.streams) / f.replay.elapsed_s,
            "questions/s",
            label,
            details={"questions": questions, "concurrency": chat_api_bench.CONCURRENCY},
        ),
        Result("chat-api-first-line-p50", ours_first["p50"], base_first["p50"], "ms", label),
        Result("chat-api-first-line-p99", ours_first["p99"], base_first["p99"], "ms", label),
        Result(
            "svc-sql-api-query",
            tool_ms,
            duck_ms,
            "ms/query",
            "the same compiled SQL run directly on DuckDB (execute + fetchall)",
            details={
                "queries": len(f.duckdb_s),
                "tool_s": summary(f.sql_tool_s),
                "duckdb_s": summary(f.duckdb_s),
            },
        ),
    ]


def growth_results(
    sink: Sequence[sink_ingest.IngestFigures], e2e: Sequence[end_to_end.EndToEndFigures]
) -> list[Result]:
    """Benchmark 5.

    Per-line cost at the large size against the small one, and bytes on disk per archived line
    against the lines' NDJSON bytes.
    """
    results = []
    if len(sink) == 2:
        small, large = sink
        results += [
            Result(
                f"growth-sink-{_k(large.lines)}",
                1e6 * large.sink_s / large.lines,
                1e6 * small.sink_s / small.lines,
                "us/line",
                f"the same benchmark at {small.lines} lines",
            ),
            Result(
                f"archive-bytes-sink-{_k(large.lines)}",
                sum(large.sink_bytes.values()) / large.lines,
                large.raw_bytes / large.lines,
                "B/line",
                "the lines' NDJSON bytes",
                details={
                    "copy_stream_lines_bytes_per_line": large.copy_bytes["stream_lines"]
                    / large.lines
                },
            ),
        ]
    if len(e2e) == 2:
        small_e, large_e = e2e
        results.append(
            Result(
                f"growth-e2e-{_k(large_e.jobs)}",
                1e6 * large_e.elapsed_s / large_e.lines,
                1e6 * small_e.elapsed_s / small_e.lines,
                "us/line",
                f"the same benchmark at {small_e.jobs} jobs",
            )
        )
        for f in e2e:
            results.append(
                Result(
                    f"archive-bytes-e2e-{_k(f.jobs)}",
                    f.archive_bytes / f.lines,
                    f.raw_bytes / f.lines,
                    "B/line",
                    "the lines' NDJSON bytes (as served, send stamp included)",
                )
            )
    return results


def console_results() -> list[Result]:
    """Issue 14: each console page's median server time, big run against small.

    Each page over a 10,000-job run, against the same page over a 100-job run measured in the same
    schema; the issue's budget is 300 ms.
    """
    f = console_pages.measure()
    label = f"the same page over a run of {f.baseline_jobs} jobs"
    return [
        Result(
            f"console-{name}-{_k(f.jobs)}",
            ms,
            f.small_ms[name],
            "ms",
            label,
            details={
                "budget_ms": console_pages.BUDGET_MS,
                "within_budget": ms < console_pages.BUDGET_MS,
            },
        )
        for name, ms in f.big_ms.items()
    ]


def otel_results() -> list[Result]:
    """Issue 27: ``chatscribe export otel`` over a 10,000-job run, spans per second.

    Against the OpenTelemetry SDK's spans and exporter sending the same turns, read beforehand,
    in the same run (:mod:`bench.otel_export`); our build-and-send part alone and the issue's
    goal of 5,000 spans/s are in the details.
    """
    f = otel_export.measure()
    return [
        Result(
            f"otel-export-{_k(f.jobs)}",
            f.export_spans_per_s,
            f.sdk_spans_per_s,
            "spans/s",
            "the SDK's ReadableSpans and OTLPSpanExporter, same turns already read",
            details={
                "spans": f.spans,
                "build_and_send_spans_per_s": round(f.build_spans_per_s),
                "goal_spans_per_s": otel_export.TARGET_SPANS_PER_S,
                "goal_met": f.export_spans_per_s >= otel_export.TARGET_SPANS_PER_S,
            },
        )
    ]


def archive_growth_results(
    transcripts: Sequence[Transcript], scale: Scale, *, progress: Callable[[str], None]
) -> list[Result]:
    """Issue 13's growth benchmark (:mod:`bench.archive_growth`).

    At each archive size, sink lines/s and the audit, run and replay latencies against the same
    at the first size.
    """
    steps = archive_growth.measure(transcripts, scale.archive_lines, emit=progress)
    base = steps[0]
    results = []
    figures = (
        ("sink", "lines/s", "sink_lines_per_s", GROWTH_RATE_TARGET),
        ("audit", "ms", "audit_ms", GROWTH_LATENCY_TARGET),
        ("run", "ms", "run_ms", GROWTH_LATENCY_TARGET),
        ("replay", "ms", "replay_ms", GROWTH_LATENCY_TARGET),
    )
    for size, step in zip(scale.archive_lines[1:], steps[1:], strict=True):
        label = f"{size // 1_000_000}M" if size % 1_000_000 == 0 else _k(size)
        for name, unit, attribute, target in figures:
            details = {"lines": step.lines, "jobs": step.jobs, "fill_s": step.fill_s}
            details |= {"stream_lines_bytes": step.stream_lines_bytes, **step.details}
            results.append(
                Result(
                    f"archive-growth-{name}-{label}",
                    float(getattr(step, attribute)),
                    float(getattr(base, attribute)),
                    unit,
                    f"the same at {base.lines} lines",
                    target=target,
                    details=details,
                )
            )
    return results
