"""Dead letters: records the pipeline cannot process, kept whole with the reason.

A Kafka module (aiokafka). A dead letter is the original record's key, value (bytes unchanged)
and headers, plus the headers of :class:`models.records.DeadLetter` (reason, source topic,
partition, offset), produced to a dead-letter topic (design.md, "Flow"): the worker sends
unreadable jobs to ``chat.requests.dlq``, the sink unarchivable records to ``chat.lines.dlq``.

For operators (``chatscribe dlq``, :mod:`pipeline.cli.dlq`): :func:`read_dead_letters` lists
them, :func:`read_dead_letter` reads one by position (:class:`DeadLetterRef`,
``chat.lines.dlq:0:12``) and :func:`replay` re-submits the original record to its source topic.
Dead letters are read with a group-less consumer, so reading commits nothing and changes
nothing; the dead-letter topics are never trimmed by these commands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from models import wire
from models.errors import LineRecordError
from models.records import DeadLetter
from pipeline.errors import (
    DeadLetterNotFoundError,
    InvalidJobError,
    InvalidRecordError,
    NotReplayableError,
    RecordDeliveryError,
)
from pipeline.kafka.clients import (
    Pending,
    create_admin,
    create_consumer,
    create_producer,
    delivered,
    send,
)
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

MAX_REASON_CHARS: Final = 2000
"""Longest reason kept in a dead letter's header (a pydantic summary of a bad job fits)."""

Record = Any
"""An ``aiokafka.structs.ConsumerRecord`` (aiokafka ships no type hints)."""


DeadRecord = tuple[Record, "InvalidJobError | InvalidRecordError"]
"""A record that cannot be processed and the error that says why (its ``reason`` and position)."""


async def send_dead_letters(producer: Any, topic: str, dead: Sequence[DeadRecord]) -> None:
    """The one dead-letter writer.

    The worker's unreadable jobs and the sink's unarchivable records alike. Produces each record
    to ``topic`` and waits for every acknowledgement.

    One rule set (design.md, "Flow"): a dead letter keeps the original key, value (bytes
    unchanged) and headers, and adds the :class:`models.records.DeadLetter` headers: the
    error's ``reason`` cut to :data:`MAX_REASON_CHARS` and the source topic, partition and offset.

    Args:
        producer: A started ``AIOKafkaProducer`` (:func:`pipeline.kafka.clients.create_producer`).
        topic: The full dead-letter topic name.
        dead: ``(consumer record, error)`` pairs; the record is an aiokafka ``ConsumerRecord``
            or a faust ``Message`` (headers as pairs or as a mapping).

    Raises:
        RecordDeliveryError: Kafka did not acknowledge a dead letter.
        RecordTooLargeError: A dead letter is larger than ``max_record_bytes``.
    """
    pending = [await _send(producer, topic, record, error) for record, error in dead]
    await delivered(pending)


async def _send(
    producer: Any, topic: str, record: Record, error: InvalidJobError | InvalidRecordError
) -> Pending:
    letter = DeadLetter(
        reason=error.reason[:MAX_REASON_CHARS],
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
    original = record.headers or ()
    pairs = list(original.items()) if isinstance(original, Mapping) else list(original)
    headers = [*pairs, *letter.headers()]
    return await send(producer, topic, key=record.key, value=record.value or b"", headers=headers)


DLQ_TOPICS: Final = (wire.TOPIC_REQUESTS_DLQ, wire.TOPIC_LINES_DLQ)
"""The dead-letter topics an operator inspects (unprefixed :mod:`models.wire` names)."""
_DLQ_HEADERS: Final = frozenset(
    {
        wire.HEADER_DLQ_REASON,
        wire.HEADER_DLQ_SOURCE_TOPIC,
        wire.HEADER_DLQ_SOURCE_PARTITION,
        wire.HEADER_DLQ_SOURCE_OFFSET,
    }
)
READ_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True)
class DeadLetterRef:
    """Where a dead letter sits: ``name`` is an unprefixed name from :data:`DLQ_TOPICS`."""

    name: str
    partition: int
    offset: int

    @classmethod
    def parse(cls, text: str) -> DeadLetterRef:
        """Parses ``chat.lines.dlq:0:12`` (as ``chatscribe dlq list`` prints it).

        Raises:
            ValueError: Not ``<dead-letter topic>:<partition>:<offset>``.
        """
        parts = text.split(":")
        if len(parts) != 3 or parts[0] not in DLQ_TOPICS:
            raise ValueError(f"{text!r} is not one of {', '.join(DLQ_TOPICS)}:PARTITION:OFFSET")
        try:
            partition, offset = int(parts[1]), int(parts[2])
        except ValueError as exc:
            raise ValueError(f"{text!r}: partition and offset must be integers") from exc
        if partition < 0 or offset < 0:
            raise ValueError(f"{text!r}: partition and offset must be >= 0")
        name = parts[0]
        return cls(name, partition, offset)

    def __str__(self) -> str:
        return f"{self.name}:{self.partition}:{self.offset}"


@dataclass(frozen=True)
class StoredDeadLetter:
    """A record read back from a dead-letter topic.

    Attributes:
        ref: Its position (unprefixed topic name).
        timestamp_ms: Kafka's record timestamp (ms since the epoch).
        key, value: The original record's key and value, bytes unchanged.
        headers: Every header: the original record's, then the dead-letter ones.
        letter: The reason and source, or None when the dead-letter headers are missing.
    """

    ref: DeadLetterRef
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    letter: DeadLetter | None

    @property
    def size_bytes(self) -> int:
        """Bytes of the value."""
        return len(self.value)

    def original_headers(self) -> list[tuple[str, bytes]]:
        """Returns: the headers the record had before it was dead-lettered."""
        return [(name, value) for name, value in self.headers if name not in _DLQ_HEADERS]


async def read_dead_letters(
    settings: Settings, names: Sequence[str] = DLQ_TOPICS
) -> list[StoredDeadLetter]:
    """Reads every record of the dead-letter topics, oldest first per partition.

    Args:
        settings: Bootstrap servers and topic prefix.
        names: Unprefixed dead-letter topic names (:data:`DLQ_TOPICS`); missing topics are empty.

    Returns:
        The dead letters ordered by topic, partition and offset.

    Raises:
        RecordDeliveryError: Kafka cannot be reached or the read took over ``READ_TIMEOUT_S``.
    """
    by_name = {settings.topic(name): name for name in names}
    parts = await _partitions(settings, by_name)
    async with _consumer(settings) as consumer:
        records = await _read_to_end(consumer, parts)
    return [_stored(record, by_name[record.topic]) for record in records]


async def read_dead_letter(settings: Settings, ref: DeadLetterRef) -> StoredDeadLetter:
    """Reads the dead letter at ``ref``.

    Raises:
        DeadLetterNotFoundError: There is no record at that position.
        RecordDeliveryError: Kafka cannot be reached.
    """
    tp = TopicPartition(settings.topic(ref.name), ref.partition)
    if tp not in await _partitions(settings, [tp.topic]):
        raise DeadLetterNotFoundError(tp.topic, ref.partition, ref.offset)
    async with _consumer(settings) as consumer:
        end = (await consumer.end_offsets([tp]))[tp]
        if ref.offset >= end:
            raise DeadLetterNotFoundError(tp.topic, ref.partition, ref.offset)
        consumer.assign([tp])
        consumer.seek(tp, ref.offset)
        records = await _read_to_end(consumer, [tp], seek=False, stop_after=ref.offset)
    for record in records:
        if record.offset == ref.offset:
            return _stored(record, ref.name)
    raise DeadLetterNotFoundError(tp.topic, ref.partition, ref.offset)  # compacted or deleted


async def replay(settings: Settings, letters: Sequence[StoredDeadLetter]) -> list[str]:
    """Re-submits each dead letter's original record to its source topic.

    Key, value and original headers; waits for Kafka's acknowledgements.

    Replaying is safe to repeat on the archive side: lines and events are stored idempotently
    on their business keys (job, attempt, line number), so a replayed record that was already
    archived changes nothing. A replayed ``chat.requests`` job is run by a worker again.

    Returns:
        The source topic of each letter, in order.

    Raises:
        NotReplayableError: A letter has no source topic (checked before anything is sent).
        RecordDeliveryError: Kafka did not acknowledge a record.
    """
    targets = []
    for stored in letters:
        if stored.letter is None:
            raise NotReplayableError(str(stored.ref), header=wire.HEADER_DLQ_SOURCE_TOPIC)
        targets.append(stored.letter.source_topic)
    producer = create_producer(settings, client_id="chatscribe-dlq-replay")
    await producer.start()
    try:
        pending = [
            await send(producer, topic, key=s.key, value=s.value, headers=s.original_headers())
            for topic, s in zip(targets, letters, strict=True)
        ]
        await delivered(pending)
    finally:
        await producer.stop()
    for topic, stored in zip(targets, letters, strict=True):
        logger.info("dead letter replayed ref=%s topic=%s", stored.ref, topic)
    return targets


async def _partitions(settings: Settings, topics: Iterable[str]) -> list[TopicPartition]:
    """Returns: every partition of those ``topics`` that exist (none is created)."""
    admin = create_admin(settings)
    try:
        await admin.start()
        existing = sorted(set(topics) & set(await admin.list_topics()))
        described = await admin.describe_topics(existing) if existing else []
    except KafkaError as exc:
        raise RecordDeliveryError(f"cannot describe topics: {exc!r}", topic="*.dlq") from exc
    finally:
        await admin.close()
    return sorted(
        TopicPartition(topic["topic"], part["partition"])
        for topic in described
        for part in topic["partitions"]
    )


@asynccontextmanager
async def _consumer(settings: Settings) -> AsyncIterator[Any]:
    consumer = create_consumer(settings, group_id=None, enable_auto_commit=False)
    try:
        await consumer.start()
    except KafkaError as exc:
        raise RecordDeliveryError(f"cannot read dead letters: {exc!r}", topic="*.dlq") from exc
    try:
        yield consumer
    finally:
        await consumer.stop()


async def _read_to_end(
    consumer: Any, parts: list[Any], *, seek: bool = True, stop_after: int | None = None
) -> list[Record]:
    """Returns: the records of ``parts`` up to their end offsets at the time of the call."""
    if not parts:
        return []
    ends = await consumer.end_offsets(parts)
    if seek:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
    records: list[Record] = []
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                batches = await consumer.getmany(*parts, timeout_ms=200)
                records += [r for tp in parts for r in batches.get(tp, [])]
                if stop_after is not None and any(r.offset >= stop_after for r in records):
                    break
    except TimeoutError as exc:
        topics = ",".join(sorted({tp.topic for tp in parts}))
        raise RecordDeliveryError("dead-letter read timed out", topic=topics) from exc
    return sorted(records, key=lambda r: (r.topic, r.partition, r.offset))


def _stored(record: Record, name: str) -> StoredDeadLetter:
    headers = tuple((h, bytes(v)) for h, v in record.headers or ())
    try:
        letter: DeadLetter | None = DeadLetter.from_headers(headers)
    except (LineRecordError, ValueError):
        letter = None
    return StoredDeadLetter(
        ref=DeadLetterRef(name, record.partition, record.offset),
        timestamp_ms=record.timestamp,
        key=record.key,
        value=record.value or b"",
        headers=headers,
        letter=letter,
    )
