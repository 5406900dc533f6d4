"""Chat threads (chatId) in the state database: owner, turns, messages, follow-up context.

A thread is created by a chat request without ``chatId``; its chatId is announced in the
``__cutoff__`` line and reused to continue it (interface, "1. Chat"). Everything finished is
stored, so a restarted server continues any thread; the turn being streamed lives in memory
(:class:`chat_api.http.streaming.TurnRun`) and its outcome is written when it ends. Rules kept here:

- Only the user who created a thread sees it. For chat a thread of another user is reported as
  not found (404), so chatIds of other users cannot be probed; abort answers 403 (interface,
  "Authentication").
- A turn is stored as it starts (status ``running`` and the user message) and completed as it
  ends: ``completed``, ``aborted``, ``failed``, or ``interrupted`` when the process died. Only
  complete messages are stored: tool calls with their result and the final answer. An aborted
  turn keeps its question and finished tool calls, never a partial answer (issue 3, "Abort").
- The follow-up context (the last answered query, an opaque JSON ``PlanState``) is stored, so
  a follow-up question works across a restart.

All methods are synchronous database calls; the HTTP layer runs them in worker threads.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from chat_api.errors import ThreadNotFoundError
from chat_api.planner.specs import PlanState
from chat_api.state import tables
from chat_api.state.database import StateDatabase
from chat_api.state.identity import live_user
from chat_api.state.users import ChatUser

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thread:
    """One chat thread as stored.

    Attributes:
        chat_id: The thread's id (a random URL-safe token).
        owner: ``ChatUser.key`` of the creating user (``"external:<id>"``).
        memory_id: The id given as ``memoryId`` to the SQL tool on this thread.
        last_spec: The query of the last answered turn as an opaque JSON object
            (``Turn.plan_state``), the context of a follow-up question.
        turns: Turns started on this thread.
        last_turn_ended_at_s: When the last turn ended (epoch seconds), None before any.
        created_at_s: When the thread was created (epoch seconds).
    """

    chat_id: str
    owner: str
    memory_id: str
    last_spec: PlanState | None
    turns: int
    last_turn_ended_at_s: float | None
    created_at_s: float


@dataclass(frozen=True)
class StoredMessage:
    """A complete message of a turn, as stored.

    Attributes:
        message_id: The stream line's ``id``.
        role: ``"user"`` or ``"assistant"``.
        kind: ``"user"`` (the question), ``"answer"`` (final answer) or ``"tool"``.
        content: Text of a question or answer.
        tool_call: ``{"name", "input", "result"}`` of a complete tool call.
    """

    message_id: str
    role: str
    kind: str
    content: str | None = None
    tool_call: dict[str, Any] | None = None


class ThreadStore:
    """Threads of one account in the state database.

    Args:
        state: The state database (account, clock).
        token: Makes a new chatId or memoryId (tests pass a predictable one).
    """

    def __init__(
        self, state: StateDatabase, *, token: Callable[[], str] = lambda: secrets.token_urlsafe(16)
    ) -> None:
        self._state = state
        self._token = token

    def __repr__(self) -> str:
        return f"ThreadStore(account={self._state.account!r})"

    def create(self, user: ChatUser) -> Thread:
        """Starts a thread owned by ``user``. Returns: the new thread."""
        now = self._state.clock()
        thread = Thread(self._token(), user.key, f"mem-{self._token()}", None, 0, None, now)
        with self._state.engine.begin() as conn:
            conn.execute(
                insert(tables.threads).values(
                    chat_id=thread.chat_id,
                    account=self._state.account,
                    user_row=user.row_id,
                    owner=user.key,
                    memory_id=thread.memory_id,
                    created_at_s=now,
                    updated_at_s=now,
                )
            )
        logger.info("thread created chat_id=%s owner=%s", thread.chat_id, user.key)
        return thread

    def get(self, chat_id: str) -> Thread | None:
        """Returns the thread ``chat_id`` of this account, whoever owns it, or None.

        Also None when its owner is an ephemeral user past its lifetime, not purged yet.
        """
        t, users = tables.threads, tables.users
        turns = select(func.count()).where(tables.turns.c.chat_id == t.c.chat_id)
        query = (
            select(t, turns.scalar_subquery().label("turns"))
            .join(users, users.c.id == t.c.user_row)
            .where(t.c.chat_id == chat_id, t.c.account == self._state.account)
            .where(live_user(self._state.clock()))
        )
        with self._state.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        return Thread(
            chat_id=row["chat_id"],
            owner=row["owner"],
            memory_id=row["memory_id"],
            last_spec=row["follow_up"],
            turns=int(row["turns"]),
            last_turn_ended_at_s=row["last_turn_ended_at_s"],
            created_at_s=row["created_at_s"],
        )

    def find(self, chat_id: str, *, owner: str) -> Thread:
        """Returns: the thread ``chat_id`` when ``owner`` owns it.

        Raises:
            ThreadNotFoundError: No such thread, or another user owns it (chat: 404).
        """
        thread = self.get(chat_id)
        if thread is None or thread.owner != owner:
            raise ThreadNotFoundError(chat_id)
        return thread

    def begin_turn(
        self, thread: Thread, *, question: str, message_id: str | None, user_message_id: str
    ) -> int:
        """Stores a starting turn: status ``running`` and the user message.

        Returns:
            The turn number (1 for the first turn of the thread).
        """
        now = self._state.clock()
        with _thread_kept(thread.chat_id), self._state.engine.begin() as conn:
            _require_thread(conn, thread.chat_id)
            turn_no = _next_turn_no(conn, thread.chat_id)
            conn.execute(
                insert(tables.turns).values(
                    chat_id=thread.chat_id,
                    turn_no=turn_no,
                    message_id=message_id,
                    question=question,
                    status="running",
                    started_at_s=now,
                )
            )
            question_message = StoredMessage(user_message_id, "user", "user", content=question)
            _insert_messages(conn, thread.chat_id, turn_no, [question_message])
        return turn_no

    def end_turn(
        self,
        thread: Thread,
        turn_no: int,
        *,
        status: str,
        messages: Sequence[StoredMessage],
        spec: PlanState | None,
    ) -> None:
        """Stores how a turn ended, its complete messages and (when given) the follow-up context.

        Args:
            thread: The thread.
            turn_no: The number :meth:`begin_turn` returned.
            status: ``completed``, ``aborted`` or ``failed``.
            messages: Complete tool calls and the final answer, in stream order.
            spec: The turn's answered query; None keeps the previous context.
        """
        now = self._state.clock()
        values: dict[str, Any] = {"updated_at_s": now, "last_turn_ended_at_s": now}
        if spec is not None:
            values["follow_up"] = spec
        with _thread_kept(thread.chat_id), self._state.engine.begin() as conn:
            _require_thread(conn, thread.chat_id)
            _insert_messages(conn, thread.chat_id, turn_no, messages)
            conn.execute(
                update(tables.turns)
                .where(tables.turns.c.chat_id == thread.chat_id, tables.turns.c.turn_no == turn_no)
                .values(status=status, ended_at_s=now)
            )
            conn.execute(
                update(tables.threads)
                .where(tables.threads.c.chat_id == thread.chat_id)
                .values(**values)
            )
        logger.info("turn stored chat_id=%s turn=%d status=%s", thread.chat_id, turn_no, status)

    def history(self, chat_id: str) -> list[dict[str, Any]]:
        """Returns: ``{"id", "role", "content"}`` of the questions and final answers.

        Oldest first: the ``messages`` of the ``__state__`` line.
        """
        return [
            {"id": m.message_id, "role": m.role, "content": m.content}
            for m in self.messages(chat_id)
            if m.kind != "tool"
        ]

    def messages(self, chat_id: str) -> list[StoredMessage]:
        """Returns: every stored message of the thread (questions, tool calls, answers)."""
        m = tables.messages
        query = select(m).where(m.c.chat_id == chat_id).order_by(m.c.position)
        with self._state.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            StoredMessage(r["message_id"], r["role"], r["kind"], r["content"], r["tool_call"])
            for r in rows
        ]

    def find_turn(self, owner: str, message_id: str) -> tuple[str, str] | None:
        """Returns: ``(chat_id, status)`` of ``owner``'s turn sent with ``message_id``, or None."""
        t, th = tables.turns, tables.threads
        query = (
            select(t.c.chat_id, t.c.status)
            .join(th, th.c.chat_id == t.c.chat_id)
            .where(th.c.owner == owner, th.c.account == self._state.account)
            .where(t.c.message_id == message_id)
            .order_by(t.c.started_at_s.desc())
        )
        with self._state.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row[0], row[1])

    def turn_statuses(self, chat_id: str) -> list[str]:
        """Returns: the status of each turn of the thread, oldest first."""
        t = tables.turns
        query = select(t.c.status).where(t.c.chat_id == chat_id).order_by(t.c.turn_no)
        with self._state.engine.connect() as conn:
            return list(conn.execute(query).scalars())


def _require_thread(conn: Connection, chat_id: str) -> None:
    """Raises: ThreadNotFoundError when the thread was removed (its user expired mid-turn)."""
    found = select(tables.threads.c.chat_id).where(tables.threads.c.chat_id == chat_id)
    if conn.execute(found).first() is None:
        raise ThreadNotFoundError(chat_id)


@contextmanager
def _thread_kept(chat_id: str) -> Iterator[None]:
    """A foreign key refused a row: the thread went while the transaction ran (404)."""
    try:
        yield
    except IntegrityError as exc:
        logger.info("thread gone during a write chat_id=%s error=%s", chat_id, exc.orig)
        raise ThreadNotFoundError(chat_id) from exc


def _next_turn_no(conn: Connection, chat_id: str) -> int:
    query = select(func.coalesce(func.max(tables.turns.c.turn_no), 0)).where(
        tables.turns.c.chat_id == chat_id
    )
    return int(conn.execute(query).scalar_one()) + 1


def _insert_messages(
    conn: Connection, chat_id: str, turn_no: int, messages: Sequence[StoredMessage]
) -> None:
    if not messages:
        return
    query = select(func.coalesce(func.max(tables.messages.c.position), 0)).where(
        tables.messages.c.chat_id == chat_id
    )
    position = int(conn.execute(query).scalar_one())
    rows = [
        {
            "chat_id": chat_id,
            "position": position + offset,
            "turn_no": turn_no,
            "message_id": m.message_id,
            "role": m.role,
            "kind": m.kind,
            "content": m.content,
            "tool_call": m.tool_call,
        }
        for offset, m in enumerate(messages, start=1)
    ]
    conn.execute(insert(tables.messages), rows)
