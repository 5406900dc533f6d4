"""Archived turns as spans: deterministic ids, GenAI attribute names, tool errors (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.trace import StatusCode
from pydantic import ValidationError

from pipeline.archive.traces import ToolCallRow, TurnRow
from pipeline.otel import semconv as sc
from pipeline.otel.export import traces_url
from pipeline.otel.spans import span_id, trace_id, turn_spans
from pipeline.settings import Settings

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _call(message_id: str, **changes: object) -> ToolCallRow:
    fields: dict[str, object] = {
        "message_id": message_id,
        "name": "cubeSqlApi",
        "kind": "sql",
        "input": {"sqlQuery": "SELECT 1"},
        "input_raw": None,
        "result": {"data": [[1]]},
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


def test_ids_are_derived_from_job_attempt_and_message() -> None:
    assert trace_id("job-1", 1) == trace_id("job-1", 1) != trace_id("job-1", 2)
    assert span_id("job-1", 1, None) != span_id("job-1", 1, "t1") != span_id("job-1", 1, "t2")
    assert 0 < trace_id("job-1", 1) < 2**128 and 0 < span_id("job-1", 1, "t1") < 2**64


def test_turn_spans_parent_tool_calls_under_the_turn() -> None:
    root, tool = turn_spans(_turn(_call("t1")))
    assert root.context is not None and tool.context is not None and tool.parent is not None
    assert tool.parent.span_id == root.context.span_id
    assert tool.context.trace_id == root.context.trace_id == trace_id("job-1", 1)
    assert root.attributes is not None and tool.attributes is not None
    assert root.attributes[sc.GEN_AI_TIME_TO_FIRST_CHUNK] == 0.25
    assert root.start_time == int(T0.timestamp()) * 10**9
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "cubeSqlApi"
    assert tool.attributes[sc.DB_QUERY_TEXT] == "SELECT 1"
    assert root.status.status_code is StatusCode.OK


@pytest.mark.parametrize(
    ("changes", "error_type"),
    [
        ({"error": {"message": "bad"}}, "tool_error"),
        ({"sql_error": "bad"}, "tool_error"),
        ({"payload_error": "invalid JSON"}, "payload_error"),
        ({"complete": False, "result": None}, "incomplete"),
    ],
)
def test_a_failed_tool_call_is_an_error_span(changes: dict[str, object], error_type: str) -> None:
    _, tool = turn_spans(_turn(_call("t1", **changes)))
    assert tool.attributes is not None and tool.attributes[sc.ERROR_TYPE] == error_type
    assert tool.status.status_code is StatusCode.ERROR


def test_a_failed_turn_is_an_error_span() -> None:
    (root,) = turn_spans(_turn(status="failed"))
    assert root.status.status_code is StatusCode.ERROR and root.status.description == "boom"


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
