"""The sink process serves Prometheus metrics whose values follow what it archived."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

import httpx
import pytest

from models import wire
from pipeline.kafka.clients import create_producer, ensure_topics
from pipeline.settings import Settings
from tests.integration.pipeline.sink_records_support import jobs_records, produce_records
from tests.stack_support import (
    ROOT,
    Samples,
    free_port,
    migrated_settings,
    parse_samples,
    stack_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAIT_S = 60.0
JOBS = 3
DELTAS = 5


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap,
        database_url,
        schema=pg_schema,
        tag="metrics",
        sink_metrics_port=free_port(),
    )


async def test_sink_metrics_endpoint_counts_lines_dead_letters_batches_and_lag(
    settings: Settings,
) -> None:
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    lines, events = jobs_records([f"metrics-{n}" for n in range(JOBS)], n_deltas=DELTAS)
    await produce_records(settings, lines, events)
    producer = create_producer(settings)
    await producer.start()
    try:  # a line record without its headers: the sink must dead-letter it
        topic = settings.topic(wire.TOPIC_LINES)
        await producer.send_and_wait(topic, b"no headers", key=b"metrics-bad")
    finally:
        await producer.stop()
    env = stack_env(settings, CHATSCRIBE_SINK_METRICS_PORT=str(settings.sink_metrics_port))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pipeline.cli.app", "sink", env=env, cwd=ROOT
    )
    url = f"http://127.0.0.1:{settings.sink_metrics_port}/metrics"
    try:
        deadline = time.monotonic() + WAIT_S
        samples: Samples = {}
        async with httpx.AsyncClient() as client:
            while True:
                assert process.returncode is None, "the sink exited"
                assert time.monotonic() < deadline, f"metrics never showed the work: {samples}"
                try:
                    samples = parse_samples((await client.get(url, timeout=2)).text)
                except httpx.TransportError:
                    samples = {}
                inserted = _value(samples, "chatscribe_sink_lines_total", result="inserted")
                dead = _value(samples, "chatscribe_sink_dead_letters_total", source="lines")
                lag_series = [k for k in samples if k[0] == "chatscribe_sink_consumer_lag_records"]
                if inserted == len(lines) and dead == 1 and lag_series:
                    break
                await asyncio.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert _value(samples, "chatscribe_sink_events_total", result="inserted") == len(events)
    assert _value(samples, "chatscribe_sink_lines_total", result="duplicate") == 0
    batches = _value(samples, "chatscribe_sink_batch_records_count")
    assert batches >= 1
    assert _value(samples, "chatscribe_sink_batch_records_sum") == len(lines) + len(events) + 1
    assert _value(samples, "chatscribe_sink_write_seconds_count") >= 1
    assert _value(samples, "chatscribe_sink_batches_total", committed="true") == batches
    partitions = {dict(k[1])["partition"] for k in lag_series}
    topics = {dict(k[1])["topic"] for k in lag_series}
    assert topics <= {settings.topic(wire.TOPIC_LINES), settings.topic(wire.TOPIC_JOB_EVENTS)}
    assert partitions and all(samples[k] >= 0 for k in lag_series)
    # every attempt ended: nothing is held parsed any more, as lines or folded
    held = {k: v for k, v in samples.items() if k[0] == "chatscribe_sink_parsed_bytes"}
    assert held == {
        ("chatscribe_sink_parsed_bytes", (("form", "kept"),)): 0.0,
        ("chatscribe_sink_parsed_bytes", (("form", "folded"),)): 0.0,
    }
    assert samples[("chatscribe_sink_open_attempts", ())] == 0
