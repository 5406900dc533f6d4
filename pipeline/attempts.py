"""What one attempt of a chat job saw, and the terminal event it earns (pure, no I/O).

Terminal event kind, first rule that applies:

1. ``aborted`` — an abort was requested (the deadline passed, or a cancellation) and the stream
   then ended, broke, or was closed by the worker;
2. ``failed`` — the call failed: HTTP 4xx, 5xx or no connection after the retries, a broken
   stream, a line Kafka cannot hold, an unexpected error;
3. ``aborted`` — the stream ended with ``__aborted__`` (field notes, "Lines that the interface
   does not list");
4. ``failed`` — the stream carried an ``{"error": ...}`` line inside the HTTP 200 (field notes),
   or was ``__suspended__``;
5. ``completed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, Literal

from models import wire
from models.chat import StreamMessage
from pipeline.errors import ChatHttpError, StreamBrokenError

TerminalKind = Literal["completed", "failed", "aborted"]

ERROR_TYPE_STREAM_ERROR: Final = "StreamErrorLine"
ERROR_TYPE_SUSPENDED: Final = "ChatSuspended"
ERROR_TYPE_CLOSED: Final = "StreamClosedByWorker"
HTTP_OK: Final = 200


@dataclass
class AttemptState:
    """What the lines of one attempt showed so far.

    Attributes:
        chat_id: The thread id (``state.chatId`` of ``__cutoff__``, or the job's own).
        lines: Lines produced to ``chat.lines``.
        http_status: 200 once the stream opened.
        error_line: Message of the first ``{"error": ...}`` line.
        aborted_code: ``code`` of an ``__aborted__`` line.
        suspended: Whether a ``__suspended__`` line came.
    """

    chat_id: str | None = None
    lines: int = 0
    http_status: int | None = None
    error_line: str | None = None
    aborted_code: str | None = None
    suspended: bool = False

    def observe(self, message: StreamMessage | None) -> bool:
        """Takes note of one parsed line (None for a line that did not parse).

        Returns:
            True when this line told the chat id for the first time.
        """
        if message is None:
            return False
        if message.is_error_line and self.error_line is None:
            error = message.error
            self.error_line = error if isinstance(error, str) else json.dumps(error)
        if message.id == wire.ID_ABORTED:
            self.aborted_code = message.code or "chat_aborted"
        self.suspended = self.suspended or message.id == wire.ID_SUSPENDED
        if self.chat_id is None and message.chat_id is not None:
            self.chat_id = message.chat_id
            return True
        return False


@dataclass(frozen=True)
class Outcome:
    """The terminal event's kind and error fields."""

    kind: TerminalKind
    http_status: int | None = None
    error: str | None = None
    error_type: str | None = None


def outcome(
    state: AttemptState, *, abort_reason: str | None, error: BaseException | None
) -> Outcome:
    """Decides the terminal event of an attempt (rules in the module docstring).

    Args:
        state: What the attempt's lines showed.
        abort_reason: Why an abort was requested (``"deadline exceeded"``, ``"cancelled: ..."``),
            or None.
        error: What ended the stream early: an error of ours, ``TimeoutError`` when the worker
            closed the stream, or None when the stream ended by itself.

    Returns:
        The outcome; ``http_status`` is the error's status, else 200 once the stream opened.
    """
    status = error.status_code if isinstance(error, ChatHttpError) else state.http_status
    ended_or_closed = error is None or isinstance(error, TimeoutError | StreamBrokenError)
    if abort_reason is not None and ended_or_closed:
        if isinstance(error, TimeoutError):
            detail = f"{abort_reason}; stream closed by the worker"
            return Outcome("aborted", status, detail, ERROR_TYPE_CLOSED)
        return Outcome("aborted", status, abort_reason)
    if error is not None:
        return Outcome("failed", status, str(error) or repr(error), type(error).__name__)
    if state.aborted_code is not None:
        return Outcome("aborted", status, f"chat aborted by the service ({state.aborted_code})")
    if state.error_line is not None:
        return Outcome("failed", status, state.error_line, ERROR_TYPE_STREAM_ERROR)
    if state.suspended:
        return Outcome("failed", status, "chat suspended (retryable)", ERROR_TYPE_SUSPENDED)
    return Outcome("completed", status)
