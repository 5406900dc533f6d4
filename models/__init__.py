"""Shapes shared by every part, with no I/O.

The Chat API wire format (:mod:`models.chat`, :mod:`models.wire`), Kafka records
(:mod:`models.records`), tool payloads (:mod:`models.tools`) and the archive's value rules
(:mod:`models.archive`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models import tools, wire
    from models.archive import (
        ANSWER_SOURCES,
        EVENT_KINDS,
        INT32_MAX,
        INT32_MIN,
        JOB_STATUSES,
        NAMING_CONVENTION,
        REDACTIONS,
        TOOL_KINDS,
        storable,
        storable_row,
        storable_text,
    )
    from models.chat import (
        AbortRequest,
        ChatRequest,
        GenerateSessionRequest,
        GenerateSessionResponse,
        SessionSettings,
        StreamMessage,
        ToolCall,
        UserIdentity,
        WireModel,
    )
    from models.errors import LineRecordError, ToolPayloadError
    from models.records import (
        TERMINAL_EVENTS,
        AnswerRecord,
        ChatJob,
        DeadLetter,
        EventKind,
        JobEvent,
        LineEnvelope,
        LineHeaders,
        parse_line,
        utc_now,
    )
    from models.wire import TOPIC_JOB_EVENTS, TOPIC_LINES

__all__ = [
    "ANSWER_SOURCES",
    "EVENT_KINDS",
    "INT32_MAX",
    "INT32_MIN",
    "JOB_STATUSES",
    "NAMING_CONVENTION",
    "REDACTIONS",
    "TERMINAL_EVENTS",
    "TOOL_KINDS",
    "TOPIC_JOB_EVENTS",
    "TOPIC_LINES",
    "AbortRequest",
    "AnswerRecord",
    "ChatJob",
    "ChatRequest",
    "DeadLetter",
    "EventKind",
    "GenerateSessionRequest",
    "GenerateSessionResponse",
    "JobEvent",
    "LineEnvelope",
    "LineHeaders",
    "LineRecordError",
    "SessionSettings",
    "StreamMessage",
    "ToolCall",
    "ToolPayloadError",
    "UserIdentity",
    "WireModel",
    "parse_line",
    "storable",
    "storable_row",
    "storable_text",
    "tools",
    "utc_now",
    "wire",
]

_EXPORTS: dict[str, str] = {
    "ANSWER_SOURCES": "models.archive",
    "AbortRequest": "models.chat",
    "AnswerRecord": "models.records",
    "ChatJob": "models.records",
    "ChatRequest": "models.chat",
    "DeadLetter": "models.records",
    "EVENT_KINDS": "models.archive",
    "EventKind": "models.records",
    "GenerateSessionRequest": "models.chat",
    "GenerateSessionResponse": "models.chat",
    "INT32_MAX": "models.archive",
    "INT32_MIN": "models.archive",
    "JOB_STATUSES": "models.archive",
    "JobEvent": "models.records",
    "LineEnvelope": "models.records",
    "LineHeaders": "models.records",
    "LineRecordError": "models.errors",
    "NAMING_CONVENTION": "models.archive",
    "REDACTIONS": "models.archive",
    "SessionSettings": "models.chat",
    "StreamMessage": "models.chat",
    "TERMINAL_EVENTS": "models.records",
    "TOOL_KINDS": "models.archive",
    "TOPIC_JOB_EVENTS": "models.wire",
    "TOPIC_LINES": "models.wire",
    "ToolCall": "models.chat",
    "ToolPayloadError": "models.errors",
    "UserIdentity": "models.chat",
    "WireModel": "models.chat",
    "parse_line": "models.records",
    "storable": "models.archive",
    "storable_row": "models.archive",
    "storable_text": "models.archive",
    "tools": "models.tools",
    "utc_now": "models.records",
    "wire": "models.wire",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
