"""The sink process serves Prometheus metrics whose values follow what it archived."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sink_records_support import job_records, produce_records

from models import wire
from pipeline.archive import upgrade
from pipeline.kafka import create_producer, ensure_topics
from pipeline.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO_ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 60.0
JOBS = 3
DELTAS = 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def settings(
    kafka_bootstrap: str, database_url: str, pg_schema: str, unique_name: Callable[[str], str]
) -> Settings:
    name = unique_name("metrics")
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        database_url=database_url,
        database_schema=pg_schema,
        topic_prefix=f"{name}.",
        sink_group=f"{name}-sink",
        sink_metrics_port=_free_port(),
    )
    upgrade(settings)
    return settings


async def test_sink_metrics_endpoint_counts_lines_dead_letters_batches_and_lag(
    settings: Settings,
) -> None:
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    lines, events = [], []
    for n in range(JOBS):
        job_lines, job_events = job_records(f"metrics-{n}", n_deltas=DELTAS)
        lines += job_lines
        events += job_events
    await produce_records(settings, lines, events)
    producer = create_producer(settings)
    await producer.start()
    try:  # a line record without its headers: the sink must dead-letter it
        topic = settings.topic(wire.TOPIC_LINES)
        await producer.send_and_wait(topic, b"no headers", key=b"metrics-bad")
    finally:
        await producer.stop()
    env = {
        **os.environ,
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_SINK_GROUP": settings.sink_group,
        "CHATSCRIBE_SINK_METRICS_PORT": str(settings.sink_metrics_port),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pipeline.cli", "sink", env=env, cwd=REPO_ROOT
    )
    url = f"http://127.0.0.1:{settings.sink_metrics_port}/metrics"
    try:
        deadline = time.monotonic() + WAIT_S
        samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        async with httpx.AsyncClient() as client:
            while True:
                assert process.returncode is None, "the sink exited"
                assert time.monotonic() < deadline, f"metrics never showed the work: {samples}"
                try:
                    samples = _samples((await client.get(url, timeout=2)).text)
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
