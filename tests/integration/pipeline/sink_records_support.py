"""Small, complete job transcripts for the sink tests: lines and lifecycle events.

Sinks run in this process; polling.

Each job is a ``__cutoff__`` line, ``n_deltas`` content deltas and a final answer, then the
terminal ``completed`` event with its ``line_count``, so the archive can normalise it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer

from models import wire
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.settings import Settings
from pipeline.sink.loop import Sink

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def job_records(
    job_id: str, *, run_id: str = "run-sink", n_deltas: int = 10
) -> tuple[list[LineEnvelope], list[JobEvent]]:
    """Returns: the lines and events of one completed job (``n_deltas + 2`` lines)."""
    chat_id = f"chat-{job_id}"
    raws = [
        _raw(id=wire.ID_CUTOFF, role="assistant", state={"chatId": chat_id}),
        *(
            _raw(id="a1", role="assistant", content=f"part {i} ", isDelta=True)
            for i in range(n_deltas)
        ),
        _raw(id="f1", role="assistant", content=f"answer of {job_id}", graphPath=["final"]),
    ]
    now = datetime.now(UTC)
    lines = [
        LineEnvelope.from_raw(
            job_id=job_id, attempt=1, line_no=n, raw=raw, received_at=now, chat_id=chat_id
        )
        for n, raw in enumerate(raws, start=1)
    ]
    job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": run_id,
            "question": f"question {job_id}",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": URL,
        }
    )
    events = [
        JobEvent(job_id=job_id, run_id=run_id, kind="accepted", job=job),
        JobEvent(job_id=job_id, run_id=run_id, kind="started", attempt=1, job=job),
        JobEvent(
            job_id=job_id,
            run_id=run_id,
            kind="completed",
            attempt=1,
            chat_id=chat_id,
            line_count=len(lines),
        ),
    ]
    return lines, events


def jobs_records(
    job_ids: Sequence[str], *, n_deltas: int
) -> tuple[list[LineEnvelope], list[JobEvent]]:
    """Returns: :func:`job_records` of each job, lines and events concatenated in job order."""
    lines: list[LineEnvelope] = []
    events: list[JobEvent] = []
    for job_id in job_ids:
        job_lines, job_events = job_records(job_id, n_deltas=n_deltas)
        lines += job_lines
        events += job_events
    return lines, events


@asynccontextmanager
async def running_sinks(settings: Settings, count: int = 1) -> AsyncIterator[list[Sink]]:
    """``count`` sinks started and running (``Sink.run``) in this event loop.

    On exit each is asked to stop, its run awaited, and stopped.
    """
    sinks = [Sink(settings) for _ in range(count)]
    for sink in sinks:
        await sink.start()
    tasks = [asyncio.create_task(sink.run()) for sink in sinks]
    try:
        yield sinks
    finally:
        for sink in sinks:
            sink.request_stop()
        await asyncio.gather(*tasks)
        for sink in sinks:
            await sink.stop()


async def wait_for(condition: Callable[[], bool], what: str, *, timeout_s: float) -> None:
    """Polls ``condition`` (in a thread: it may query PostgreSQL) until true.

    Raises:
        AssertionError: ``timeout_s`` seconds passed (names ``what``).
    """
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def produce_records(
    settings: Settings, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]
) -> None:
    """Produces lines to ``chat.lines`` and events to ``chat.job-events`` (keyed by job id)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap,
        enable_idempotence=True,
        max_request_size=settings.max_record_bytes,
    )
    await producer.start()
    try:
        for line in lines:
            key, value, headers = line.to_record()
            await producer.send(settings.topic(wire.TOPIC_LINES), value, key=key, headers=headers)
        for event in events:
            topic = settings.topic(wire.TOPIC_JOB_EVENTS)
            await producer.send(topic, event.to_value(), key=event.job_id.encode())
        await producer.flush()
    finally:
        await producer.stop()
