"""chat.answers records as CloudEvents in binary content mode (pipeline/sink/answers.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from models import schemas, wire
from models.records import AnswerRecord
from pipeline.sink.answers import answer_event

FINISHED = datetime(2026, 11, 28, 12, 0, 5, tzinfo=UTC)


def _answer(attempt: int = 1) -> AnswerRecord:
    return AnswerRecord(
        job_id="job-1",
        run_id="run-1",
        attempt=attempt,
        question="Who flies most?",
        persona="analyst",
        identity="external:analyst-1",
        chat_id="chat-1",
        answer="UA.",
        answer_source="final",
        sql="SELECT 1",
        total_rows=16,
        chart_spec=None,
        finished_at=FINISHED,
    )


def test_answer_event_keeps_the_record_as_value_and_parses_back_as_a_cloudevent() -> None:
    record = _answer()
    key, value, headers = answer_event(record)
    assert key == b"job-1" and value == record.to_value()
    found = dict(headers)
    assert found["ce_specversion"] == b"1.0" and found["content-type"] == b"application/json"
    event = from_binary(KafkaMessage(headers=found, key=key, value=value), JSONFormat())
    assert event.get_id() == "job-1:1"
    assert event.get_source() == "/chatscribe/runs/run-1"
    assert event.get_type() == wire.CE_TYPE_ANSWER
    assert event.get_subject() == "job-1"
    assert event.get_time() == FINISHED
    assert event.get_dataschema() == schemas.by_name(wire.TOPIC_ANSWERS).schema_id
    assert event.get_data() == record.model_dump(mode="json")


def test_answer_event_id_is_stable_per_attempt() -> None:
    first = dict(answer_event(_answer())[2])
    again = dict(answer_event(_answer())[2])
    retried = dict(answer_event(_answer(attempt=2))[2])
    assert first["ce_id"] == again["ce_id"] == b"job-1:1"
    assert retried["ce_id"] == b"job-1:2"
