"""Running a turn and serving its NDJSON lines to one or more subscribers.

A :class:`TurnRun` drives the agent's blocking generator in worker threads, so the event loop
stays free for other requests (including the abort of this very turn), and appends each
encoded line to a buffer. Subscribers (the request that started the turn, and any request that
resends the same ``messageId`` while it runs) read that buffer from the first line, then live
(field notes, "Threads and idempotency"). The turn belongs to the server, not to a connection:
a client that disconnects does not stop it; abort does.

Order at the end of a turn, the rule that makes "the thread is free once its stream ended"
hold for every client: the run's ``on_end`` callback (which stores the outcome and frees the
thread) completes *before* the last line (``__usage__``, or an ``{"error": ...}`` line) is
published. A client that has read the last line can immediately send the next input.

Between two lines the run checks its abort event; once set, the stream ends with
``__aborted__`` then ``__usage__`` (field notes, "Lines that the interface does not list") and
no final answer. An abort that arrives while a query runs takes effect when that step returns.
A failure after the first line can only be reported in the stream: a bare ``{"error": ...}``
line ends it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

import anyio.to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from chat_api.agent import Line, Turn
from chat_api.errors import ChatApiError
from chat_api.http import sent_log
from chat_api.state.threads import StoredMessage
from models import wire

logger = logging.getLogger(__name__)

MEDIA_TYPE = "application/json"
"""NDJSON is served as ``application/json`` (field notes, "Addresses and authentication")."""
Outcome = Literal["completed", "aborted", "failed"]
ZERO_USAGE = {"llmCalls": 0, "inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


_LINE_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def encode_line(line: Line) -> str:
    r"""Returns: ``line`` as one compact JSON text plus ``"\n"``.

    U+2028 and U+2029 are written as ``\u2028``/``\u2029`` escapes: raw, they are line
    boundaries for clients that split on Unicode line breaks (``str.splitlines``, JavaScript
    before ES2019), which would cut one NDJSON line in two. Raw, they can only occur inside JSON
    strings, where the escape means the same character.
    """
    text = json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.translate(_LINE_SEPARATORS) + "\n"


async def encoded(lines: Iterable[Line]) -> AsyncGenerator[str, None]:
    """Yields: each of ``lines`` encoded (for streams computed up front, like a snapshot)."""
    for line in lines:
        yield encode_line(line)


def state_lines(chat_id: str, messages: Sequence[dict[str, Any]], *, streaming: bool) -> list[Line]:
    """The stream for a chat request without ``input``.

    The thread's current state, no question asked (interface, "1. Chat": "When omitted, the
    response returns the current state").

    Returns:
        ``__cutoff__``, ``__state__`` with ``messages`` and ``isStreaming`` (true while a turn
        runs), ``__usage__`` with zero calls.
    """
    state = {"chatId": chat_id, "isStreaming": streaming}
    return [
        {"id": wire.ID_CUTOFF, "role": "assistant", "sort": 0, "state": state},
        {"id": wire.ID_STATE, "sort": 1, "state": {**state, "messages": list(messages)}},
        {"id": wire.ID_USAGE, "sort": 2, "usage": {**ZERO_USAGE, "sqlQueries": 0}},
    ]


def stored_message(line: Line) -> StoredMessage | None:
    """Returns: the line as a message to store when it is complete, else None.

    Complete: a tool call with its result, or the final answer; not deltas, thinking or
    sentinels.
    """
    if line.get("isInProcess") is not False:
        return None
    call = line.get("toolCall")
    if isinstance(call, dict) and "result" in call:
        return StoredMessage(str(line["id"]), "assistant", "tool", tool_call=dict(call))
    path = line.get("graphPath") or []
    if path and path[0] == wire.GRAPH_FINAL and line.get("role") == "assistant":
        return StoredMessage(str(line["id"]), "assistant", "answer", content=line.get("content"))
    return None


class TurnRun:
    """A turn being streamed: its lines so far, shared by every subscriber.

    Args:
        turn: The agent's turn.
        question: The turn's input (a resend must carry the same).
        message_id: The client's ``messageId``, or None.
        line_delay_ms: Pause after each line (0: none); an abort cuts it short.
        on_end: Awaited with the outcome once the turn is over and before its last line is
            published; it stores the outcome and frees the thread.

    Attributes:
        abort_event: Set by the abort endpoint.
        messages: Complete messages seen so far (tool calls with results, the final answer).
        outcome: ``completed``, ``aborted`` or ``failed`` once over; None while running.
    """

    def __init__(
        self,
        turn: Turn,
        *,
        question: str,
        message_id: str | None,
        line_delay_ms: int = 0,
        on_end: Callable[[TurnRun], Awaitable[None]],
    ) -> None:
        self.turn = turn
        self.question = question
        self.message_id = message_id
        self.abort_event = asyncio.Event()
        self.messages: list[StoredMessage] = []
        self.outcome: Outcome | None = None
        self._line_delay_s = line_delay_ms / 1000
        self._on_end = on_end
        self._lines: list[str] = []
        self._over = False
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        chat_id = self.turn.request.chat_id
        return f"TurnRun(chat_id={chat_id} lines={len(self._lines)} outcome={self.outcome})"

    @property
    def published(self) -> int:
        """Lines published so far."""
        return len(self._lines)

    def start(self) -> None:
        """Starts the turn as a task of the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    def abort(self) -> bool:
        """Signals the turn to stop. Returns: False when it was already signalled or over."""
        if self._over or self.abort_event.is_set():
            return False
        self.abort_event.set()
        return True

    async def subscribe(self) -> AsyncGenerator[str, None]:
        """Yields: every line of the turn from the first, then live, until the last one."""
        sent = 0
        while True:
            async with self._changed:
                await self._changed.wait_for(functools.partial(self._has_news, sent))
                batch, over = self._lines[sent:], self._over
            for line in batch:
                yield line
            sent += len(batch)
            if over and sent == len(self._lines):
                return

    def _has_news(self, sent: int) -> bool:
        return sent < len(self._lines) or self._over

    async def wait(self) -> None:
        """Returns once the turn is over (tests and shutdown)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _publish(self, line: Line) -> None:
        message = stored_message(line)
        if message is not None:
            self.messages.append(message)
        async with self._changed:
            self._lines.append(encode_line(line))
            self._changed.notify_all()

    async def _run(self) -> None:
        started = time.perf_counter()
        lines = self.turn.lines()
        last: Line | None = None
        try:
            self.outcome, last = await self._relay(lines)
        except ChatApiError as exc:
            self.outcome, last = "failed", {"error": str(exc)}
            logger.warning("turn failed chat_id=%s error=%r", self.turn.request.chat_id, str(exc))
        except Exception:
            self.outcome, last = "failed", {"error": "internal error"}
            logger.exception("turn crashed chat_id=%s", self.turn.request.chat_id)
        finally:
            _close(lines)
        try:
            await self._on_end(self)
        except Exception as exc:
            logger.exception("turn not stored chat_id=%s", self.turn.request.chat_id)
            last = {"error": f"the turn could not be stored: {type(exc).__name__}"}
        if last is not None:
            await self._publish(last)
        async with self._changed:
            self._over = True
            self._changed.notify_all()
        self._log_end(elapsed_ms=(time.perf_counter() - started) * 1000)

    async def _relay(self, lines: Iterator[Line]) -> tuple[Outcome, Line | None]:
        """Publishes the turn's lines but the last; returns the outcome and that last line."""
        while (line := await anyio.to_thread.run_sync(_next_line, lines)) is not None:
            if self.abort_event.is_set():
                break
            if line.get("id") == wire.ID_USAGE:
                return "completed", line
            await self._publish(line)
            if self._line_delay_s and await aborted_within(self.abort_event, self._line_delay_s):
                break
        else:
            return "completed", None
        aborted, usage = self.turn.aborted_lines()
        await self._publish(aborted)
        return "aborted", usage

    def _log_end(self, *, elapsed_ms: float) -> None:
        logger.info(
            "turn ended chat_id=%s outcome=%s lines=%d sql_queries=%d elapsed_ms=%.0f",
            self.turn.request.chat_id,
            self.outcome,
            len(self._lines),
            self.turn.sql_queries,
            elapsed_ms,
        )


def _next_line(lines: Iterator[Line]) -> Line | None:
    return next(lines, None)


def _close(lines: Iterator[Line]) -> None:
    close = getattr(lines, "close", None)
    try:
        if close is not None:
            close()
    except ValueError:  # still running in a worker thread (the task was cancelled)
        logger.warning("turn generator still running at close")


async def aborted_within(event: asyncio.Event, seconds: float) -> bool:
    """Returns: True when ``event`` is set within ``seconds``, False after waiting them out."""
    try:
        await asyncio.wait_for(event.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


class NdjsonResponse(StreamingResponse):
    """A streaming NDJSON response whose line source is closed however the response ends.

    Args:
        content: Encoded lines; closed when the response ends, even if never iterated (client
            gone before the first line).
    """

    def __init__(self, content: AsyncGenerator[str, None]) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        # CHATSCRIBE_SENT_LOG (opt-in): every line sent is logged for fault-injection tests.
        super().__init__(sent_log.tap(content), media_type=MEDIA_TYPE, headers=headers)
        self._content = content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Sends the response (ASGI); see the class docstring for what it adds."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._content.aclose()
