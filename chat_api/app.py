"""The Chat API as a Starlette ASGI application: chat, abort, generate-session, health.

Routes (``chat-api-interface.md``, "Endpoints"; paths from :mod:`models.wire`)::

    POST /api/v1/public/{cloudRegion}/{accountName}/agents/{agentId}/chat/stream-chat-state
    POST .../chat/stream-chat-state/abort
    POST /api/v1/embed/generate-session
    GET  /healthz                                   no authentication; {"status": "ok"}

Every refusal is JSON ``{"error": "<message>", "status": <code>}`` (interface, "Errors"); an
unexpected failure is a 500 ``{"error": "internal error"}`` and one log line, never a
traceback page. The chat stream is NDJSON served as ``application/json``, one line per message,
each sent as soon as the agent produces it (field notes, "Addresses and authentication").

Choices where the interface is silent:

- Authentication is ``Authorization: Api-Key <key>`` on every endpoint but ``/healthz``, checked
  before the path, so a caller without a key learns nothing about agents or threads.
- A chatId owned by another user is a 404 for chat (indistinguishable from an unknown chatId);
  the interface lists 403 for abort only, where it is used.
- An abort without ``sessionSettings`` is authorised by the API key alone.
- A chat request without ``input`` and without ``chatId`` is a 400 (there is no state to show).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chat_api.agent import Toolbox, Turn, TurnRequest, snapshot_lines
from chat_api.branches import BranchCatalog
from chat_api.data import ensure_database
from chat_api.errors import (
    BodyTooLargeError,
    InvalidRequestError,
    NotFoundError,
    RequestError,
    UnauthorizedError,
)
from chat_api.policies import UserContext
from chat_api.semantic import load_model
from chat_api.sessions import SessionStore
from chat_api.settings import ChatApiSettings
from chat_api.streaming import NdjsonResponse, encoded, turn_stream
from chat_api.threads import Thread, ThreadStore
from chat_api.vocabulary import load_vocabulary
from chat_api.warehouse import Warehouse
from models import wire
from models.chat import (
    AbortRequest,
    ChatRequest,
    GenerateSessionRequest,
    GenerateSessionResponse,
    SessionSettings,
)

logger = logging.getLogger(__name__)

AUTH_SCHEME = "api-key"
MAX_BODY_BYTES = 1024 * 1024
_M = TypeVar("_M", bound=BaseModel)
_PATH_PARAMS = (
    ("cloud_region", "cloudRegion", "cloud region"),
    ("account_name", "accountName", "account"),
    ("agent_id", "agentId", "agent"),
)


def create_app(settings: ChatApiSettings, *, toolbox: Toolbox | None = None) -> Starlette:
    """Builds the application; loads the warehouse, data model and vocabulary first.

    Args:
        settings: The process settings.
        toolbox: The agent's resources; built from ``settings`` when None (tests share one).

    Returns:
        The Starlette app, with ``app.state.service`` holding its stores.

    Raises:
        ChatApiError: The data model is invalid (``ModelError``) or the warehouse cannot load.
    """
    service = ChatService(settings, toolbox=toolbox or load_toolbox(settings))
    chat_path = wire.CHAT_PATH_TEMPLATE
    routes = [
        Route("/healthz", health, methods=["GET"]),
        Route(chat_path, service.chat, methods=["POST"]),
        Route(chat_path + wire.ABORT_SUFFIX, service.abort, methods=["POST"]),
        Route(wire.GENERATE_SESSION_PATH, service.generate_session, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(InternalErrorMiddleware)],
        exception_handlers={RequestError: _request_error, HTTPException: _http_error},
    )
    app.state.service = service
    return app


def load_toolbox(settings: ChatApiSettings) -> Toolbox:
    """Returns: the model, vocabulary and warehouse, building the DuckDB file when missing."""
    model = load_model(settings.model_dir)
    warehouse = Warehouse(ensure_database(settings.database_path))
    vocabulary = load_vocabulary(warehouse.query_raw)
    logger.info("toolbox loaded views=%d warehouse=%r", len(model.views), warehouse)
    return Toolbox(model=model, vocabulary=vocabulary, warehouse=warehouse)


def user_context(session: SessionSettings) -> UserContext:
    """The identity row-level security filters by (interface, "Session settings", rule 2).

    Returns:
        Groups, attributes (values as text) and security context of ``session``. An internal
        user has none of them here: rule 1 forbids sending them, and no directory of internal
        users exists yet.
    """
    attributes = {name: _text(value) for name, value in session.attributes().items()}
    return UserContext(
        groups=tuple(session.groups or ()),
        attributes=attributes,
        security_context=session.security_context or {},
    )


def _text(value: str | int | float | bool) -> str:
    """Attribute values are compared as text: ``True`` -> ``"true"``, ``3`` -> ``"3"``."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class ChatService:
    """The endpoints and the in-memory state they share.

    Attributes:
        settings: The process settings.
        toolbox: The agent's model, vocabulary and warehouse (main branch).
        branches: The data model's branches (``activeBranchName``), main = ``toolbox``.
        threads: Chat threads by chatId.
        sessions: Embed sessions by sessionId.
    """

    def __init__(self, settings: ChatApiSettings, *, toolbox: Toolbox) -> None:
        self.settings = settings
        self.toolbox = toolbox
        self.branches = BranchCatalog(
            settings.model_dir.parent, main=settings.model_dir.name, base=toolbox
        )
        self.threads = ThreadStore()
        self.sessions = SessionStore()

    def __repr__(self) -> str:
        return f"ChatService({self.threads!r}, {self.sessions!r})"

    async def chat(self, request: Request) -> Response:
        """``POST .../stream-chat-state`` (interface, "1. Chat").

        Raises:
            RequestError: 400, 401, 404 or 409 (answered as JSON by the app).
        """
        self._authenticate(request)
        self._check_agent(request.path_params)
        body = await read_body(request, ChatRequest)
        toolbox = self.branches.toolbox_for(
            body.active_branch_name, is_default_branch=body.effective_is_default_branch
        )
        owner = body.session_settings.user_key
        if body.input is None:
            if body.chat_id is None:
                raise InvalidRequestError("input: required when chatId is omitted")
            thread = self.threads.find(body.chat_id, owner=owner)
            return NdjsonResponse(encoded(snapshot_lines(thread.chat_id, thread.messages)))
        if body.chat_id is None:
            thread = self.threads.create(owner)
        else:
            thread = self.threads.find(body.chat_id, owner=owner)
        abort_event = self.threads.start_turn(thread)
        turn = self._turn(
            thread, question=body.input, session=body.session_settings, toolbox=toolbox
        )
        stream = turn_stream(turn, abort_event, line_delay_ms=self.settings.line_delay_ms)

        def finish() -> None:
            self.threads.finish_turn(thread, messages=turn.summaries(), spec=turn.plan_state)

        return NdjsonResponse(stream, on_close=finish)

    def _turn(
        self, thread: Thread, *, question: str, session: SessionSettings, toolbox: Toolbox
    ) -> Turn:
        request = TurnRequest(
            chat_id=thread.chat_id,
            question=question,
            user=user_context(session),
            memory_id=thread.memory_id,
            previous=thread.last_spec,
            history=tuple(thread.messages),
            development_mode=self.settings.development_mode,
            row_limit=self.settings.row_limit,
        )
        return Turn(request, toolbox=toolbox)

    async def abort(self, request: Request) -> Response:
        """``POST .../stream-chat-state/abort``: 204 (interface, "2. Abort").

        Raises:
            RequestError: 400, 401, 403 (another user's thread) or 404 (unknown chatId).
        """
        self._authenticate(request)
        self._check_agent(request.path_params)
        body = await read_body(request, AbortRequest)
        requester = body.session_settings.user_key if body.session_settings else None
        self.threads.abort(body.chat_id, requester=requester)
        return Response(status_code=204)

    async def generate_session(self, request: Request) -> Response:
        """``POST /api/v1/embed/generate-session`` (interface, "3. Generate session").

        Returns:
            ``{"sessionId": "<token>"}``; the session is valid for 5 minutes.

        Raises:
            RequestError: 400 (invalid identity) or 401.
        """
        self._authenticate(request)
        body = await read_body(request, GenerateSessionRequest)
        session = self.sessions.create(body)
        return JSONResponse(GenerateSessionResponse(session_id=session.session_id).to_wire())

    def _authenticate(self, request: Request) -> None:
        header = request.headers.get("authorization")
        if header is None:
            raise UnauthorizedError("missing Authorization header; expected 'Api-Key <key>'")
        scheme, _, key = header.strip().partition(" ")
        if scheme.lower() != AUTH_SCHEME or not key.strip():
            raise UnauthorizedError("Authorization header must be 'Api-Key <key>'")
        given = key.strip().encode()
        matched = False
        for known in self.settings.api_keys:
            matched |= hmac.compare_digest(given, known.get_secret_value().encode())
        if not matched:
            raise UnauthorizedError("invalid API key")

    def _check_agent(self, params: Mapping[str, Any]) -> None:
        for name, wire_name, what in _PATH_PARAMS:
            if params[name] != getattr(self.settings, name):
                raise NotFoundError(f"{what} not found: {wire_name} {params[name]!r}")


async def health(request: Request) -> Response:
    """``GET /healthz``: ``{"status": "ok"}``, without authentication."""
    return JSONResponse({"status": "ok"})


async def read_body(request: Request, model: type[_M]) -> _M:
    """Parses the JSON body into ``model``.

    Returns:
        The validated body.

    Raises:
        BodyTooLargeError: The body is over ``MAX_BODY_BYTES`` (413).
        InvalidRequestError: Not JSON, or invalid; the message names each field at fault as a
            dotted wire path (``sessionSettings.externalId: ...``).
    """
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BodyTooLargeError(MAX_BODY_BYTES)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"body is not valid JSON: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_error(exc)) from exc


def describe_validation_error(exc: ValidationError) -> str:
    """Returns: ``"<dotted.path>: <message>"`` per error, joined by ``"; "``."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "body"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def error_response(message: str, status_code: int, **headers: str) -> JSONResponse:
    """Returns: ``{"error": message, "status": status_code}`` with that status."""
    body = {"error": message, "status": status_code}
    return JSONResponse(body, status_code=status_code, headers=headers or None)


async def _request_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    logger.info(
        "request refused path=%s status=%d error=%r", request.url.path, exc.status_code, exc.message
    )
    if exc.status_code == 401:
        return error_response(exc.message, 401, **{"WWW-Authenticate": "Api-Key"})
    return error_response(exc.message, exc.status_code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(str(exc.detail), exc.status_code, **dict(exc.headers or {}))


class InternalErrorMiddleware:
    """Turns an unexpected exception into a 500 JSON answer and one log line.

    When the response has already started (a stream), it can only be cut short; the stream
    itself reports failures as ``{"error": ...}`` lines before it gets here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            logger.exception("unexpected error path=%s started=%s", scope["path"], started)
            if not started:
                await error_response("internal error", 500)(scope, receive, send)
