"""The answer a thread's state holds (pure, no I/O).

A takeover whose thread already received the question fetches the thread's state (a chat
request without ``input``, interface "1. Chat": "the response returns the current state of the
thread") instead of asking again. That stream has no ``final`` line: what the agent answered is
in the ``__state__`` line's ``state.messages`` (field notes, "Lines that the interface does not
list": "a snapshot of the whole thread ..., serialized agent framework messages").

Message shapes: our Chat API sends ``{"id", "role", "content"}``; hosted services send agent
framework messages, where ``type`` (``human``/``ai``) stands for the role and ``content`` may be
a list of parts (``{"type": "text", "text": ...}`` or strings). The answer is the last message
with an answer role and text content after the last question; an AI message with only tool
calls (no text) is not one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

ANSWER_ROLES: Final = frozenset({"assistant", "ai"})
QUESTION_ROLES: Final = frozenset({"user", "human"})


@dataclass(frozen=True)
class StateAnswer:
    """The thread's answer to its last question.

    Attributes:
        message_id: The message's ``id`` in the state (None when it has none).
        content: Its text (parts joined).
    """

    message_id: str | None
    content: str


def state_answer(state: Mapping[str, Any] | None) -> StateAnswer | None:
    """Returns: the answer after the last question in ``state["messages"]``, or None.

    Args:
        state: The ``state`` object of a ``__state__`` line (None or without ``messages``:
            no answer).
    """
    found: Any = (state or {}).get("messages")
    if not isinstance(found, list):
        return None
    roles = [_role(item) for item in found]
    last_question = max((i for i, r in enumerate(roles) if r in QUESTION_ROLES), default=-1)
    for item, role in reversed(list(zip(found, roles, strict=True))[last_question + 1 :]):
        text = _text(item.get("content")) if role in ANSWER_ROLES else None
        if text:
            message_id = item.get("id")
            return StateAnswer(message_id if isinstance(message_id, str) else None, text)
    return None


def _role(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    role = item.get("role", item.get("type"))
    return role.lower() if isinstance(role, str) else None


def _text(content: Any) -> str | None:
    """Returns: a message's text: a string as is, a list of parts joined, else None."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [
        p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict)
    ]
    return "".join(p for p in parts if isinstance(p, str)) or None
