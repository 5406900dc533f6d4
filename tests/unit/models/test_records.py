from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from models import wire
from models.errors import LineRecordError
from models.records import ChatJob, JobEvent, LineEnvelope, parse_line

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"


def _job(**extra: object) -> ChatJob:
    return ChatJob.model_validate(
        {
            "job_id": "j1",
            "run_id": "r1",
            "question": "How many flights?",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": URL,
            **extra,
        }
    )


def test_chat_job_round_trips_through_kafka_value() -> None:
    job = _job(persona="analyst", deadline_s=30)
    assert ChatJob.from_value(job.to_value()) == job


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"question": ""}, "question"),
        ({"chat_url": "ftp://x"}, "chat_url"),
        ({"session_settings": {"externalId": "Upper"}}, "session_settings"),
    ],
)
def test_invalid_job_names_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        _job(**change)


def test_job_event_round_trip_and_terminal_flag() -> None:
    event = JobEvent(job_id="j1", run_id="r1", kind="completed", attempt=1, line_count=12)
    again = JobEvent.from_value(event.to_value())
    assert again == event and again.is_terminal
    assert not JobEvent(job_id="j1", run_id="r1", kind="started", attempt=1).is_terminal


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\xff\xfe{}", "invalid UTF-8 at byte 0"),
        (b'{"id": ', "invalid JSON"),
        (b"[1, 2]", "JSON list is not a stream message object"),
        (b'{"graphPath": 3}', "not a stream message: graphPath"),
        (b"   ", "empty line"),
    ],
)
def test_parse_line_reports_why_a_line_is_bad(raw: bytes, error: str) -> None:
    message, reason = parse_line(raw)
    assert message is None and reason is not None and reason.startswith(error)


def test_line_envelope_record_round_trip_keeps_bytes() -> None:
    raw = b'{"id":"m1","role":"assistant","content":"caf\xc3\xa9"}\r'
    at = datetime(2026, 11, 22, 12, 0, 0, 123456, tzinfo=UTC)
    envelope = LineEnvelope.from_raw(
        job_id="j1", attempt=2, line_no=7, raw=raw, received_at=at, terminated=False, chat_id="c1"
    )
    key, value, headers = envelope.to_record()
    assert key == b"j1" and value == raw
    again = LineEnvelope.from_record(key, value, headers)
    assert again == envelope
    assert again.message is not None and again.message.content == "café"


def test_line_record_carries_the_job_time_as_its_partition_key() -> None:
    received = datetime(2026, 11, 1, 0, 0, 1, tzinfo=UTC)
    job_at = datetime(2026, 10, 31, 23, 59, 59, 654321, tzinfo=UTC)
    line = LineEnvelope.from_raw(
        job_id="j", attempt=1, line_no=1, raw=b"{}", received_at=received, job_at=job_at
    )
    key, value, headers = line.to_record()
    assert (wire.HEADER_JOB_AT, job_at.isoformat().encode()) in headers
    again = LineEnvelope.from_record(key, value, headers)
    assert again.job_at == job_at and again.partition_at == job_at
    older = [(name, v) for name, v in headers if name != wire.HEADER_JOB_AT]
    before = LineEnvelope.from_record(key, value, older)  # a record from before the header
    assert before.job_at is None and before.partition_at == received


def test_line_envelope_keeps_invalid_bytes_with_parse_error() -> None:
    at = datetime(2026, 11, 22, tzinfo=UTC)
    envelope = LineEnvelope.from_raw(job_id="j", attempt=1, line_no=1, raw=b"\xff", received_at=at)
    again = LineEnvelope.from_record(*envelope.to_record())
    assert again.raw == b"\xff" and again.message is None
    assert again.parse_error is not None and "UTF-8" in again.parse_error


@pytest.mark.parametrize(
    "missing", [wire.HEADER_ATTEMPT, wire.HEADER_LINE_NO, wire.HEADER_RECEIVED_AT]
)
def test_line_record_without_required_header_is_rejected(missing: str) -> None:
    at = datetime(2026, 11, 22, tzinfo=UTC)
    key, value, headers = LineEnvelope.from_raw(
        job_id="j", attempt=1, line_no=1, raw=b"{}", received_at=at
    ).to_record()
    kept = [(name, v) for name, v in headers if name != missing]
    with pytest.raises(LineRecordError) as caught:
        LineEnvelope.from_record(key, value, kept)
    assert caught.value.header == missing


def test_line_record_without_key_is_rejected() -> None:
    with pytest.raises(LineRecordError, match="no key"):
        LineEnvelope.from_record(None, b"{}", [])


def test_job_api_key_travels_in_the_request_value_only() -> None:
    job = _job(api_key="secret-key")
    assert b"secret-key" in job.to_value()
    again = ChatJob.from_value(job.to_value())
    assert again.api_key is not None
    assert again.api_key.get_secret_value() == "secret-key"
    event = JobEvent(job_id="j1", run_id="r1", kind="accepted", job=job)
    assert b"secret-key" not in event.to_value()
    assert "secret-key" not in repr(job)
    assert job.without_secrets().api_key is None
