"""Dead letters: records the pipeline cannot process, kept whole with the reason.

A Kafka module (aiokafka). A dead letter is the original record's key, value (bytes unchanged)
and headers, plus the headers of :class:`models.records.DeadLetter` (reason, source topic,
partition, offset), produced to a dead-letter topic (design.md, "Flow").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

from aiokafka.errors import KafkaError

from models.records import DeadLetter
from pipeline.kafka import RecordDeliveryError

logger = logging.getLogger(__name__)

MAX_REASON_CHARS: Final = 1000

Record = Any
"""An ``aiokafka.structs.ConsumerRecord`` (aiokafka ships no type hints)."""


async def send_dead_letters(producer: Any, topic: str, dead: Sequence[tuple[Record, str]]) -> None:
    """Produces each record to ``topic`` with its reason and waits for every acknowledgement.

    Args:
        producer: A started ``AIOKafkaProducer`` (:func:`pipeline.kafka.create_producer`).
        topic: The full dead-letter topic name.
        dead: ``(consumer record, reason)`` pairs; reasons are cut to ``MAX_REASON_CHARS``.

    Raises:
        RecordDeliveryError: Kafka did not acknowledge a dead letter.
    """
    try:
        pending = [await _send(producer, topic, record, reason) for record, reason in dead]
        for future in pending:
            await future
    except KafkaError as exc:
        raise RecordDeliveryError(f"dead letter not delivered: {exc!r}", topic=topic) from exc


async def _send(producer: Any, topic: str, record: Record, reason: str) -> Any:
    letter = DeadLetter(
        reason=reason[:MAX_REASON_CHARS],
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
    )
    logger.warning(
        "record dead-lettered topic=%s partition=%d offset=%d reason=%s",
        record.topic,
        record.partition,
        record.offset,
        letter.reason,
    )
    headers = [*(record.headers or ()), *letter.headers()]
    return await producer.send(topic, record.value, key=record.key, headers=headers)
