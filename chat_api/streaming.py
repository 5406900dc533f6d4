"""Serving a turn as NDJSON: line encoding, pacing, abort, and the streaming response.

The agent's generator blocks (planning, DuckDB), so each step runs in a worker thread and the
event loop stays free for other requests, including the abort of this very stream. Between two
lines the stream checks the turn's abort event; once set, the stream ends with ``__aborted__``
then ``__usage__`` (field notes, "Lines that the interface does not list") and no final answer.
An abort that arrives while a query runs takes effect when that step returns.

A failure after the first line can only be reported in the stream: a bare ``{"error": ...}``
line, then the stream ends (field notes, "Lines that the interface does not list").
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from typing import Literal

import anyio.to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from chat_api import sent_log
from chat_api.agent import Line, Turn
from chat_api.errors import ChatApiError

logger = logging.getLogger(__name__)

MEDIA_TYPE = "application/json"
"""NDJSON is served as ``application/json`` (field notes, "Addresses and authentication")."""
Outcome = Literal["completed", "aborted", "failed", "disconnected"]


def encode_line(line: Line) -> str:
    """Returns: ``line`` as one compact JSON text plus ``"\\n"``."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"


async def encoded(lines: Iterable[Line]) -> AsyncGenerator[str, None]:
    """Yields: each of ``lines`` encoded (for streams computed up front, like a snapshot)."""
    for line in lines:
        yield encode_line(line)


async def turn_stream(
    turn: Turn, abort_event: asyncio.Event, *, line_delay_ms: int = 0
) -> AsyncGenerator[str, None]:
    """Runs ``turn`` and yields its lines, encoded, one at a time.

    Args:
        turn: The turn to run; its generator runs in worker threads.
        abort_event: Set by the abort endpoint to stop the turn.
        line_delay_ms: Pause after each line (0: none); an abort cuts the pause short.

    Yields:
        NDJSON lines: the turn's lines; after an abort ``__aborted__`` and ``__usage__``; after
        a failure ``{"error": "<message>"}``.
    """
    lines = turn.lines()
    started = time.perf_counter()
    outcome: Outcome = "disconnected"
    count = 0
    try:
        while (line := await anyio.to_thread.run_sync(_next_line, lines)) is not None:
            if abort_event.is_set():
                break
            yield encode_line(line)
            count += 1
            if line_delay_ms and await _aborted_within(abort_event, line_delay_ms / 1000):
                break
        else:
            outcome = "completed"
            return
        outcome = "aborted"
        for line in turn.aborted_lines():
            yield encode_line(line)
    except ChatApiError as exc:
        outcome = "failed"
        logger.warning("turn failed chat_id=%s error=%r", turn.request.chat_id, str(exc))
        yield encode_line({"error": str(exc)})
    except Exception:
        outcome = "failed"
        logger.exception("turn crashed chat_id=%s", turn.request.chat_id)
        yield encode_line({"error": "internal error"})
    finally:
        lines.close()
        _log_end(turn, outcome, count=count, elapsed_ms=(time.perf_counter() - started) * 1000)


def _log_end(turn: Turn, outcome: Outcome, *, count: int, elapsed_ms: float) -> None:
    logger.info(
        "turn ended chat_id=%s outcome=%s lines=%d sql_queries=%d elapsed_ms=%.0f",
        turn.request.chat_id,
        outcome,
        count,
        turn.sql_queries,
        elapsed_ms,
    )


def _next_line(lines: Iterator[Line]) -> Line | None:
    return next(lines, None)


async def _aborted_within(event: asyncio.Event, seconds: float) -> bool:
    """Returns: True when ``event`` is set within ``seconds``, False after waiting them out."""
    try:
        await asyncio.wait_for(event.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


class NdjsonResponse(StreamingResponse):
    """A streaming NDJSON response that cleans up however the stream ends.

    Args:
        content: Encoded lines; closed when the response ends, even if never iterated (client
            gone before the first line).
        on_close: Called once after the response ended (completed, failed or disconnected).
    """

    def __init__(
        self,
        content: AsyncGenerator[str, None],
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        # CHATSCRIBE_SENT_LOG (opt-in): every line sent is logged for fault-injection tests.
        super().__init__(sent_log.tap(content), media_type=MEDIA_TYPE, headers=headers)
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._content.aclose()
            if self._on_close is not None:
                self._on_close()
