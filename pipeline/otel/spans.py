"""Archived turns as OTLP spans, with ids derived from what they record.

Pure: :func:`add_turn` appends a :class:`pipeline.archive.traces.TurnRow`'s spans to an OTLP
``ScopeSpans`` message (the ``opentelemetry-proto`` bindings of the OTLP protocol, the messages
the SDK's exporter sends). One trace per job attempt: a root span for the turn (``invoke_agent``:
the question, the final answer, the identity, run and job ids) and one child span per tool call
(``execute_tool``: the tool's arguments and result, the SQL, the row counts, the error).
Attribute names come from :mod:`pipeline.otel.semconv`.

The messages are built directly rather than through the SDK's ``ReadableSpan`` and its encoder:
the spans describe conversations that already happened (no live context, sampler or processor
applies), and the SDK's generic per-attribute encoding costs about four times the CPU per span
(``make bench``, line ``otel-export-10k``).

Ids are deterministic (so a re-export sends the same spans and a backend keeps one copy): the
trace id is the first 16 bytes of SHA-256 of ``chatscribe/<job_id>/<attempt>``, the root span id
the first 8 bytes of SHA-256 of ``chatscribe/<job_id>/<attempt>/turn``, a tool span id the same
of ``chatscribe/<job_id>/<attempt>/<message_id>`` (W3C Trace Context: ids are random-looking and
never all zero).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, SpanFlags, Status

from pipeline.archive.traces import ToolCallRow, TurnRow
from pipeline.otel import semconv as sc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RESOURCE_ATTRIBUTES: Final = {sc.SERVICE_NAME: sc.SERVICE, sc.PROJECT_NAME: sc.SERVICE}
SCOPE: Final = InstrumentationScope(name="chatscribe.export")
MAX_ATTRIBUTE_CHARS: Final = 32_000
"""Longest text attribute (a tool result, an answer): longer texts are cut, marked with ``…``."""
_FLAGS: Final = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
"""Every span's context is local (OTLP ``SpanFlags``: the is-remote bit is known, and clear)."""
AGENT_SPAN_ATTRIBUTES: Final = {
    sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_AGENT,
    sc.GEN_AI_AGENT_NAME: sc.AGENT_NAME,
    sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_AGENT,
}
"""Attributes of every turn's root span."""
TOOL_SPAN_ATTRIBUTES: Final = {
    sc.GEN_AI_OPERATION_NAME: sc.OPERATION_EXECUTE_TOOL,
    sc.GEN_AI_TOOL_TYPE: sc.TOOL_TYPE_FUNCTION,
    sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_TOOL,
}
"""Attributes of every tool-call span."""


def trace_id(job_id: str, attempt: int) -> bytes:
    """Returns: the 16-byte trace id of a job attempt (module docstring)."""
    return _id(f"chatscribe/{job_id}/{attempt}", 16)


def span_id(job_id: str, attempt: int, message_id: str | None) -> bytes:
    """Returns: the 8-byte span id of a turn (``message_id`` None) or of one tool call."""
    return _id(f"chatscribe/{job_id}/{attempt}/{message_id or 'turn'}", 8)


def _id(text: str, size: int) -> bytes:
    digest = hashlib.sha256(text.encode()).digest()[:size]
    return digest if any(digest) else bytes(size - 1) + b"\x01"


def add_turn(scope: ScopeSpans, turn: TurnRow) -> int:
    """Appends the turn's root span, then one child span per tool call, to ``scope.spans``.

    Returns:
        The number of spans appended (1 + the turn's tool calls).
    """
    tid = trace_id(turn.job_id, turn.attempt)
    root_id = span_id(turn.job_id, turn.attempt, None)
    shared = _key_values(shared_attributes(turn))
    start = _ns(turn.started_at or turn.submitted_at or turn.finished_at)
    root = scope.spans.add(
        trace_id=tid,
        span_id=root_id,
        flags=_FLAGS,
        name=f"{sc.OPERATION_INVOKE_AGENT} {sc.AGENT_NAME}",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=max(_ns(turn.finished_at), start),
    )
    root.attributes.extend(_AGENT_SPAN)
    root.attributes.extend(shared)
    _set_attributes(root, turn_attributes(turn))
    if turn.status == "completed":
        root.status.code = Status.STATUS_CODE_OK
    else:
        root.status.code = Status.STATUS_CODE_ERROR
        root.status.message = turn.error or turn.status
    for call in turn.tool_calls:
        call_start = _ns(call.started_at) or start
        span = scope.spans.add(
            trace_id=tid,
            span_id=span_id(turn.job_id, turn.attempt, call.message_id),
            parent_span_id=root_id,
            flags=_FLAGS,
            name=f"{sc.OPERATION_EXECUTE_TOOL} {call.name or 'unknown'}",
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=call_start,
            end_time_unix_nano=max(_ns(call.ended_at), call_start),
        )
        span.attributes.extend(_TOOL_SPAN)
        span.attributes.extend(shared)
        _set_attributes(span, tool_attributes(call))
        error = _tool_error_text(call)
        if error is not None:
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = _cut(error)
    return 1 + len(turn.tool_calls)


def turn_spans(turn: TurnRow) -> list[Span]:
    """Returns: the turn's spans as :func:`add_turn` appends them (root first)."""
    scope = ScopeSpans()
    add_turn(scope, turn)
    return list(scope.spans)


def shared_attributes(turn: TurnRow) -> dict[str, Any]:
    """Returns: the attributes on every span of the turn: run, job, attempt, thread, identity."""
    attributes: dict[str, Any] = {
        sc.RUN_ID: turn.run_id,
        sc.JOB_ID: turn.job_id,
        sc.ATTEMPT: turn.attempt,
    }
    optional = {
        sc.GEN_AI_CONVERSATION_ID: turn.chat_id,
        sc.SESSION_ID: turn.chat_id,
        sc.USER_ID: turn.identity,
        sc.IDENTITY: turn.identity,
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    return attributes


def turn_attributes(turn: TurnRow) -> dict[str, Any]:
    """Returns: the root span's own attributes: question, answer, outcome, time to first chunk.

    With :data:`AGENT_SPAN_ATTRIBUTES` and :func:`shared_attributes` they make the span's set.
    """
    question = turn.question or ""
    messages = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    attributes: dict[str, Any] = {
        sc.JOB_STATUS: turn.status,
        sc.GEN_AI_INPUT_MESSAGES: _cut(json.dumps(messages, ensure_ascii=False)),
        sc.INPUT_VALUE: _cut(question),
    }
    if turn.answer is not None:
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": turn.answer}]}]
        attributes[sc.GEN_AI_OUTPUT_MESSAGES] = _cut(json.dumps(answer, ensure_ascii=False))
        attributes[sc.OUTPUT_VALUE] = _cut(turn.answer)
    optional = {
        sc.PERSONA: turn.persona,
        sc.ANSWER_SOURCE: turn.answer_source,
        sc.ERROR_TYPE: turn.error_type or (turn.status if turn.error else None),
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    if turn.started_at is not None and turn.first_line_at is not None:
        seconds = (turn.first_line_at - turn.started_at).total_seconds()
        attributes[sc.GEN_AI_TIME_TO_FIRST_CHUNK] = max(seconds, 0.0)
    return attributes


def tool_attributes(call: ToolCallRow) -> dict[str, Any]:
    """Returns: a tool span's own attributes: the tool, its arguments, result, SQL, rows, error.

    With :data:`TOOL_SPAN_ATTRIBUTES` and :func:`shared_attributes` they make the span's set.
    """
    name = call.name or "unknown"
    arguments = call.input if call.input is not None else call.input_raw
    attributes = {
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ID: call.message_id,
        sc.TOOL_NAME: name,
        sc.TOOL_KIND: call.kind,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: arguments,
        sc.INPUT_VALUE: arguments,
        sc.GEN_AI_TOOL_CALL_RESULT: call.result,
        sc.OUTPUT_VALUE: call.result,
        sc.DB_QUERY_TEXT: call.sql,
        sc.DB_RESPONSE_RETURNED_ROWS: call.returned_rows,
        sc.SQL_TOTAL_ROWS: call.total_rows,
        sc.ERROR_TYPE: _tool_error_type(call),
    }
    return {k: _cut(v) for k, v in attributes.items() if v is not None}


def _key_values(attributes: Mapping[str, Any]) -> list[KeyValue]:
    span = Span()
    _set_attributes(span, attributes)
    return list(span.attributes)


def _set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Appends ``attributes`` as OTLP key-values (text, bool, int or float values)."""
    for key, value in attributes.items():
        slot = span.attributes.add(key=key).value
        if isinstance(value, str):
            slot.string_value = value
        elif isinstance(value, bool):
            slot.bool_value = value
        elif isinstance(value, int):
            slot.int_value = value
        elif isinstance(value, float):
            slot.double_value = value
        else:
            raise TypeError(f"span attribute {key!r} is a {type(value).__name__}")


def _tool_error_type(call: ToolCallRow) -> str | None:
    if call.error is not None or call.sql_error is not None:
        return "tool_error"
    if call.payload_error is not None:
        return "payload_error"
    return None if call.complete else "incomplete"


def _tool_error_text(call: ToolCallRow) -> str | None:
    return (
        call.error
        or call.sql_error
        or call.payload_error
        or (None if call.complete else "no result")
    )


def _ns(at: datetime | None) -> int:
    return 0 if at is None else (at - EPOCH) // timedelta(microseconds=1) * 1000


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_CHARS:
        return value[: MAX_ATTRIBUTE_CHARS - 1] + "…"
    return value


_AGENT_SPAN: Final = _key_values(AGENT_SPAN_ATTRIBUTES)
_TOOL_SPAN: Final = _key_values(TOOL_SPAN_ATTRIBUTES)
