"""The Chat API as a Starlette ASGI application.

Routes (``chat-api-interface.md``, "Endpoints"; paths from :mod:`models.wire`)::

    POST /api/v1/public/{cloudRegion}/{accountName}/agents/{agentId}/chat/stream-chat-state
    POST .../chat/stream-chat-state/abort
    POST /api/v1/embed/generate-session
    POST /api/v1/embed/session/revoke              {sessionId} -> 204 (field notes)
    GET  /embed/chat/{chatId}?session=<sessionId>   the embed page (HTML, no API key)
    GET  /static/<file>                             vega, vega-lite, vega-embed for that page
    GET  /openapi.json                              OpenAPI 3.1 of the JSON endpoints
    GET  /healthz                                   no authentication; {"status": "ok"}

Every refusal is JSON ``{"error": "<message>", "status": <code>}`` (interface, "Errors"); an
unexpected failure is a 500 ``{"error": "internal error"}`` and one log line, never a
traceback page. The chat stream is NDJSON served as ``application/json``, one line per message,
each sent as soon as the agent produces it (field notes, "Addresses and authentication").
Endpoint rules: :mod:`chat_api.http.service`; state: :mod:`chat_api.state.database`.

Choices where the interface is silent:

- A chatId owned by another user is a 404 for chat (indistinguishable from an unknown chatId);
  the interface lists 403 for abort only, where it is used.
- An abort without ``sessionSettings`` is authorised by the API key alone.
- A chat request without ``input`` and without ``chatId`` is a 400 (there is no state to show).
- A body declared as anything but JSON is a 415; a body nested deeper than 32 levels, or with
  a number Python cannot read, is a 400 naming the problem; an ``input`` longer than
  ``CHATSCRIBE_MAX_INPUT_CHARS`` is a 413 naming the limit (issue 12).
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chat_api.agent import Toolbox
from chat_api.errors import RequestError
from chat_api.http.bodies import MAX_BODY_BYTES, describe_validation_error, read_body
from chat_api.http.embed import STATIC_DIR, EmbedPages
from chat_api.http.openapi import openapi_document
from chat_api.http.service import REVOKE_SESSION_PATH, ChatService
from chat_api.reader.llm import ChatModel, LanguageModelReader
from chat_api.semantic.model import load_model, policy_attributes
from chat_api.settings import ChatApiSettings
from chat_api.sql.warehouse import open_warehouse
from chat_api.state.database import open_state
from models import wire

logger = logging.getLogger(__name__)

__all__ = ["MAX_BODY_BYTES", "create_app", "describe_validation_error", "read_body"]


def create_app(settings: ChatApiSettings, *, toolbox: Toolbox | None = None) -> Starlette:
    """Builds the application; opens the state database and loads the toolbox first.

    Args:
        settings: The process settings.
        toolbox: The agent's resources; built from ``settings`` when None (tests share one).

    Returns:
        The Starlette app, with ``app.state.service`` holding its stores and
        ``app.state.service_document`` the OpenAPI document.

    Raises:
        ChatApiError: The data model is invalid (``ModelError``) or the warehouse cannot load.
        sqlalchemy.exc.SQLAlchemyError: The state database cannot be opened.
    """
    state = open_state(
        settings.api_database_url,
        account=settings.account_name,
        api_keys=[key.get_secret_value() for key in settings.api_keys],
    )
    toolbox = toolbox or load_toolbox(settings)
    used = policy_attributes(toolbox.model)  # the model's policies declare what they read
    declared = tuple(dict.fromkeys((*settings.user_attributes, *used)))
    settings = settings.model_copy(update={"user_attributes": declared})
    service = ChatService(settings, toolbox=toolbox, state=state)
    for user in settings.internal_users:
        service.users.add_internal(user.email, groups=user.groups, attributes=user.attributes)
    embed = EmbedPages(service)
    chat_path = wire.CHAT_PATH_TEMPLATE
    document = openapi_document(settings)
    routes = [
        Route("/healthz", health, methods=["GET"]),
        Route("/openapi.json", lambda _: JSONResponse(document), methods=["GET"]),
        Route(chat_path, service.chat, methods=["POST"]),
        Route(chat_path + wire.ABORT_SUFFIX, service.abort, methods=["POST"]),
        Route(wire.GENERATE_SESSION_PATH, service.generate_session, methods=["POST"]),
        Route(REVOKE_SESSION_PATH, service.revoke_session, methods=["POST"]),
        Route("/embed/chat/{chat_id}", embed.chat_page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(InternalErrorMiddleware)],
        exception_handlers={RequestError: _request_error, HTTPException: _http_error},
    )
    app.state.service = service
    app.state.service_document = document
    return app


def load_toolbox(settings: ChatApiSettings) -> Toolbox:
    """Returns: the model, its index (or the legacy vocabulary) and the warehouse.

    Raises:
        ModelError: the model is invalid, or a member's SQL fails against the warehouse.
        QueryExecutionError: the warehouse cannot be opened.
    """
    model = load_model(settings.model_dir)
    warehouse = open_warehouse(settings.warehouse, cache=settings.database_path)
    config = settings.language_model()
    llm = LanguageModelReader(ChatModel(config)) if config else None
    toolbox = Toolbox.build(model, warehouse, reader=settings.chosen_reader(), language_model=llm)
    logger.info(
        "toolbox loaded views=%d warehouse=%r reader=%s language_model=%r",
        len(model.views), warehouse, settings.chosen_reader(), llm,
    )  # fmt: skip
    return toolbox


async def health(request: Request) -> Response:
    """``GET /healthz``: ``{"status": "ok"}``, without authentication."""
    return JSONResponse({"status": "ok"})


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
