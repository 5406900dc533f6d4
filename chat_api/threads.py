"""Chat threads (chatId) held in memory: owner, messages, follow-up context, running turn.

A thread is created by a chat request without ``chatId``; its chatId is announced in the
``__cutoff__`` line and reused to continue it (interface, "1. Chat"). Rules kept here:

- Only the user who created a thread sees it. For chat a thread of another user is reported as
  not found (404), so chatIds of other users cannot be probed; for abort the interface names
  403 (interface, "Authentication": "Abort is allowed only for the user who owns the chat thread").
- One thread runs at most one turn; a second input while it streams is refused with 409
  ("Streaming for thread is in progress", field notes, "Threads and idempotency").
- Abort signals the running turn through an :class:`asyncio.Event`; aborting a thread with no
  running turn is a no-op (interface, "2. Abort": "active or recently completed").

The store lives on the event loop: use it from coroutines only, never from worker threads.
Threads are evicted oldest-first (idle ones only) beyond ``max_threads``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from chat_api.errors import ThreadBusyError, ThreadNotFoundError, ThreadOwnerError

if TYPE_CHECKING:
    from chat_api.specs import PlanState

logger = logging.getLogger(__name__)

DEFAULT_MAX_THREADS = 10_000
ThreadState = Literal["running", "done"]


@dataclass(eq=False)
class Thread:
    """One chat thread.

    Attributes:
        chat_id: The thread's id (a random URL-safe token).
        owner: ``SessionSettings.user_key`` of the creating user (``"external:<id>"``).
        memory_id: The id given as ``memoryId`` to the SQL tool on this thread.
        messages: Summaries ``{"id", "role", "content"}`` of the user messages and final answers,
            oldest first; the ``__state__`` line carries them.
        last_spec: The query of the last answered turn as an opaque JSON object
            (``Turn.plan_state``), the context of a follow-up question.
        state: ``"running"`` while a turn streams, ``"done"`` otherwise.
        abort_event: Set by an abort; renewed at the start of each turn.
        turns: Turns started on this thread.
    """

    chat_id: str
    owner: str
    memory_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    last_spec: PlanState | None = None
    state: ThreadState = "done"
    abort_event: asyncio.Event = field(default_factory=asyncio.Event)
    turns: int = 0


class ThreadStore:
    """In-memory threads by chatId.

    Args:
        max_threads: Threads kept; beyond it the least recently used idle thread is dropped.
        token: Makes a new chatId or memoryId (tests pass a predictable one).
    """

    def __init__(
        self,
        *,
        max_threads: int = DEFAULT_MAX_THREADS,
        token: Callable[[], str] = lambda: secrets.token_urlsafe(16),
    ) -> None:
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        self._max_threads = max_threads
        self._token = token
        self.aborts = 0

    def __repr__(self) -> str:
        running = sum(1 for t in self._threads.values() if t.state == "running")
        return f"ThreadStore(threads={len(self._threads)} running={running} aborts={self.aborts})"

    def __len__(self) -> int:
        return len(self._threads)

    def create(self, owner: str) -> Thread:
        """Starts a thread owned by ``owner`` (a ``user_key``). Returns: the new thread."""
        thread = Thread(chat_id=self._token(), owner=owner, memory_id=f"mem-{self._token()}")
        self._threads[thread.chat_id] = thread
        self._evict()
        logger.info("thread created chat_id=%s owner=%s", thread.chat_id, owner)
        return thread

    def find(self, chat_id: str, *, owner: str) -> Thread:
        """Returns: the thread ``chat_id`` when ``owner`` owns it.

        Raises:
            ThreadNotFoundError: No such thread, or another user owns it (chat: 404).
        """
        thread = self._threads.get(chat_id)
        if thread is None or thread.owner != owner:
            raise ThreadNotFoundError(chat_id)
        self._threads.move_to_end(chat_id)
        return thread

    def start_turn(self, thread: Thread) -> asyncio.Event:
        """Marks ``thread`` running.

        Returns:
            The turn's abort event, set when the turn is to stop.

        Raises:
            ThreadBusyError: A turn is already running on the thread (409).
        """
        if thread.state == "running":
            raise ThreadBusyError(thread.chat_id)
        thread.state = "running"
        thread.turns += 1
        thread.abort_event = asyncio.Event()
        return thread.abort_event

    def finish_turn(
        self, thread: Thread, *, messages: list[dict[str, Any]], spec: PlanState | None
    ) -> None:
        """Marks ``thread`` done, appending the turn's message summaries.

        Args:
            thread: The thread whose turn ended (completed, aborted or failed).
            messages: Summaries to append (the user message; the final answer when there is one).
            spec: The turn's query, kept as follow-up context; None keeps the previous one.
        """
        thread.messages.extend(messages)
        if spec is not None:
            thread.last_spec = spec
        thread.state = "done"

    def abort(self, chat_id: str, *, requester: str | None) -> bool:
        """Signals the running turn of ``chat_id`` to stop (interface, "2. Abort").

        Args:
            chat_id: The thread to abort.
            requester: ``user_key`` of the abort's ``sessionSettings``; None when the request
                carries none (the API key alone then authorises it).

        Returns:
            True when a running turn was signalled, False for an idle thread (a no-op).

        Raises:
            ThreadNotFoundError: No thread ``chat_id`` (404).
            ThreadOwnerError: ``requester`` is not the thread's owner (403).
        """
        thread = self._threads.get(chat_id)
        if thread is None:
            raise ThreadNotFoundError(chat_id)
        if requester is not None and requester != thread.owner:
            raise ThreadOwnerError(chat_id)
        if thread.state != "running" or thread.abort_event.is_set():
            return False
        thread.abort_event.set()
        self.aborts += 1
        logger.info("thread abort signalled chat_id=%s", chat_id)
        return True

    def _evict(self) -> None:
        excess = len(self._threads) - self._max_threads
        for chat_id in [c for c, t in self._threads.items() if t.state == "done"][:excess]:
            del self._threads[chat_id]
            logger.info("thread evicted chat_id=%s", chat_id)
