"""The Chat API's own state database (SQLAlchemy): users, API keys, threads, embed sessions."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.state.database import StateDatabase, add_key, count_keys, open_state, revoke_key
    from chat_api.state.sessions import SESSION_TTL_S, SessionStore
    from chat_api.state.threads import StoredMessage, Thread, ThreadStore
    from chat_api.state.users import (
        DEFAULT_EPHEMERAL_TTL_S,
        DEFAULT_MAX_EXTERNAL_USERS,
        ChatUser,
        UserDirectory,
    )

__all__ = [
    "DEFAULT_EPHEMERAL_TTL_S",
    "DEFAULT_MAX_EXTERNAL_USERS",
    "SESSION_TTL_S",
    "ChatUser",
    "SessionStore",
    "StateDatabase",
    "StoredMessage",
    "Thread",
    "ThreadStore",
    "UserDirectory",
    "add_key",
    "count_keys",
    "open_state",
    "revoke_key",
]

_EXPORTS: dict[str, str] = {
    "ChatUser": "chat_api.state.users",
    "DEFAULT_EPHEMERAL_TTL_S": "chat_api.state.users",
    "DEFAULT_MAX_EXTERNAL_USERS": "chat_api.state.users",
    "SESSION_TTL_S": "chat_api.state.sessions",
    "SessionStore": "chat_api.state.sessions",
    "StateDatabase": "chat_api.state.database",
    "StoredMessage": "chat_api.state.threads",
    "Thread": "chat_api.state.threads",
    "ThreadStore": "chat_api.state.threads",
    "UserDirectory": "chat_api.state.users",
    "add_key": "chat_api.state.database",
    "count_keys": "chat_api.state.database",
    "open_state": "chat_api.state.database",
    "revoke_key": "chat_api.state.database",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
