"""Decoding the sink's records: Kafka records to archive values, or a reason to dead-letter.

Pure functions (no I/O) used by :class:`pipeline.sink.loop.Sink` for every batch. A ``chat.lines``
record becomes a :class:`models.records.LineEnvelope` (value = the raw line, metadata in
headers); a ``chat.job-events`` record a :class:`models.records.JobEvent`. A record that cannot
be decoded, or whose keys PostgreSQL could never store (:func:`models.archive.key_refusal`), is
returned with the reason, for the dead-letter topic (design.md, "Flow").
"""

from __future__ import annotations

from collections.abc import Sequence

from models.archive import key_refusal
from models.errors import LineRecordError
from models.records import JobEvent, LineEnvelope
from pipeline.collector import collector_paused
from pipeline.errors import InvalidRecordError
from pipeline.kafka.dead_letters import Record

Item = tuple[Record, LineEnvelope | JobEvent]
"""A record and its decoded value."""
Dead = tuple[Record, InvalidRecordError]
"""A record and why it cannot be archived (the error carries the reason and the position)."""


def decode_batch(
    records: Sequence[Record], *, lines_topic: str, events_topic: str
) -> tuple[list[Item], list[Dead]]:
    """Decodes a batch, keeping the records' order.

    Args:
        records: aiokafka ``ConsumerRecord`` objects of both topics.
        lines_topic: The full (prefixed) ``chat.lines`` topic name.
        events_topic: The full (prefixed) ``chat.job-events`` topic name.

    Returns:
        ``(decoded, dead)``: the decoded records and the rejected ones, each with an
        :class:`InvalidRecordError` whose reason is ``"<ErrorType>: <message>"`` (the decode
        error translated here).
    """
    items: list[Item] = []
    dead: list[Dead] = []
    with collector_paused():
        for record in records:
            try:
                value = decode_record(record, lines_topic=lines_topic, events_topic=events_topic)
            except (LineRecordError, ValueError) as exc:
                dead.append((record, invalid_record(record, f"{type(exc).__name__}: {exc}")))
            else:
                items.append((record, value))
    return items, dead


def decode_record(
    record: Record, *, lines_topic: str, events_topic: str
) -> LineEnvelope | JobEvent:
    """Decodes one record of ``lines_topic`` or ``events_topic``.

    Raises:
        LineRecordError: A line record's key or a required header is missing or malformed.
        ValueError: An event is not valid JSON of a :class:`JobEvent` (pydantic's
            ``ValidationError`` is one), the topic is neither, or PostgreSQL could not store
            the record's keys.
    """
    value: LineEnvelope | JobEvent
    if record.topic == lines_topic:
        value = LineEnvelope.from_record(record.key, record.value, record.headers)
        problem = key_refusal(value.job_id, value.attempt, value.line_no)
    elif record.topic == events_topic:
        value = JobEvent.from_value(record.value or b"")
        problem = key_refusal(value.job_id, value.attempt, value.line_count or 0)
    else:
        raise ValueError(f"record from unexpected topic {record.topic}")
    if problem is not None:
        raise ValueError(problem)
    return value


def invalid_record(record: Record, reason: str) -> InvalidRecordError:
    """Returns: the error that dead-letters ``record`` with ``reason`` (its position attached)."""
    return InvalidRecordError(
        reason, topic=record.topic, partition=record.partition, offset=record.offset
    )
