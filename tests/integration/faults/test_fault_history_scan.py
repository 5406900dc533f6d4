"""A worker's history scan against a broker that stops answering ends, instead of stalling it.

A worker looks a job's earlier attempts up by scanning its ``chat.job-events`` partition
(:mod:`pipeline.worker.history`), under one lock for every partition: a scan that never ends
holds the worker's partitions and starts nothing (issue 25, "no silent stalls"). A paused broker
is such a scan: the fetch waits on a connection that never answers. The test pauses (SIGSTOP) a
private one-node Kafka (fixture ``private_kafka``) between two lookups; the second must fail
with :class:`RecordDeliveryError` (the worker stops and its record is redelivered) after two
timed-out scans, each counted in ``chatscribe_worker_history_scan_timeouts_total``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from models.records import JobEvent
from models.wire import TOPIC_JOB_EVENTS
from pipeline import metrics
from pipeline.errors import RecordDeliveryError
from pipeline.kafka.clients import create_producer, ensure_topics
from pipeline.settings import Settings
from pipeline.worker.history import SCAN_ATTEMPTS, JobHistory
from tests.stack_support import unique_settings

pytestmark = pytest.mark.integration

SCAN_TIMEOUT_S = 3.0
HANG_GUARD_S = 30.0
"""How long the paused lookup may take before the test calls it a stall: past the scan's two
timeouts and their consumers' stops, below aiokafka's 40 s request timeout (without the scan's
timeout, the lookup would wait that long at least, then retry the paused broker forever)."""


def _pid(env: dict[str, str]) -> int:
    return int((Path(env["CHATSCRIBE_STATE_DIR"]) / "kafka/kafka.pid").read_text().strip())


async def _started_history(settings: Settings, job_id: str) -> JobHistory:
    """Topics made, one ``started`` event of ``job_id`` produced; a started history."""
    await ensure_topics(settings, [TOPIC_JOB_EVENTS])
    topic = settings.topic(TOPIC_JOB_EVENTS)
    producer = create_producer(settings, client_id="history-test")
    await producer.start()
    try:
        event = JobEvent(job_id=job_id, run_id="run-h", kind="started", attempt=1)
        await producer.send_and_wait(topic, event.to_value(), key=job_id.encode())
        partitions = await producer.partitions_for(topic)
    finally:
        await producer.stop()
    history = JobHistory(settings)
    await history.start(partitions)
    return history


async def _lookups(settings: Settings, broker_pid: int) -> None:
    job_id = "job-history-scan"
    submitted_ms = int(time.time() * 1000)
    history = await _started_history(settings, job_id)
    try:
        assert (await history.prior(job_id, submitted_ms=submitted_ms)).attempt == 1
        history.forget()  # a rebalance: the next lookup scans again
        timeouts = metrics.HISTORY_SCAN_TIMEOUTS._value.get()
        os.kill(broker_pid, signal.SIGSTOP)
        try:
            with pytest.raises(RecordDeliveryError, match="timed out"):
                await asyncio.wait_for(
                    history.prior(job_id, submitted_ms=submitted_ms), HANG_GUARD_S
                )
        finally:
            os.kill(broker_pid, signal.SIGCONT)
        assert metrics.HISTORY_SCAN_TIMEOUTS._value.get() - timeouts == SCAN_ATTEMPTS
        # The broker back, the next lookup scans on a new consumer.
        assert (await history.prior(job_id, submitted_ms=submitted_ms)).attempt == 1
    finally:
        await history.stop()


@pytest.mark.timeout(180)
def test_history_scan_of_a_paused_broker_fails_instead_of_stalling_the_worker(
    private_kafka: tuple[str, dict[str, str]], database_url: str
) -> None:
    bootstrap, env = private_kafka
    settings = unique_settings(
        bootstrap, database_url, tag="h", worker_history_scan_timeout_s=SCAN_TIMEOUT_S
    )
    asyncio.run(_lookups(settings, _pid(env)))
