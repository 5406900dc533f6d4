"""The endpoints of the Chat API: chat, abort, generate-session and session revoke.

Rules implemented here (``chat-api-interface.md``, "Endpoints", "Authentication", "Errors";
``field-notes.md``, "Threads and idempotency", "Generate session and signed embedding"):

- Authentication is ``Authorization: Api-Key <key>`` on every endpoint, checked against the
  hashed keys of the state database before the path, so a caller without a key learns nothing.
- The chat user comes from ``sessionSettings``; one rule decides it for chat, abort and
  generate-session (:func:`chat_api.state.identity.identity_key`; both ids at once: 400).
- ``input`` longer than ``max_input_chars``: 413 naming the limit (issue 12).
- A chatId owned by another user is a 404 like an unknown one, checked before "streaming in
  progress", so a running thread of another user cannot be told from a missing one.
- ``input`` omitted: the thread's current state, nothing asked (400 without ``chatId``).
- ``messageId`` resent while its turn runs: the request subscribes to that turn and receives
  its lines from the first. After the turn ended, the same ``messageId`` answers with the
  thread's state instead of asking again (an idempotent retry). Any other input on a thread that
  is streaming: 409 ``Streaming for thread is in progress``.
- Abort: 404 for an unknown chatId or one whose last turn ended more than ``abort_window_s``
  ago, 403 when ``sessionSettings`` names another user, else 204 with no body; the 204 is sent
  once the aborted turn has ended and is stored (at most ``ABORT_WAIT_S`` later).
- Generate-session resolves (creates) the user like chat does and returns ``{sessionId}``;
  ``POST /api/v1/embed/session/revoke`` with ``{sessionId}`` voids one (204; 404 if unknown).

Blocking work (database, loading a branch) runs in worker threads; the in-memory registry of
running turns is touched only on the event loop, and its check-and-register has no ``await``
in between, so two requests cannot both start a turn on one thread.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.errors import (
    InputTooLargeError,
    InvalidRequestError,
    NotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadOwnerError,
    UnauthorizedError,
)
from chat_api.http.bodies import read_body
from chat_api.http.branches import BranchCatalog
from chat_api.http.streaming import NdjsonResponse, TurnRun, encoded, state_lines
from chat_api.settings import ChatApiSettings
from chat_api.state.database import StateDatabase
from chat_api.state.sessions import SessionStore
from chat_api.state.threads import Thread, ThreadStore
from chat_api.state.users import ChatUser, UserDirectory
from models.chat import (
    AbortRequest,
    ChatRequest,
    GenerateSessionRequest,
    GenerateSessionResponse,
    WireModel,
)

logger = logging.getLogger(__name__)

AUTH_SCHEME = "api-key"
REVOKE_SESSION_PATH = "/api/v1/embed/session/revoke"
"""Revoke path of the hosted service (field notes, "Generate session and signed embedding")."""
ABORT_WAIT_S = 10.0
_T = TypeVar("_T")
_PATH_PARAMS = (
    ("cloud_region", "cloudRegion", "cloud region"),
    ("account_name", "accountName", "account"),
    ("agent_id", "agentId", "agent"),
)


class RevokeSessionRequest(WireModel):
    """Body of ``POST /api/v1/embed/session/revoke``: ``{"sessionId": ...}``."""

    session_id: str = Field(alias="sessionId", min_length=1, max_length=200)


async def in_thread(function: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """Returns: ``function(*args, **kwargs)`` run in a worker thread."""
    return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))


class ChatService:
    """The endpoints, the stores they share and the turns running now.

    Attributes:
        settings: The process settings.
        state: The state database.
        branches: The data model's branches (``activeBranchName``).
        users, threads, sessions: The stores.
        running: Turns streaming now, by chatId.
        aborts: Aborts that signalled a running turn.
    """

    def __init__(self, settings: ChatApiSettings, *, toolbox: Toolbox, state: StateDatabase):
        self.settings = settings
        self.toolbox = toolbox
        self.state = state
        self.branches = BranchCatalog(
            settings.model_dir.parent, main=settings.model_dir.name, base=toolbox
        )
        self.users = UserDirectory(
            state,
            declared_attributes=settings.user_attributes,
            declared_groups=settings.user_groups,
            max_external_users=settings.max_external_users,
            default_ttl_s=settings.ephemeral_ttl_s,
        )
        self.threads = ThreadStore(state)
        self.sessions = SessionStore(state, ttl_s=settings.session_ttl_s)
        self.running: dict[str, TurnRun] = {}
        self._owners: dict[str, str] = {}
        self._by_message: dict[tuple[str, str], TurnRun] = {}
        self.aborts = 0

    def __repr__(self) -> str:
        return f"ChatService(running={len(self.running)} aborts={self.aborts} {self.sessions!r})"

    async def chat(self, request: Request) -> Response:
        """``POST .../stream-chat-state`` (interface, "1. Chat").

        Raises:
            RequestError: 400, 401, 403 (user limit), 404 or 409 (answered as JSON by the app).
        """
        await self.authenticate(request)
        self._check_agent(request.path_params)
        body = await read_body(request, ChatRequest)
        if body.input is not None and len(body.input) > self.settings.max_input_chars:
            raise InputTooLargeError(len(body.input), self.settings.max_input_chars)
        toolbox = await in_thread(
            self.branches.toolbox_for,
            body.active_branch_name,
            is_default_branch=body.effective_is_default_branch,
        )
        user = await in_thread(self.users.resolve, body.session_settings)
        if body.input is None:
            if body.chat_id is None:
                raise InvalidRequestError("input: required when chatId is omitted")
            thread = await in_thread(self.threads.find, body.chat_id, owner=user.key)
            return await self._state_response(thread.chat_id)
        running = self._running_turn(body, owner=user.key)
        if running is not None:
            return NdjsonResponse(running.subscribe())
        if body.message_id is not None:
            done = await in_thread(self.threads.find_turn, user.key, body.message_id)
            if done is not None:
                return await self._state_response(done[0])
        return await self._start_turn(body, user=user, toolbox=toolbox, question=body.input)

    async def _start_turn(
        self, body: ChatRequest, *, user: ChatUser, toolbox: Toolbox, question: str
    ) -> Response:
        if body.chat_id is None:
            thread = await in_thread(self.threads.create, user)
        else:
            thread = await in_thread(self.threads.find, body.chat_id, owner=user.key)
        history = await in_thread(self.threads.history, thread.chat_id)
        turn = Turn(self._turn_request(thread, question, user, history), toolbox=toolbox)
        if self._running_turn(body, owner=user.key) is not None or thread.chat_id in self.running:
            raise ThreadBusyError(thread.chat_id)
        turn_no = 0

        async def on_end(run: TurnRun) -> None:
            try:
                spec = turn.plan_state if run.outcome == "completed" else None
                status = run.outcome or "failed"
                await in_thread(
                    self.threads.end_turn,
                    thread,
                    turn_no,
                    status=status,
                    messages=run.messages,
                    spec=spec,
                )
            finally:
                self._unregister(thread.chat_id, user.key, run)

        run = TurnRun(
            turn,
            question=question,
            message_id=body.message_id,
            line_delay_ms=self.settings.line_delay_ms,
            on_end=on_end,
        )
        self._register(thread.chat_id, user.key, run)
        try:
            user_message_id = turn.summaries()[0]["id"]
            turn_no = await in_thread(
                self.threads.begin_turn,
                thread,
                question=question,
                message_id=body.message_id,
                user_message_id=user_message_id,
            )
        except BaseException:
            self._unregister(thread.chat_id, user.key, run)
            raise
        run.start()
        return NdjsonResponse(run.subscribe())

    def _turn_request(
        self, thread: Thread, question: str, user: ChatUser, history: list[dict[str, Any]]
    ) -> TurnRequest:
        return TurnRequest(
            chat_id=thread.chat_id,
            question=question,
            user=user.context,
            memory_id=thread.memory_id,
            previous=thread.last_spec,
            history=tuple(history),
            development_mode=self.settings.development_mode,
            row_limit=self.settings.row_limit,
        )

    def _running_turn(self, body: ChatRequest, *, owner: str) -> TurnRun | None:
        """Returns: the running turn this request resubscribes to, or None.

        Raises:
            ThreadBusyError: The thread streams another turn (409).
        """
        if body.message_id is not None:
            run = self._by_message.get((owner, body.message_id))
            if run is not None:
                chat_id = run.turn.request.chat_id
                if body.chat_id not in (None, chat_id) or body.input != run.question:
                    raise ThreadBusyError(chat_id)
                return run
        if body.chat_id is not None and body.chat_id in self.running:
            if self._owners.get(body.chat_id) != owner:  # ownership first: no probing
                raise ThreadNotFoundError(body.chat_id)
            raise ThreadBusyError(body.chat_id)
        return None

    def _register(self, chat_id: str, owner: str, run: TurnRun) -> None:
        self.running[chat_id] = run
        self._owners[chat_id] = owner
        if run.message_id is not None:
            self._by_message[(owner, run.message_id)] = run

    def _unregister(self, chat_id: str, owner: str, run: TurnRun) -> None:
        if self.running.get(chat_id) is run:
            del self.running[chat_id]
            self._owners.pop(chat_id, None)
        if run.message_id is not None and self._by_message.get((owner, run.message_id)) is run:
            del self._by_message[(owner, run.message_id)]

    async def _state_response(self, chat_id: str) -> Response:
        history = await in_thread(self.threads.history, chat_id)
        lines = state_lines(chat_id, history, streaming=chat_id in self.running)
        return NdjsonResponse(encoded(lines))

    async def abort(self, request: Request) -> Response:
        """``POST .../stream-chat-state/abort``: 204 (interface, "2. Abort").

        Raises:
            RequestError: 400, 401, 403 (another user's thread) or 404 (unknown chatId, or no
                turn ended within ``abort_window_s``).
        """
        await self.authenticate(request)
        self._check_agent(request.path_params)
        body = await read_body(request, AbortRequest)
        owner = None if body.session_settings is None else self.users.check(body.session_settings)
        thread = await in_thread(self.threads.get, body.chat_id)
        if thread is None:
            raise ThreadNotFoundError(body.chat_id)
        if owner is not None and owner != thread.owner:
            raise ThreadOwnerError(body.chat_id)
        run = self.running.get(body.chat_id)
        if run is not None:
            if run.abort():
                self.aborts += 1
                logger.info("thread abort signalled chat_id=%s", body.chat_id)
            await _wait_at_most(run, ABORT_WAIT_S)
            return Response(status_code=204)
        ended_at_s = thread.last_turn_ended_at_s or thread.created_at_s
        if self.state.clock() - ended_at_s > self.settings.abort_window_s:
            raise NotFoundError(
                f"no active or recently completed chat: chatId {body.chat_id!r} ended "
                f"more than {self.settings.abort_window_s:.0f} s ago"
            )
        return Response(status_code=204)

    async def generate_session(self, request: Request) -> Response:
        """``POST /api/v1/embed/generate-session`` (interface, "3. Generate session").

        Returns:
            ``{"sessionId": "<token>"}``; single use, valid for ``session_ttl_s`` seconds.

        Raises:
            RequestError: 400 (invalid identity, undeclared attribute, unknown internal user),
                401, or 403 (external user limit).
        """
        await self.authenticate(request)
        body = await read_body(request, GenerateSessionRequest)
        user = await in_thread(self.users.resolve, body)
        session = await in_thread(self.sessions.create, body, user_key=user.key)
        return JSONResponse(GenerateSessionResponse(session_id=session.session_id).to_wire())

    async def revoke_session(self, request: Request) -> Response:
        """``POST /api/v1/embed/session/revoke`` with ``{"sessionId"}``: 204.

        Raises:
            RequestError: 400, 401, or 404 (no such session).
        """
        await self.authenticate(request)
        body = await read_body(request, RevokeSessionRequest)
        await in_thread(self.sessions.revoke, body.session_id)
        return Response(status_code=204)

    async def authenticate(self, request: Request) -> None:
        """Checks ``Authorization: Api-Key <key>`` against the account's stored keys.

        Raises:
            UnauthorizedError: Missing header, wrong scheme, or a key of no account (401).
        """
        header = request.headers.get("authorization")
        if header is None:
            raise UnauthorizedError("missing Authorization header; expected 'Api-Key <key>'")
        scheme, _, key = header.strip().partition(" ")
        if scheme.lower() != AUTH_SCHEME or not key.strip():
            raise UnauthorizedError("Authorization header must be 'Api-Key <key>'")
        account = await in_thread(self.state.account_of_key, key.strip())
        if account is None or not hmac.compare_digest(account, self.state.account):
            raise UnauthorizedError("invalid API key")

    def _check_agent(self, params: Mapping[str, Any]) -> None:
        for name, wire_name, what in _PATH_PARAMS:
            if params[name] != getattr(self.settings, name):
                raise NotFoundError(f"{what} not found: {wire_name} {params[name]!r}")


async def _wait_at_most(run: TurnRun, seconds: float) -> None:
    try:
        await asyncio.wait_for(run.wait(), timeout=seconds)
    except TimeoutError:
        logger.warning("aborted turn still running after %.0f s: %r", seconds, run)
