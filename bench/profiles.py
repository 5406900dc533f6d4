"""Profiles of the slowest stages (``python -m bench --profile``), with pyinstrument.

* ``profile-sink.txt``: the sink's per-batch work on the benchmark-1 mix with derived rows:
  decoding the Kafka records (:meth:`LineEnvelope.from_record`, :meth:`JobEvent.from_value`)
  and :meth:`pipeline.archive.writer.ArchiveWriter.write_batch`, 5,000 records per batch, run in the
  main thread (the sink runs the write in a worker thread, which a sampling profiler started
  on the event loop's thread would not see). Kafka's fetch is left out: it is not where the
  time goes (``notes/measurements.md``: ~170,000 records/s).
* ``profile-sink-loop.txt``: the sink's whole loop on the lines-only mix (benchmark 1 without
  events): ``Sink.run_once`` until every line is archived, Kafka fetch and commit included,
  with the write (normally ``asyncio.to_thread``) run inline so the one profile holds it.
* ``profile-worker-c100.txt``: the worker's JobRunner driving 100 streams at once
  (:mod:`bench.drive`), the whole event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final
from unittest import mock

from pyinstrument import Profiler

from bench import processes, sink_ingest, streams
from bench.archive_schema import BenchSpace
from bench.results import RESULTS_DIR
from bench.suite import Scale
from bench.transcripts import MixLine, load_transcripts, sink_mix
from models.records import JobEvent, LineEnvelope
from pipeline.archive.writer import ArchiveWriter
from pipeline.sink.loop import Sink

BATCH_RECORDS: Final = 5000


def profile_sink(lines_count: int, path: Path) -> Path:
    """Profiles decoding and writing ``lines_count`` mix lines plus their jobs' events."""
    lines = sink_ingest.envelopes(list(sink_mix(load_transcripts(), lines_count)))
    records = [line.to_record() for line in lines]
    events = [e.to_value() for e in sink_ingest.completed_events(lines)]
    space = BenchSpace.new("profile")
    space.create()
    writer = ArchiveWriter.from_settings(space.settings)
    profiler = Profiler(interval=0.001)
    try:
        profiler.start()
        for first in range(0, len(records), BATCH_RECORDS):
            batch = records[first : first + BATCH_RECORDS]
            decoded = [LineEnvelope.from_record(k, v, h) for k, v, h in batch]
            last = first + BATCH_RECORDS >= len(records)
            decoded_events = [JobEvent.from_value(v) for v in events] if last else []
            writer.write_batch(decoded, decoded_events)
        profiler.stop()
    finally:
        writer.close()
        space.drop()
    return _write(profiler, path)


def profile_sink_loop(lines_count: int, path: Path) -> Path:
    """Profiles the sink's batches over ``lines_count`` mix lines already in Kafka."""
    lines = sink_ingest.envelopes(list(sink_mix(load_transcripts(), lines_count)))
    space = BenchSpace.new("profile")
    space.create()
    profiler = Profiler(interval=0.001, async_mode="disabled")

    async def inline(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    async def run() -> None:
        sink = Sink(space.settings)
        await sink.start()
        try:
            warm = sink_ingest.envelopes([MixLine(0, 1, b'{"id":"__cutoff__","sort":0}')])
            await sink_ingest.produce(space.settings, warm)
            await sink_ingest.drain(sink, lines=1)
            await sink_ingest.produce(space.settings, lines)
            with mock.patch("pipeline.sink.loop.asyncio.to_thread", inline):
                profiler.start()
                await sink_ingest.drain(sink, lines=len(lines))
                profiler.stop()
        finally:
            await sink.stop()

    try:
        asyncio.run(run())
    finally:
        space.drop()
    return _write(profiler, path)


def profile_worker(path: Path, *, streams_count: int) -> Path:
    """Profiles one ``bench.drive`` worker run at C=100 against the synthetic endpoint."""
    port = processes.free_port()
    child = processes.start(
        "profile-synthetic", "bench.synthetic_chat", "--port", str(port),
        "--api-key", processes.BENCH_API_KEY,
    )  # fmt: skip
    space = BenchSpace.new("profile")
    try:
        processes.wait_healthy(child, port)
        space.create()
        streams.drive(
            "worker", url=processes.chat_url(port), space=space, concurrency=100,
            streams=streams_count, streams_per_client=0, profile=str(path),
            loop=streams.WORKER_LOOP,
        )  # fmt: skip
    finally:
        child.stop()
        space.drop()
    return path


def profile_slowest(scale: Scale) -> list[Path]:
    """Writes the three profiles; returns their paths."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    return [
        profile_sink(scale.sink_lines[0], RESULTS_DIR / "profile-sink.txt"),
        profile_sink_loop(scale.sink_lines[1], RESULTS_DIR / "profile-sink-loop.txt"),
        profile_worker(RESULTS_DIR / "profile-worker-c100.txt", streams_count=500),
    ]


def _write(profiler: Profiler, path: Path) -> Path:
    path.write_text(profiler.output_text(unicode=True, show_all=False), encoding="utf-8")
    return path
