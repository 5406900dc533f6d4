"""``python -m bench [--only NAME ...] [--scale small|full] [--profile]`` (``make bench``).

Runs the benchmarks of issue 6 (``bench/README.md``) against the Kafka and PostgreSQL of
``ops/services.sh`` (``CHATSCRIBE_*`` variables), prints one line per figure::

    bench <name>: <ours> <unit> vs <baseline> <unit> = <ratio>

and writes them with their details to ``bench/results/latest.json`` (and a stamped copy), and
one row per figure to ``bench/history.csv``.
``python -m bench record`` re-records ``bench/data/transcripts.jsonl`` from our Chat API.
``--profile`` writes pyinstrument profiles of the slowest stages to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import logging
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from bench import (
    end_to_end,
    kafka_connect,
    paced,
    paced_suite,
    processes,
    profiles,
    rate_limited,
    sink_ingest,
    suite,
)
from bench.results import (
    HISTORY_FILE,
    RESULTS_DIR,
    Result,
    append_history,
    format_line,
    results_document,
    write_json,
)
from bench.transcripts import Transcript, load_transcripts
from bench.workload import record

BENCHMARKS: Final = (
    "sink",
    "streams",
    "e2e",
    "chat-api",
    "console",
    "planner",
    "ratelimit",
    "paced",
    "growth",
    "otel",
    "connect",
)
"""Names for ``--only``; growth (benchmark 5) comes with ``sink`` and ``e2e``; ``growth``
is the archive growth benchmark of issue 13 (:mod:`bench.archive_growth`, 100k to 10M lines);
``otel`` the OpenTelemetry export of issue 27 (:mod:`bench.otel_export`); ``connect`` our sink
beside Kafka Connect's JDBC sink connector (issue 27, :mod:`bench.kafka_connect`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the selected benchmarks; returns the exit code (0 even when a target is missed)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    # Produce retries right after topic creation (NotLeaderForPartition) are expected noise.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    if args.command == "record":
        found = record()
        print(f"recorded {len(found)} transcripts")
        return 0
    selected = args.only or list(BENCHMARKS)
    started_at, started = datetime.now(UTC), time.perf_counter()
    results = run(
        selected,
        suite.SCALES[args.scale],
        emit=_emit,
        scale_name=args.scale,
        profile=args.profile,
        paced_levels=args.paced_c,
    )
    if args.profile and set(selected) - {"paced"}:
        for path in profiles.profile_slowest(suite.SCALES[args.scale]):
            print(f"profile written: {path}")
    wall = time.perf_counter() - started
    document = results_document(results, scale=args.scale, wall_time_s=wall, started_at=started_at)
    path = write_json(document)
    rows = append_history(document, commit=_commit(), machine=platform.node())
    print(
        f"bench wall time: {wall:.0f} s; results: {path.relative_to(processes.ROOT)}; "
        f"{rows} rows appended to {HISTORY_FILE.relative_to(processes.ROOT)}"
    )
    return 0


def _commit() -> str:
    """Returns: the short commit of the checkout, ``+`` when it has changes (``?`` without git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=processes.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=processes.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+" if changed else "")


def run(
    selected: Sequence[str],
    scale: suite.Scale,
    *,
    emit: Callable[[Result], None],
    scale_name: str = "full",
    profile: bool = False,
    paced_levels: Sequence[int] | None = None,
) -> list[Result]:
    """Runs the benchmarks named in ``selected`` at ``scale``, calling ``emit`` per result."""
    transcripts = load_transcripts()
    results: list[Result] = []

    def add(found: Iterable[Result]) -> None:
        for result in found:
            emit(result)
            results.append(result)

    sink_figures: list[sink_ingest.IngestFigures] = []
    if "sink" in selected:
        found, sink_figures = suite.sink_results(transcripts, scale)
        add(found)
    if "planner" in selected:
        from bench.planner_bench import planner_results  # loads the evaluation set

        add(planner_results())
        from bench.rule_reader_bench import rule_reader_results

        add(rule_reader_results())
    e2e_figures = _endpoint_results(selected, scale, transcripts, add)
    if "console" in selected:
        add(suite.console_results())
    if "otel" in selected:
        add(suite.otel_results())
    if "connect" in selected:
        add(kafka_connect.results(transcripts, scale.sink_lines[0]))
    if "ratelimit" in selected:  # issue 13: 5x benchmark 3's small size, against a 429ing agent
        add(rate_limited.results(list(transcripts), 5 * scale.e2e_jobs[0]))
    add(suite.growth_results(sink_figures, e2e_figures))
    if "paced" in selected:
        add(_paced(scale_name, RESULTS_DIR if profile else None, paced_levels))
    if "growth" in selected:
        add(suite.archive_growth_results(transcripts, scale, progress=_progress))
    return results


def _endpoint_results(
    selected: Sequence[str],
    scale: suite.Scale,
    transcripts: Sequence[Transcript],
    add: Callable[[Iterable[Result]], None],
) -> list[end_to_end.EndToEndFigures]:
    """Runs ``streams``, ``e2e`` and ``chat-api`` against one synthetic Chat API.

    The synthetic Chat API is started only when one of them is selected and stopped after them.

    Returns:
        The ``e2e`` figures (empty when ``e2e`` is not selected), for the growth results.
    """
    e2e_figures: list[end_to_end.EndToEndFigures] = []
    if not {"streams", "e2e", "chat-api"} & set(selected):
        return e2e_figures
    child, url = _start_synthetic()
    try:
        if "streams" in selected:
            add(suite.stream_results(url, scale))
        if "e2e" in selected:
            found, e2e_figures = suite.e2e_results(transcripts, scale, url)
            add(found)
        if "chat-api" in selected:
            add(suite.chat_results(scale.chat_rounds, url))
    finally:
        child.stop()
    return e2e_figures


def _paced(
    scale_name: str, profile_dir: Path | None, levels: Sequence[int] | None
) -> Iterator[Result]:
    scale = paced.SCALES[scale_name]
    if levels:
        kept = tuple(level for level in scale.levels if level.concurrency in levels)
        scale = paced.PacedScale(scale.pacing, kept)
    agent, url = paced.start_agent(scale.pacing)
    try:
        yield from paced_suite.paced_results(
            url, scale, profile_dir=profile_dir, agent_pid=agent.process.pid
        )
    finally:
        agent.stop()


def _progress(text: str) -> None:
    print(text, flush=True)


def _start_synthetic() -> tuple[processes.Child, str]:
    port = processes.free_port()
    child = processes.start(
        "synthetic-chat", "bench.synthetic_chat", "--port", str(port),
        "--api-key", processes.BENCH_API_KEY,
    )  # fmt: skip
    try:
        processes.wait_healthy(child, port)
    except BaseException:
        child.stop()
        raise
    return child, processes.chat_url(port)


def _emit(result: Result) -> None:
    print(format_line(result), flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", choices=("run", "record"), default="run")
    parser.add_argument(
        "--only", action="append", choices=BENCHMARKS, help="Run only this benchmark (repeatable)."
    )
    parser.add_argument("--scale", choices=tuple(suite.SCALES), default="full")
    parser.add_argument(
        "--paced-c",
        action="append",
        type=int,
        help="Run only this concurrency of the paced benchmark (repeatable).",
    )
    parser.add_argument(
        "--profile", action="store_true", help=f"Profile the slowest stages into {RESULTS_DIR}."
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
