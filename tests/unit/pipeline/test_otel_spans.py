"""Archived turns as spans: deterministic ids, GenAI attribute names, tool errors (pure)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from pydantic import ValidationError

from pipeline.archive.traces import ToolCallRow, TurnRow
from pipeline.otel import semconv as sc
from pipeline.otel.export import traces_url
from pipeline.otel.spans import MAX_ATTRIBUTE_CHARS, span_id, trace_id, turn_spans
from pipeline.settings import Settings

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _call(message_id: str, **changes: object) -> ToolCallRow:
    fields: dict[str, object] = {
        "message_id": message_id,
        "name": "cubeSqlApi",
        "kind": "sql",
        "input": '{"sqlQuery": "SELECT 1"}',
        "input_raw": None,
        "result": '{"data": [[1]]}',
        "error": None,
        "payload_error": None,
        "complete": True,
        "sql": "SELECT 1",
        "total_rows": 1,
        "returned_rows": 1,
        "sql_error": None,
        "started_at": T0 + timedelta(seconds=1),
        "ended_at": T0 + timedelta(seconds=2),
    }
    return ToolCallRow(**{**fields, **changes})  # type: ignore[arg-type]


def _turn(*calls: ToolCallRow, status: str = "completed") -> TurnRow:
    return TurnRow(
        job_id="job-1",
        run_id="run-1",
        attempt=1,
        question="Q?",
        persona=None,
        identity="external:a",
        chat_id="chat-1",
        chat_url=None,
        status=status,
        error=None if status == "completed" else "boom",
        error_type=None,
        submitted_at=T0,
        started_at=T0,
        first_line_at=T0 + timedelta(milliseconds=250),
        finished_at=T0 + timedelta(seconds=3),
        answer="A.",
        answer_source="final",
        tool_calls=list(calls),
    )


def _attributes(span: Span) -> dict[str, object]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def test_ids_are_derived_from_job_attempt_and_message() -> None:
    assert trace_id("job-1", 1) == trace_id("job-1", 1) != trace_id("job-1", 2)
    assert span_id("job-1", 1, None) != span_id("job-1", 1, "t1") != span_id("job-1", 1, "t2")
    assert len(trace_id("job-1", 1)) == 16 and len(span_id("job-1", 1, "t1")) == 8
    assert any(trace_id("job-1", 1)) and any(span_id("job-1", 1, "t1"))


def test_turn_spans_parent_tool_calls_under_the_turn() -> None:
    root, tool = turn_spans(_turn(_call("t1")))
    assert tool.parent_span_id == root.span_id and not root.parent_span_id
    assert tool.trace_id == root.trace_id == trace_id("job-1", 1)
    root_attributes, tool_attributes = _attributes(root), _attributes(tool)
    assert root_attributes[sc.GEN_AI_TIME_TO_FIRST_CHUNK] == 0.25
    assert root_attributes[sc.ATTEMPT] == 1
    assert root.start_time_unix_nano == int(T0.timestamp()) * 10**9
    assert root.end_time_unix_nano == root.start_time_unix_nano + 3 * 10**9
    assert tool_attributes[sc.GEN_AI_TOOL_NAME] == "cubeSqlApi"
    assert tool_attributes[sc.DB_QUERY_TEXT] == "SELECT 1"
    assert tool_attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"sqlQuery": "SELECT 1"}'
    assert root.status.code == Status.STATUS_CODE_OK
    assert (root.kind, tool.kind) == (Span.SPAN_KIND_CLIENT, Span.SPAN_KIND_INTERNAL)


def test_a_long_text_attribute_is_cut_and_marked() -> None:
    (root,) = turn_spans(dataclasses.replace(_turn(), answer="x" * (MAX_ATTRIBUTE_CHARS + 5)))
    answer = _attributes(root)[sc.OUTPUT_VALUE]
    assert isinstance(answer, str) and len(answer) == MAX_ATTRIBUTE_CHARS
    assert answer.endswith("…")


@pytest.mark.parametrize(
    ("changes", "error_type"),
    [
        ({"error": '{"message": "bad"}'}, "tool_error"),
        ({"sql_error": "bad"}, "tool_error"),
        ({"payload_error": "invalid JSON"}, "payload_error"),
        ({"complete": False, "result": None}, "incomplete"),
    ],
)
def test_a_failed_tool_call_is_an_error_span(changes: dict[str, object], error_type: str) -> None:
    _, tool = turn_spans(_turn(_call("t1", **changes)))
    assert _attributes(tool)[sc.ERROR_TYPE] == error_type
    assert tool.status.code == Status.STATUS_CODE_ERROR


def test_a_failed_turn_is_an_error_span() -> None:
    (root,) = turn_spans(_turn(status="failed"))
    assert root.status.code == Status.STATUS_CODE_ERROR and root.status.message == "boom"


def test_traces_url_appends_the_otlp_path_and_refuses_non_http() -> None:
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:6006/v1/traces") == "http://h:6006/v1/traces"
    with pytest.raises(ValueError, match="not an http"):
        traces_url("h:4318")


def test_live_export_endpoint_setting_must_be_an_http_url() -> None:
    assert Settings().otel_endpoint is None
    assert Settings(otel_endpoint="http://127.0.0.1:4318").otel_endpoint == "http://127.0.0.1:4318"
    with pytest.raises(ValidationError, match="otel_endpoint"):
        Settings(otel_endpoint="127.0.0.1:4318")
