"""Publish a run's jobs: an ``accepted`` event and the job record for each.

The ``accepted`` event goes to ``chat.job-events`` first (carrying the job without its API key) so
the archive knows of the job even before a worker picks it up; then the job itself goes to
``chat.requests``. Both are keyed by job id (``design.md``, "Topics and keys"), so a job's events
share a partition and stay in order. The call returns only when Kafka acknowledged every record
(``acks=all``, idempotent producer): a run that returned is durably submitted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from models import wire
from models.records import ChatJob, JobEvent
from pipeline.kafka import Pending, create_producer, delivered, send
from pipeline.settings import Settings

logger = logging.getLogger(__name__)


async def submit_jobs(settings: Settings, jobs: Sequence[ChatJob]) -> None:
    """Publishes ``jobs`` and waits for Kafka to acknowledge all of them.

    Args:
        settings: Bootstrap servers and topic prefix.
        jobs: The run's jobs (:func:`pipeline.batch.expand_jobs`).

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
