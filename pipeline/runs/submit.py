"""Publish a run's jobs: an ``accepted`` event and the job record for each.

The ``accepted`` event goes to ``chat.job-events`` first (carrying the job without its API key) so
the archive knows of the job even before a worker picks it up; then the job itself goes to
``chat.requests``. Both are keyed by job id (``design.md``, "Topics and keys"), so a job's events
share a partition and stay in order. The call returns only when Kafka acknowledged every record
(``acks=all``, idempotent producer): a run that returned is durably submitted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from models import wire
from models.records import ChatJob, JobEvent
from pipeline.kafka.clients import Pending, create_producer, delivered, send
from pipeline.settings import Settings

logger = logging.getLogger(__name__)


async def submit_jobs(settings: Settings, jobs: Sequence[ChatJob]) -> None:
    """Publishes ``jobs`` and waits for Kafka to acknowledge all of them.

    Args:
        settings: Bootstrap servers and topic prefix.
        jobs: The run's jobs (:func:`pipeline.runs.batch.expand_jobs`).

    Raises:
        RecordDeliveryError: Kafka did not acknowledge a record; jobs before it may have been
            published (resubmitting is safe: the archive's writes are idempotent on job id).
        RecordTooLargeError: A job is larger than ``max_record_bytes``.
    """
    events_topic = settings.topic(wire.TOPIC_JOB_EVENTS)
    requests_topic = settings.topic(wire.TOPIC_REQUESTS)
    producer = create_producer(settings, client_id="chatscribe-submit")
    output: list[Pending] = []
    await producer.start()
    try:
        for job in jobs:
            key = job.job_id.encode()
            accepted = JobEvent(
                job_id=job.job_id, run_id=job.run_id, kind="accepted", job=job.without_secrets()
            )
            output.append(await send(producer, events_topic, key=key, value=accepted.to_value()))
            output.append(await send(producer, requests_topic, key=key, value=job.to_value()))
        await delivered(output)
    finally:
        await producer.stop()
    logger.info("jobs submitted count=%d topic=%s", len(jobs), requests_topic)


async def cancel_jobs(settings: Settings, job_ids: Sequence[str], *, reason: str = "") -> None:
    """Publishes a cancellation for each job to ``chat.cancellations`` (key: job id).

    The worker driving a job calls the abort endpoint and the job ends ``aborted``; a worker that
    has not started the job yet remembers the cancellation for a while (:mod:`pipeline.worker.app`).
    A job that already finished is not changed.

    Args:
        settings: Bootstrap servers and topic prefix.
        job_ids: The jobs to cancel.
        reason: Why, recorded in the job's ``aborted`` event (``{"reason": ...}``).

    Raises:
        RecordDeliveryError: Kafka did not acknowledge a cancellation.
    """
    topic = settings.topic(wire.TOPIC_CANCELLATIONS)
    value = json.dumps({"reason": reason}).encode() if reason else b""
    producer = create_producer(settings, client_id="chatscribe-cancel")
    await producer.start()
    try:
        pending = [await send(producer, topic, key=j.encode(), value=value) for j in job_ids]
        await delivered(pending)
    finally:
        await producer.stop()
    logger.info("cancellations sent count=%d topic=%s", len(job_ids), topic)
