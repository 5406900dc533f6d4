"""Archived turns as OpenTelemetry spans, with ids derived from what they record.

Pure: :func:`turn_spans` builds SDK ``ReadableSpan`` objects from a
:class:`pipeline.archive.traces.TurnRow`. One trace per job attempt: a root span for the turn
(``invoke_agent``: the question, the final answer, the identity, run and job ids) and one child
span per tool call (``execute_tool``: the tool's arguments and result, the SQL, the row counts,
the error). Attribute names come from :mod:`pipeline.otel.semconv`.

Ids are deterministic (so a re-export sends the same spans and a backend keeps one copy): the
trace id is the first 16 bytes of SHA-256 of ``chatscribe/<job_id>/<attempt>``, the root span id
the first 8 bytes of SHA-256 of ``chatscribe/<job_id>/<attempt>/turn``, a tool span id the same
of ``chatscribe/<job_id>/<attempt>/<message_id>`` (W3C Trace Context: ids are random-looking and
never all zero).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from pipeline.archive.traces import ToolCallRow, TurnRow
from pipeline.otel import semconv as sc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RESOURCE = Resource({sc.SERVICE_NAME: sc.SERVICE})
SCOPE = InstrumentationScope("chatscribe.export")
MAX_ATTRIBUTE_CHARS = 32_000
"""Longest text attribute (a tool result, an answer): longer texts are cut, marked with ``…``."""


def trace_id(job_id: str, attempt: int) -> int:
    """Returns: the 128-bit trace id of a job attempt (module docstring)."""
    return _id(f"chatscribe/{job_id}/{attempt}", 16)


def span_id(job_id: str, attempt: int, message_id: str | None) -> int:
    """Returns: the 64-bit span id of a turn (``message_id`` None) or of one tool call."""
    return _id(f"chatscribe/{job_id}/{attempt}/{message_id or 'turn'}", 8)


def _id(text: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big") or 1


def turn_spans(turn: TurnRow) -> list[ReadableSpan]:
    """Returns: the turn's root span followed by one child span per tool call."""
    tid = trace_id(turn.job_id, turn.attempt)
    root = _context(tid, span_id(turn.job_id, turn.attempt, None))
    start = _ns(turn.started_at or turn.submitted_at or turn.finished_at)
    end = _ns(turn.finished_at) or start
    spans = [
        ReadableSpan(
            name=f"{sc.OPERATION_INVOKE_AGENT} {sc.AGENT_NAME}",
            context=root,
            resource=RESOURCE,
            attributes=turn_attributes(turn),
            kind=SpanKind.CLIENT,
            status=_turn_status(turn),
            start_time=start,
            end_time=max(end, start),
            instrumentation_scope=SCOPE,
        )
    ]
    for call in turn.tool_calls:
        call_start = _ns(call.started_at) or start
        spans.append(
            ReadableSpan(
                name=f"{sc.OPERATION_EXECUTE_TOOL} {call.name or 'unknown'}",
                context=_context(tid, span_id(turn.job_id, turn.attempt, call.message_id)),
                parent=root,
                resource=RESOURCE,
                attributes=tool_attributes(turn, call),
                kind=SpanKind.INTERNAL,
                status=_tool_status(call),
                start_time=call_start,
                end_time=max(_ns(call.ended_at) or call_start, call_start),
                instrumentation_scope=SCOPE,
            )
        )
    return spans


def turn_attributes(turn: TurnRow) -> dict[str, Any]:
    """Returns: the root span's attributes (GenAI, OpenInference, chatscribe names)."""
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_AGENT,
        sc.GEN_AI_AGENT_NAME: sc.AGENT_NAME,
        sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_AGENT,
        sc.RUN_ID: turn.run_id,
        sc.JOB_ID: turn.job_id,
        sc.ATTEMPT: turn.attempt,
        sc.JOB_STATUS: turn.status,
    }
    question = turn.question or ""
    messages = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    attributes[sc.GEN_AI_INPUT_MESSAGES] = json.dumps(messages, ensure_ascii=False)
    attributes[sc.INPUT_VALUE] = _cut(question)
    if turn.answer is not None:
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": turn.answer}]}]
        attributes[sc.GEN_AI_OUTPUT_MESSAGES] = _cut(json.dumps(answer, ensure_ascii=False))
        attributes[sc.OUTPUT_VALUE] = _cut(turn.answer)
    optional = {
        sc.GEN_AI_CONVERSATION_ID: turn.chat_id,
        sc.SESSION_ID: turn.chat_id,
        sc.USER_ID: turn.identity,
        sc.IDENTITY: turn.identity,
        sc.PERSONA: turn.persona,
        sc.ANSWER_SOURCE: turn.answer_source,
        sc.ERROR_TYPE: turn.error_type or (turn.status if turn.error else None),
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    if turn.started_at is not None and turn.first_line_at is not None:
        seconds = (turn.first_line_at - turn.started_at).total_seconds()
        attributes[sc.GEN_AI_TIME_TO_FIRST_CHUNK] = max(seconds, 0.0)
    return attributes


def tool_attributes(turn: TurnRow, call: ToolCallRow) -> dict[str, Any]:
    """Returns: a tool span's attributes: the tool, its arguments, result, SQL, rows, error."""
    name = call.name or "unknown"
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_TYPE: sc.TOOL_TYPE_FUNCTION,
        sc.GEN_AI_TOOL_CALL_ID: call.message_id,
        sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_TOOL,
        sc.TOOL_NAME: name,
        sc.TOOL_KIND: call.kind,
        sc.RUN_ID: turn.run_id,
        sc.JOB_ID: turn.job_id,
        sc.ATTEMPT: turn.attempt,
    }
    arguments = _json_text(call.input) if call.input is not None else call.input_raw
    result = _json_text(call.result) if call.result is not None else None
    optional = {
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: arguments,
        sc.INPUT_VALUE: arguments,
        sc.GEN_AI_TOOL_CALL_RESULT: result,
        sc.OUTPUT_VALUE: result,
        sc.DB_QUERY_TEXT: call.sql,
        sc.DB_RESPONSE_RETURNED_ROWS: call.returned_rows,
        sc.SQL_TOTAL_ROWS: call.total_rows,
        sc.GEN_AI_CONVERSATION_ID: turn.chat_id,
        sc.SESSION_ID: turn.chat_id,
        sc.USER_ID: turn.identity,
        sc.IDENTITY: turn.identity,
        sc.ERROR_TYPE: _tool_error_type(call),
    }
    attributes.update({k: _cut(v) for k, v in optional.items() if v is not None})
    return attributes


def _tool_error_type(call: ToolCallRow) -> str | None:
    if call.error is not None or call.sql_error is not None:
        return "tool_error"
    if call.payload_error is not None:
        return "payload_error"
    return None if call.complete else "incomplete"


def _tool_error_text(call: ToolCallRow) -> str | None:
    if call.error is not None:
        return _json_text(call.error)
    return call.sql_error or call.payload_error or (None if call.complete else "no result")


def _turn_status(turn: TurnRow) -> Status:
    if turn.status == "completed":
        return Status(StatusCode.OK)
    return Status(StatusCode.ERROR, turn.error or turn.status)


def _tool_status(call: ToolCallRow) -> Status:
    text = _tool_error_text(call)
    return Status(StatusCode.UNSET) if text is None else Status(StatusCode.ERROR, _cut(text))


def _context(tid: int, sid: int) -> SpanContext:
    return SpanContext(tid, sid, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _ns(at: datetime | None) -> int:
    return 0 if at is None else (at - EPOCH) // timedelta(microseconds=1) * 1000


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_CHARS:
        return value[: MAX_ATTRIBUTE_CHARS - 1] + "…"
    return value
