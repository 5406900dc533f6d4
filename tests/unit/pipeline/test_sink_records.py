"""Pure parts of the sink and the dead-letter commands: decoding, references, hex dumps, lag."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline.cli.dlq import hexdump
from pipeline.kafka.dead_letters import DeadLetterRef
from pipeline.sink.decode import decode_batch
from pipeline.sink.metrics import set_lag

LINES, EVENTS = "p.chat.lines", "p.chat.job-events"


@dataclass
class FakeRecord:
    """The fields of an aiokafka ConsumerRecord the decoder reads."""

    topic: str
    value: bytes | None
    key: bytes | None = b"job-1"
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int = 0
    offset: int = 0


def _line_record(**overrides: object) -> FakeRecord:
    line = LineEnvelope.from_raw(
        job_id="job-1", attempt=1, line_no=3, raw=b'{"id":"m1"}', received_at=datetime.now(UTC)
    )
    key, value, headers = line.to_record()
    record = FakeRecord(LINES, value, key, headers)
    for name, value_ in overrides.items():
        setattr(record, name, value_)
    return record


def test_decode_batch_keeps_order_and_gives_reasons_for_what_cannot_be_archived() -> None:
    event = JobEvent(job_id="job-1", run_id="r", kind="started", attempt=1)
    records = [
        _line_record(),
        _line_record(headers=[]),  # no attempt / line number headers
        FakeRecord(EVENTS, event.to_value()),
        FakeRecord(EVENTS, b"not json"),
        FakeRecord("p.other", b"{}"),
        _line_record(key=b"job\x00nul"),  # PostgreSQL text cannot hold NUL
    ]
    items, dead = decode_batch(records, lines_topic=LINES, events_topic=EVENTS)
    assert [type(value) for _, value in items] == [LineEnvelope, JobEvent]
    first = items[0][1]
    assert isinstance(first, LineEnvelope) and first.line_no == 3 and items[1][0] is records[2]
    reasons = {id(record): error.reason for record, error in dead}
    assert all(
        (error.topic, error.partition, error.offset)
        == (record.topic, record.partition, record.offset)
        for record, error in dead
    )
    assert reasons[id(records[1])].startswith("LineRecordError: header chatscribe-attempt")
    assert "ValidationError" in reasons[id(records[3])]
    assert "unexpected topic p.other" in reasons[id(records[4])]
    assert "NUL" in reasons[id(records[5])]


def test_dead_letter_reference_round_trips_and_refuses_other_topics() -> None:
    ref = DeadLetterRef.parse("chat.lines.dlq:3:1042")
    assert (ref.name, ref.partition, ref.offset, str(ref)) == (
        wire.TOPIC_LINES_DLQ,
        3,
        1042,
        "chat.lines.dlq:3:1042",
    )
    for bad in ("chat.lines:0:1", "chat.lines.dlq:0", "chat.lines.dlq:x:1", "chat.lines.dlq:0:-1"):
        with pytest.raises(ValueError, match=r"chat\.lines"):
            DeadLetterRef.parse(bad)


def test_hexdump_shows_offsets_bytes_and_printable_characters() -> None:
    dump = hexdump(b"\xff\xfe{}abcdefghijklmnop", width=16).splitlines()
    assert (
        dump[0] == "00000000  ff fe 7b 7d 61 62 63 64 65 66 67 68 69 6a 6b 6c  |..{}abcdefghijkl|"
    )
    assert dump[1].startswith("00000010  6d 6e 6f 70") and dump[1].endswith("|mnop|")


def test_lag_gauge_follows_the_assignment() -> None:
    def lag(topic: str, partition: int) -> float | None:
        labels = {"topic": topic, "partition": str(partition)}
        return REGISTRY.get_sample_value("chatscribe_sink_consumer_lag_records", labels)

    set_lag([("t.lines", 0, 5), ("t.lines", 1, 0)])
    assert (lag("t.lines", 0), lag("t.lines", 1)) == (5, 0)
    set_lag([("t.lines", 1, 2)])  # partition 0 revoked
    assert (lag("t.lines", 0), lag("t.lines", 1)) == (None, 2)
    set_lag([])
