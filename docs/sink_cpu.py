"""CPU seconds the sink's own code spends per 1,000 lines: decode, then write and normalise.

Usage (from a checkout's root, against the PostgreSQL of ``ops/services.sh``)::

    PYTHONPATH=$PWD .venv/bin/python docs/sink_cpu.py [LINES] [ROUNDS]

``python -m bench --only sink`` reports wall-clock rates against a ``COPY`` baseline; on a
loaded machine (other processes on the same cores) they swing by 2-3x between runs. This
measures ``time.process_time()`` of this process only (PostgreSQL's work is not counted) over
the bench's own line mix (``bench.transcripts.sink_mix``, tool results padded to 1-100 KiB)
and its ``completed`` events, in batches of 5,000 records as ``bench --profile`` does: the
figure the "parse once" work changes. It runs on the pre-change tree too (same bench API).
"""

from __future__ import annotations

import statistics
import sys
import time

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]

from bench import sink_ingest  # noqa: E402
from bench.archive_schema import BenchSpace  # noqa: E402
from bench.transcripts import load_transcripts, sink_mix  # noqa: E402
from models.records import JobEvent, LineEnvelope  # noqa: E402
from pipeline.archive.writer import ArchiveWriter  # noqa: E402

BATCH_RECORDS = 5000


def measure(lines_count: int) -> tuple[float, float]:
    """Returns: CPU seconds per 1,000 lines of decoding, and of writing (normalising included)."""
    lines = sink_ingest.envelopes(list(sink_mix(load_transcripts(), lines_count)))
    records = [line.to_record() for line in lines]
    events = [e.to_value() for e in sink_ingest.completed_events(lines)]
    space = BenchSpace.new("cpu")
    space.create()
    writer = ArchiveWriter.from_settings(space.settings)
    decode_s = write_s = 0.0
    try:
        for first in range(0, len(records), BATCH_RECORDS):
            started = time.process_time()
            batch = records[first : first + BATCH_RECORDS]
            decoded = [LineEnvelope.from_record(k, v, h) for k, v, h in batch]
            last = first + BATCH_RECORDS >= len(records)
            decoded_events = [JobEvent.from_value(v) for v in events] if last else []
            decode_s += time.process_time() - started
            started = time.process_time()
            writer.write_batch(decoded, decoded_events)
            write_s += time.process_time() - started
    finally:
        writer.close()
        space.drop()
    per = 1000 / len(lines)
    return decode_s * per, write_s * per


def main() -> None:
    """Prints the median over ROUNDS of both figures."""
    lines_count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    figures = [measure(lines_count) for _ in range(rounds)]
    decode = statistics.median(f[0] for f in figures)
    write = statistics.median(f[1] for f in figures)
    print(
        f"sink CPU per 1000 lines ({lines_count} lines, median of {rounds}): "
        f"decode {decode * 1000:.1f} ms, write+normalise {write * 1000:.1f} ms, "
        f"total {(decode + write) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
