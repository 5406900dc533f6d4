"""Benchmark 1, sink ingest: N NDJSON lines from ``chat.lines`` into PostgreSQL by our sink.

The lines are the recorded transcripts with every tool result padded to 1-100 KiB
(:func:`bench.transcripts.sink_mix`). They are produced to a bench-only topic first (not timed);
then an in-process :class:`pipeline.sink.loop.Sink` (its consumer already in the group after a
one-line warm-up) runs :meth:`~pipeline.sink.loop.Sink.run_once` until every line is archived: that
is timed, decoding and the idempotent ``COPY``-staging write included.

Baseline, in the same run: a psycopg binary ``COPY`` of the same rows (the values the sink
stores, prepared beforehand) into ``stream_lines`` of a second bench schema (same migration),
5,000 rows per transaction. Target: the sink reaches at least half the ``COPY`` rate.

With ``derived=True`` every job also gets its ``completed`` event (with ``line_count``), so the
sink normalises each job into ``messages``, ``tool_calls``, ``sql_queries`` and ``answers`` too:
the sink's whole production work, against the same ``COPY`` baseline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import psycopg

from bench.archive_schema import BenchSpace, conninfo
from bench.transcripts import MixLine, Transcript, sink_mix
from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline.archive import chain
from pipeline.archive import lines as archive_lines
from pipeline.kafka.clients import create_producer, delivered, send
from pipeline.settings import Settings
from pipeline.sink.loop import Sink

COPY_BATCH_ROWS: Final = 5000
DRAIN_TIMEOUT_S: Final = 600.0
# The sink's own staging layout, so the baseline copies exactly the columns the sink stores
# (payload last: sent as binary jsonb, hence typed bytea here).
_COPY_COLUMNS: Final = ", ".join(archive_lines._COLUMNS)
_COPY_TYPES: Final = (*archive_lines._TYPES, "bytea")
JSONB_VERSION: Final = b"\x01"
"""First byte of jsonb's binary format; the rest is the JSON text (PostgreSQL ``jsonb_recv``)."""


@dataclass(frozen=True)
class IngestFigures:
    """One size's figures.

    Attributes:
        lines: Lines archived.
        raw_bytes: Their NDJSON bytes.
        sink_s, copy_s: Wall time of the sink and of the ``COPY`` baseline.
        sink_bytes, copy_bytes: ``pg_total_relation_size`` of what each wrote, per table.
    """

    lines: int
    raw_bytes: int
    sink_s: float
    copy_s: float
    sink_bytes: dict[str, int]
    copy_bytes: dict[str, int]


def envelopes(mix: Sequence[MixLine]) -> list[LineEnvelope]:
    """Returns: the mix's lines as parsed envelopes of fresh job ids (attempt 1)."""
    received_at = datetime.now(UTC)
    job_ids: dict[int, str] = {}
    out = []
    for line in mix:
        job_id = job_ids.setdefault(line.job, str(uuid.uuid4()))
        out.append(
            LineEnvelope.from_raw(
                job_id=job_id,
                attempt=1,
                line_no=line.line_no,
                raw=line.raw,
                received_at=received_at,
            )
        )
    return out


def completed_events(lines: Sequence[LineEnvelope]) -> list[JobEvent]:
    """Returns: one ``completed`` event per job of ``lines``, with its line count."""
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.job_id] = max(counts.get(line.job_id, 0), line.line_no)
    return [
        JobEvent(job_id=j, run_id="bench-sink", kind="completed", attempt=1, line_count=n)
        for j, n in counts.items()
    ]


def copy_rows(lines: Sequence[LineEnvelope]) -> list[tuple[Any, ...]]:
    """Returns: the ``stream_lines`` rows the sink stores for ``lines`` (hash chain included).

    Payload as binary jsonb.
    """
    hashes = chain.extend(lines, {})
    rows = []
    for line in lines:
        key = (line.job_id, line.attempt, line.line_no)
        row = archive_lines.staged_row(line, chain_hash=hashes.get(key))
        payload = row[-1]
        rows.append((*row[:-1], JSONB_VERSION + payload.encode() if payload else None))
    return rows


def copy_baseline(settings: Settings, rows: Sequence[tuple[Any, ...]]) -> float:
    """COPYs ``rows`` into ``stream_lines``, :data:`COPY_BATCH_ROWS` per transaction.

    Returns:
        Wall seconds.
    """
    statement = (
        f'COPY "{settings.database_schema}".stream_lines ({_COPY_COLUMNS}) FROM STDIN '
        "(FORMAT BINARY)"
    )
    with psycopg.connect(conninfo(settings)) as conn:
        started = time.perf_counter()
        for first in range(0, len(rows), COPY_BATCH_ROWS):
            with conn.transaction(), conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(list(_COPY_TYPES))
                for row in rows[first : first + COPY_BATCH_ROWS]:
                    copy.write_row(row)
        return time.perf_counter() - started


async def produce(
    settings: Settings, lines: Sequence[LineEnvelope], events: Sequence[JobEvent] = ()
) -> None:
    """Produces the lines (and events) to the bench topics and waits for every ack."""
    producer = create_producer(settings, client_id="bench-sink-producer")
    await producer.start()
    try:
        lines_topic = settings.topic(wire.TOPIC_LINES)
        events_topic = settings.topic(wire.TOPIC_JOB_EVENTS)
        pending = []
        for line in lines:
            key, value, headers = line.to_record()
            pending.append(await send(producer, lines_topic, key=key, value=value, headers=headers))
        for event in events:
            key = event.job_id.encode()
            pending.append(await send(producer, events_topic, key=key, value=event.to_value()))
        await delivered(pending)
    finally:
        await producer.stop()


async def drain(sink: Sink, *, lines: int, events: int = 0) -> float:
    """Runs the sink's batches until ``lines`` lines and ``events`` events are archived.

    Returns:
        Wall seconds.

    Raises:
        TimeoutError: Not done within :data:`DRAIN_TIMEOUT_S`.
    """
    started = time.perf_counter()
    seen_lines = seen_events = 0
    async with asyncio.timeout(DRAIN_TIMEOUT_S):
        while seen_lines < lines or seen_events < events:
            report = await sink.run_once()
            seen_lines += report.lines
            seen_events += report.events
    return time.perf_counter() - started


async def sink_run(space: BenchSpace, lines: Sequence[LineEnvelope], *, derived: bool) -> float:
    """Warms a sink up with one line, produces ``lines`` (and events), times the drain."""
    sink = Sink(space.settings)
    await sink.start()
    try:
        warm = envelopes([MixLine(0, 1, b'{"id":"__cutoff__","sort":0}')])
        await produce(space.settings, warm)
        await drain(sink, lines=1)
        events = completed_events(lines) if derived else []
        await produce(space.settings, lines, events)
        return await drain(sink, lines=len(lines), events=len(events))
    finally:
        await sink.stop()


def measure(transcripts: Sequence[Transcript], size: int, *, derived: bool) -> IngestFigures:
    """Runs the baseline then the sink on ``size`` lines in fresh bench spaces.

    Raises:
        TimeoutError: The sink did not archive everything in time.
    """
    mix = list(sink_mix(transcripts, size))
    lines = envelopes(mix)
    rows = copy_rows(lines)
    ours = BenchSpace.new("sink")
    base = BenchSpace.new("copy")
    try:
        ours.create()
        base.create()
        copy_s = copy_baseline(base.settings, rows)
        sink_s = asyncio.run(sink_run(ours, lines, derived=derived))
        return IngestFigures(
            lines=len(lines),
            raw_bytes=sum(len(m.raw) + 1 for m in mix),
            sink_s=sink_s,
            copy_s=copy_s,
            sink_bytes=ours.relation_bytes(),
            copy_bytes=base.relation_bytes(("stream_lines",)),
        )
    finally:
        ours.drop()
        base.drop()
