"""The sink's fetch ahead (pipeline.sink.prefetch) against real Kafka and PostgreSQL.

A failed write rewinds the batch fetched ahead too, a rebalance drops what it took, nothing is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from aiokafka import TopicPartition

from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline.archive.writer import ArchiveWriter, BatchOutcome
from pipeline.errors import ArchiveUnavailableError
from pipeline.kafka.clients import create_consumer, create_producer, ensure_topics
from pipeline.settings import Settings
from pipeline.sink.loop import BatchReport, Sink
from pipeline.sink.prefetch import Fetched, Prefetcher, fetch
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAIT_S = 45.0
JOBS = 2
LINES_PER_JOB = 5
"""One job per partition, one batch per partition (``sink_batch_max_records``): the batch
fetched ahead is the other partition's."""


def _lines(job_id: str) -> list[LineEnvelope]:
    now = datetime.now(UTC)
    return [
        LineEnvelope.from_raw(
            job_id=job_id, attempt=1, line_no=n, raw=b'{"id": "m%d"}' % n, received_at=now
        )
        for n in range(1, LINES_PER_JOB + 1)
    ]


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap,
        database_url,
        schema=pg_schema,
        tag="p",
        sink_batch_wait_ms=100,
        sink_batch_max_records=5,
    )


@pytest.fixture
async def produced(settings: Settings) -> list[LineEnvelope]:
    """Every job's lines produced to ``chat.lines``, each job to partition (job index % 2)."""
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    producer = create_producer(settings)
    await producer.start()
    lines = [line for j in range(JOBS) for line in _lines(f"job-{j}")]
    try:
        for line in lines:
            key, value, headers = line.to_record()
            partition = int(line.job_id.rsplit("-", 1)[1]) % 2
            topic = settings.topic(wire.TOPIC_LINES)
            await producer.send(topic, value, key=key, headers=headers, partition=partition)
        await producer.flush()
    finally:
        await producer.stop()
    return lines


class _SlowFailingWriter(ArchiveWriter):
    """Its first ``failures`` writes take a while, then fail as if PostgreSQL were down.

    The wait lets the next batch be fetched ahead meanwhile.
    """

    def __init__(self, engine: sa.Engine, failures: int) -> None:
        super().__init__(engine)
        self.failures = failures
        self.calls = 0

    def write_batch(
        self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]
    ) -> BatchOutcome:
        self.calls += 1
        if self.calls <= self.failures:
            time.sleep(0.3)
            raise ArchiveUnavailableError("connection refused (simulated)")
        return super().write_batch(lines, events)


def _stored(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT count(*) FROM stream_lines").scalar()
    return int(found or 0)


async def _committed(settings: Settings) -> int:
    topic = settings.topic(wire.TOPIC_LINES)
    consumer = create_consumer(settings, group_id=settings.sink_group)
    await consumer.start()
    try:
        offsets = [await consumer.committed(TopicPartition(topic, p)) for p in (0, 1)]
    finally:
        await consumer.stop()
    return sum(o or 0 for o in offsets)


async def test_failed_write_rewinds_the_batch_fetched_ahead_and_loses_nothing(
    settings: Settings, engine: sa.Engine, produced: list[LineEnvelope]
) -> None:
    writer = _SlowFailingWriter(engine, failures=1)
    sink = Sink(settings, writer=writer, retry_budget_s=0.2)
    await sink.start()
    reports: list[BatchReport] = []
    failed = 0
    try:
        deadline = time.monotonic() + WAIT_S
        while await asyncio.to_thread(_stored, engine) < len(produced):
            assert time.monotonic() < deadline, f"not all archived: {reports}"
            try:
                reports.append(await sink.run_once())
            except ArchiveUnavailableError:
                failed += 1
    finally:
        await sink.stop()
    assert failed >= 1 and writer.calls > writer.failures
    # every record was written once after the rewinds: none dropped with the batch fetched
    # ahead, none counted twice
    assert sum(r.records for r in reports) == len(produced)
    assert sum(r.outcome.lines_inserted for r in reports if r.outcome) == len(produced)
    assert all(r.committed for r in reports if r.records)
    assert await _committed(settings) == len(produced)


async def test_records_fetched_ahead_are_dropped_when_their_partition_is_taken_or_reset(
    settings: Settings, produced: list[LineEnvelope]
) -> None:
    topic = settings.topic(wire.TOPIC_LINES)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = create_consumer(settings, group_id=None)
    await consumer.start()

    async def fetch_batch() -> Fetched:
        return await fetch(
            consumer,
            wait_ms=1000,
            max_records=100,
            lines_topic=topic,
            events_topic=settings.topic(wire.TOPIC_JOB_EVENTS),
        )

    prefetcher = Prefetcher(consumer, fetch_batch)
    try:
        consumer.assign([tp0, tp1])
        seen: dict[Any, list[int]] = {tp0: [], tp1: []}
        while sum(len(v) for v in seen.values()) < len(produced):  # untouched: all kept
            prefetcher.start()
            kept = await prefetcher.take()
            assert kept is not None and not kept.dead
            for tp, part in kept.batches.items():
                seen[tp] += [r.offset for r in part]
        assert seen == {tp: list(range(len(produced) // 2)) for tp in (tp0, tp1)}
        assert prefetcher.dropped == 0

        consumer.seek(tp0, 0)
        consumer.seek(tp1, 0)
        prefetcher.start()
        deadline = time.monotonic() + WAIT_S
        while not prefetcher.fetched:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # fetched ahead; now the partitions move: tp1 taken away, tp0 assigned again (its
        # position goes back to the start), so everything fetched ahead must be dropped
        consumer.assign([tp0])
        taken = await prefetcher.take()
        assert taken is not None and taken.records == 0 and not taken.items
        assert prefetcher.dropped > 0
        again: list[int] = []
        while len(again) < len(produced) // 2:  # read again from tp0's position: none lost
            prefetcher.start()
            batch = await prefetcher.take()
            assert batch is not None and set(batch.batches) <= {tp0}
            again += [r.offset for part in batch.batches.values() for r in part]
        assert again == list(range(len(produced) // 2))
    finally:
        await prefetcher.cancel()
        await consumer.stop()
