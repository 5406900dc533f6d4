"""Errors raised by ``models``.

Tree::

    ModelsError
    ├── LineRecordError      a Kafka record on ``chat.lines`` lacks a header or has a bad one
    └── ToolPayloadError     a toolCall ``input``/``result`` string is not the JSON we expect

Validation of whole resources raises :class:`pydantic.ValidationError`; callers at the edges
(the HTTP app, the worker) translate it into their own status codes or dead-letter reasons.
"""

from __future__ import annotations


class ModelsError(Exception):
    """Root of the errors raised by ``models``."""


class LineRecordError(ModelsError):
    """A ``chat.lines`` record cannot be turned back into a line envelope.

    Attributes:
        header: The header that is missing or malformed.
    """

    def __init__(self, message: str, *, header: str) -> None:
        super().__init__(message)
        self.header = header


class ToolPayloadError(ModelsError):
    """A toolCall payload is not JSON of the expected shape.

    Attributes:
        tool_name: The tool's name as received.
        part: ``"input"`` or ``"result"``.
    """

    def __init__(self, message: str, *, tool_name: str, part: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.part = part
