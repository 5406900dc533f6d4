"""A ``chat.lines`` record forged for an attempt that already ended is dead-lettered (real Kafka).

Issue 24, class 1: the record must be refused with its reason, never merged into the
transcript, and archiving goes on for everyone else.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from models import wire
from models.records import LineEnvelope
from pipeline.archive.chain import verify
from pipeline.archive.engine import create_engine
from pipeline.kafka.clients import create_consumer, ensure_topics
from pipeline.settings import Settings
from pipeline.sink.loop import Sink
from tests.integration.pipeline.sink_records_support import job_records, produce_records
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAIT_S = 60.0
FORGED = b'{"id":"f9","role":"assistant","content":"forged answer","graphPath":["final"]}'


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, tag="late", sink_batch_wait_ms=100
    )


def _scalar(engine: sa.Engine, query: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(query), params).scalar()


async def _drain(sink: Sink, done: Any) -> int:
    dead = 0
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(done):
        assert time.monotonic() < deadline, "the sink did not get there"
        dead += (await sink.run_once()).dead_lettered
    return dead


async def _dead_letters(settings: Settings) -> list[Any]:
    topic = settings.topic(wire.TOPIC_LINES_DLQ)
    consumer = create_consumer(settings, topic, group_id=None)
    await consumer.start()
    found: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while not found:
            assert time.monotonic() < deadline, "no dead letter"
            batches = await consumer.getmany(timeout_ms=200)
            found += [r for part in batches.values() for r in part]
    finally:
        await consumer.stop()
    return found


async def test_a_line_forged_after_the_attempt_ended_is_dead_lettered_not_archived(
    settings: Settings,
) -> None:
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    lines, events = job_records("job-done", n_deltas=3)
    other_lines, other_events = job_records("job-next", n_deltas=3)
    forged = LineEnvelope.from_raw(
        job_id="job-done",
        attempt=1,
        line_no=len(lines) + 1,
        raw=FORGED,
        received_at=datetime.now(UTC),
    )
    engine = create_engine(settings)
    sink = Sink(settings)
    await sink.start()
    try:
        await produce_records(settings, lines, events)
        await _drain(sink, lambda: _scalar(engine, "SELECT count(*) FROM attempt_seals") == 1)
        await produce_records(settings, [forged, *other_lines], other_events)
        dead = await _drain(
            sink, lambda: _scalar(engine, "SELECT count(*) FROM attempt_seals") == 2
        )
        while dead < 1:
            dead += (await sink.run_once()).dead_lettered
        (letter,) = await _dead_letters(settings)
        stored = _scalar(engine, "SELECT count(*) FROM stream_lines WHERE job_id = 'job-done'")
        answer = _scalar(engine, "SELECT content FROM answers WHERE job_id = 'job-done'")
        with engine.connect() as conn:
            report = verify(conn)
    finally:
        await sink.stop()
        engine.dispose()
    assert letter.value == FORGED
    reason = dict(letter.headers)[wire.HEADER_DLQ_REASON].decode()
    assert "arrived after the attempt ended" in reason
    assert stored == len(lines) and answer == "answer of job-done"
    assert report.ok
