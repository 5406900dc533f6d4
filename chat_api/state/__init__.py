"""The Chat API's own state database (SQLAlchemy): users, API keys, threads, embed sessions."""

from __future__ import annotations

from chat_api.state.database import StateDatabase, add_key, count_keys, open_state, revoke_key
from chat_api.state.users import UserDirectory

__all__ = ["StateDatabase", "UserDirectory", "add_key", "count_keys", "open_state", "revoke_key"]
