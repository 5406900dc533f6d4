"""``chatscribe replay serve``: archived conversations served through the Chat API protocol.

A Starlette app on the Chat API's paths (:mod:`models.wire`) with its authentication
(``Authorization: Api-Key <key>``, the keys of ``CHATSCRIBE_API_KEYS``) and error shape
(``{"error", "status"}``), reusing :func:`chat_api.http.app.read_body` and
:func:`chat_api.http.app.error_response`. Asking a question that the archive holds, as the identity
it was asked as (``sessionSettings`` owner key: ``externalId`` or ``internalId``) with the same
row-level attributes (``userAttributes``, ``groups``, ``securityContext``: a conversation
archived for other attributes showed other rows, so it is a 404), streams the recorded lines
of that job's last attempt, byte for byte, with the recorded gaps between them
(``received_at`` deltas) divided by ``speed`` (0: no delay). The newest completed job wins;
``run_id`` limits the lookup to one run. Front ends, tests and benchmarks can so run against
real recorded conversations; ``pipeline.replay.server.create_app(settings, speed=0)`` is the
Python entry point (the benchmarks' synthetic endpoint).

Routes::

    POST <chat path>            200 NDJSON (application/json) | 400 | 401 | 404 no archived answer
    POST <chat path>/abort      204 (the replay stops after an ``__aborted__`` line) | 403 | 404
    GET  /healthz               {"status": "ok"}

An abort reaches only the replays in progress of its ``chatId`` that the identity of its
``sessionSettings`` started (interface, "Authentication": abort only for the user who owns the
thread, otherwise 403); 404 when none of that ``chatId`` is in progress. Each replay has its own
abort state, dropped when it ends, so an abort after a replay finished changes nothing later.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from chat_api import (
    ChatApiSettings,
    NotFoundError,
    RequestError,
    ThreadOwnerError,
    UnauthorizedError,
)
from chat_api.http import aborted_within, error_response, read_body
from models import json_values, wire
from models.chat import AbortRequest, ChatRequest, SessionSettings
from pipeline.archive.engine import ArchiveEngine, create_engine
from pipeline.archive.replay import StoredLine, find_conversation
from pipeline.errors import ReplayError
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

AUTH_SCHEME: Final = "api-key"
MAX_GAP_S: Final = 30.0
"""Longest pause replayed between two lines, whatever was recorded."""
ABORTED_LINE: Final = (
    json.dumps({"id": wire.ID_ABORTED, "type": "abort", "code": "chat_aborted"}).encode() + b"\n"
)


@dataclass(frozen=True, eq=False)
class Replay:
    """One replay in progress: its thread, the identity that started it, its abort signal."""

    chat_id: str
    owner: str
    abort: asyncio.Event = field(default_factory=asyncio.Event)


class ReplayService:
    """The endpoints and the archive connection they share."""

    def __init__(
        self,
        engine: ArchiveEngine,
        *,
        speed: float,
        api_keys: Sequence[str],
        run_id: str | None = None,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0 (0: no delay)")
        self._engine = engine
        self._speed = speed
        self._keys = [key.encode() for key in api_keys]
        self._run_id = run_id
        self._active: dict[str, list[Replay]] = {}
        """Replays in progress by chatId (several may replay one archived thread)."""
        self.replays = 0

    def __repr__(self) -> str:
        return f"<ReplayService speed={self._speed} replays={self.replays}>"

    async def chat(self, request: Request) -> Response:
        """Streams the archived answer to ``input`` asked as ``sessionSettings``' identity."""
        self._authenticate(request)
        body = await read_body(request, ChatRequest)
        if body.input is None:
            raise NotFoundError("replay serves questions only; input is required")
        settings = body.session_settings
        lines = await asyncio.to_thread(self._lines, body.input, settings)
        chat_id = _chat_id(lines) or f"replay-{id(lines):x}"
        replay = Replay(chat_id=chat_id, owner=settings.user_key)
        self._active.setdefault(chat_id, []).append(replay)
        self.replays += 1
        return StreamingResponse(self._stream(lines, replay), media_type="application/json")

    async def abort(self, request: Request) -> Response:
        """Stops the caller's replays of a chatId: 204, 403 (another identity's), 404 (none)."""
        self._authenticate(request)
        body = await read_body(request, AbortRequest)
        active = self._active.get(body.chat_id)
        if not active:
            raise NotFoundError(f"chat thread not found: {body.chat_id}")
        caller = body.session_settings.user_key if body.session_settings is not None else None
        owned = [replay for replay in active if replay.owner == caller]
        if not owned:
            raise ThreadOwnerError(body.chat_id)
        for replay in owned:
            replay.abort.set()
        return Response(status_code=204)

    def _lines(self, question: str, settings: SessionSettings) -> list[StoredLine]:
        try:
            job_id, lines = find_conversation(
                self._engine, question=question, settings=settings, run_id=self._run_id
            )
        except ReplayError as exc:
            raise NotFoundError(str(exc)) from exc
        logger.info("replaying job_id=%s lines=%d", job_id, len(lines))
        return lines

    async def _stream(self, lines: list[StoredLine], replay: Replay) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._paced(lines, replay.abort):
                yield chunk
        finally:
            self._end(replay)

    def _end(self, replay: Replay) -> None:
        active = self._active.get(replay.chat_id, [])
        if replay in active:
            active.remove(replay)
        if not active:
            self._active.pop(replay.chat_id, None)

    async def _paced(self, lines: list[StoredLine], abort: asyncio.Event) -> AsyncIterator[bytes]:
        previous = None
        for line in lines:
            if previous is not None and self._speed > 0:
                gap = (line.received_at - previous).total_seconds() / self._speed
                if await aborted_within(abort, min(max(gap, 0.0), MAX_GAP_S)):
                    yield ABORTED_LINE
                    return
            if abort.is_set():
                yield ABORTED_LINE
                return
            previous = line.received_at
            yield line.wire_bytes()

    def _authenticate(self, request: Request) -> None:
        scheme, _, key = (request.headers.get("authorization") or "").strip().partition(" ")
        if scheme.lower() != AUTH_SCHEME or not key.strip():
            raise UnauthorizedError("Authorization header must be 'Api-Key <key>'")
        given = key.strip().encode()
        matched = False
        for known in self._keys:
            matched |= hmac.compare_digest(given, known)
        if not matched:
            raise UnauthorizedError("invalid API key")


def _chat_id(lines: list[StoredLine]) -> str | None:
    for line in lines[:3]:
        try:
            value: Any = json_values.loads(line.raw)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("id") == wire.ID_CUTOFF:
            chat_id = (value.get("state") or {}).get("chatId")
            return chat_id if isinstance(chat_id, str) else None
    return None


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _request_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    return error_response(exc.message, exc.status_code)


def create_app(
    settings: Settings,
    *,
    speed: float = 1.0,
    api_keys: Sequence[str] | None = None,
    run_id: str | None = None,
    engine: ArchiveEngine | None = None,
) -> Starlette:
    """Builds the replay app.

    Args:
        settings: Database URL and schema of the archive.
        speed: Recorded gaps are divided by it; 0 replays without delay.
        api_keys: Accepted keys (default: ``CHATSCRIBE_API_KEYS``, as our Chat API).
        run_id: Serve only this run's conversations.
        engine: An engine to share (default: one from ``settings``, disposed on shutdown).

    Raises:
        ValueError: ``speed`` is negative.
    """
    keys = api_keys or [k.get_secret_value() for k in ChatApiSettings().api_keys]
    own = engine is None
    engine = engine or create_engine(settings)
    service = ReplayService(engine, speed=speed, api_keys=keys, run_id=run_id)
    routes = [
        Route("/healthz", _health, methods=["GET"]),
        Route(wire.CHAT_PATH_TEMPLATE, service.chat, methods=["POST"]),
        Route(wire.CHAT_PATH_TEMPLATE + wire.ABORT_SUFFIX, service.abort, methods=["POST"]),
    ]
    shared = engine

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if own:
            shared.dispose()

    app = Starlette(
        routes=routes, exception_handlers={RequestError: _request_error}, lifespan=lifespan
    )
    app.state.service = service
    return app


def serve(settings: Settings, *, host: str, port: int, speed: float, run_id: str | None) -> None:
    """Runs the replay app under uvicorn until interrupted (blocking)."""
    app = create_app(settings, speed=speed, run_id=run_id)
    uvicorn.run(app, host=host, port=port, log_level="info")
