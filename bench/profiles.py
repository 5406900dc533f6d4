"""Profiles of the slowest stages (``python -m bench --profile``), with pyinstrument.

* ``profile-sink.txt``: the sink's per-batch work on the benchmark-1 mix with derived rows:
  decoding the Kafka records (:meth:`LineEnvelope.from_record`, :meth:`JobEvent.from_value`)
  and :meth:`pipeline.archive.ArchiveWriter.write_batch`, 5,000 records per batch, run in the
  main thread (the sink runs the write in a worker thread, which a sampling profiler started
  on the event loop's thread would not see). Kafka's fetch is left out: it is not where the
  time goes (``notes/measurements.md``: ~170,000 records/s).
* ``profile-worker-c100.txt``: the worker's JobRunner driving 100 streams at once
  (:mod:`bench.drive`), the whole event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pyinstrument import Profiler

from bench import processes, sink_ingest, streams
from bench.archive_schema import BenchSpace
from bench.results import RESULTS_DIR
from bench.suite import Scale
from bench.transcripts import load_transcripts, sink_mix
from models.records import JobEvent, LineEnvelope
from pipeline.archive import ArchiveWriter

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
        )  # fmt: skip
    finally:
        child.stop()
        space.drop()
    return path


def profile_slowest(scale: Scale) -> list[Path]:
    """Writes both profiles; returns their paths."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    return [
        profile_sink(scale.sink_lines[0], RESULTS_DIR / "profile-sink.txt"),
        profile_worker(RESULTS_DIR / "profile-worker-c100.txt", streams_count=500),
    ]


def _write(profiler: Profiler, path: Path) -> Path:
    path.write_text(profiler.output_text(unicode=True, show_all=False), encoding="utf-8")
    return path
