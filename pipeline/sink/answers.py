"""Final answers to ``chat.answers``: compact records for downstream consumers, from an outbox.

After the sink's database commit, every answer of the batch's (job, attempt) pairs that has not
been published yet (``answers.published_at IS NULL``, the outbox; partial index
``ix_answers_unpublished``) becomes one record on ``chat.answers`` (key: job id; value: the
JSON of :class:`AnswerRecord`). Once Kafka acknowledged all of them, ``published_at`` is set.
If producing fails, the sink rewinds and reads the batch again: the archive writes change
nothing, and the still unpublished answers are sent again. So delivery is at least once;
consumers keep the latest record per (job id, attempt). An attempt normalised again
(``renormalise``) is published again.

Record value: the UTF-8 JSON of :class:`models.records.AnswerRecord` (schema:
``chatscribe schemas show chat.answers``). Each record is a CloudEvent in binary content mode
(CloudEvents 1.0 Kafka protocol binding, written by the ``cloudevents`` package's Kafka
binding): the value stays the answer record and the attributes travel as headers
(:func:`answer_event`): ``ce_specversion`` ``1.0``, ``ce_id`` ``<job_id>:<attempt>`` (the same
for every publication of an attempt, so a consumer deduplicates on it), ``ce_source``
``/chatscribe/runs/<run_id>``, ``ce_type`` ``io.chatscribe.answer.v1``, ``ce_subject`` the job
id, ``ce_time`` the attempt's end (its publication time when the archive has none),
``ce_dataschema`` the schema's ``$id``, and ``content-type: application/json``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from cloudevents.core.bindings.kafka import to_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from models import schemas, wire
from models.records import AnswerRecord, JobEvent, LineEnvelope, utc_now
from pipeline.archive.engine import ArchiveEngine
from pipeline.archive.outbox import mark_published, pending_answers
from pipeline.kafka.clients import Pending, delivered, send

logger = logging.getLogger(__name__)
_FORMAT = JSONFormat()


def answer_event(record: AnswerRecord) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Builds the ``chat.answers`` record of an answer as a binary-mode CloudEvent.

    Args:
        record: The answer (from the outbox).

    Returns:
        ``(key, value, headers)``: key the job id, value :meth:`AnswerRecord.to_value` unchanged,
        headers the ``ce_*`` attributes and ``content-type`` (module docstring), as aiokafka
        takes them.
    """
    event = CloudEvent(
        {
            "specversion": "1.0",
            "id": f"{record.job_id}:{record.attempt}",
            "source": f"{wire.CE_SOURCE_PREFIX}{record.run_id}",
            "type": wire.CE_TYPE_ANSWER,
            "subject": record.job_id,
            "time": record.finished_at or utc_now(),
            "datacontenttype": wire.CE_CONTENT_TYPE,
            "dataschema": schemas.by_name(wire.TOPIC_ANSWERS).schema_id,
        },
        record.to_value(),
    )
    message = to_binary(event, _FORMAT, key_mapper=lambda _: record.job_id.encode())
    return record.job_id.encode(), message.value, list(message.headers.items())


class AnswerPublisher:
    """Publishes unpublished answers of touched attempts (module docstring).

    Args:
        engine: The archive's engine (the sink's writer's); not owned.
        topic: The ``chat.answers`` topic, its prefix applied.
        producer: A started aiokafka producer (the sink's); not owned.
    """

    def __init__(self, engine: ArchiveEngine, topic: str, producer: Any) -> None:
        self._engine = engine
        self._topic = topic
        self._producer = producer
        self.published = 0

    def __repr__(self) -> str:
        return f"<AnswerPublisher topic={self._topic} published={self.published}>"

    async def publish(self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]) -> int:
        """Publishes the batch's unpublished answers and marks them published.

        Returns:
            How many records were published.

        Raises:
            RecordDeliveryError: Kafka did not acknowledge a record (nothing marked).
            ArchiveUnavailableError: PostgreSQL failed (nothing marked).
        """
        pairs = sorted(
            {(x.job_id, x.attempt) for x in lines} | {(e.job_id, e.attempt) for e in events}
        )
        if not pairs:
            return 0
        records = await asyncio.to_thread(pending_answers, self._engine, pairs)
        if not records:
            return 0
        pending: list[Pending] = []
        for record in records:
            key, value, headers = answer_event(record)
            pending.append(
                await send(self._producer, self._topic, key=key, value=value, headers=headers)
            )
        await delivered(pending)
        await asyncio.to_thread(mark_published, self._engine, records)
        self.published += len(records)
        logger.debug("answers published count=%d topic=%s", len(records), self._topic)
        return len(records)
