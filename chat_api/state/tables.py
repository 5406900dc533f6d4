"""The Chat API's own state as SQLAlchemy Core tables (not the PostgreSQL archive's).

Everything a restart must keep lives here (issue 3, "State"): accounts and their API keys, users,
threads with their turns and messages, and embed sessions. What only matters while a turn
streams (its lines so far, its subscribers, its abort event) stays in memory
(:mod:`chat_api.http.streaming`). Times are UNIX epoch seconds (``*_at_s`` floats), the same on
SQLite and PostgreSQL.

::

    accounts        name
    api_keys        key_sha256 → account, source ("config")
    users           id; (account, kind, user_id) unique; groups, attributes, security_context
                    (JSON); is_ephemeral, expires_at_s (None: persisted)
    threads         chat_id; account, user_row → users.id, owner (user_key), memory_id,
                    follow_up (JSON), created/updated_at_s, last_turn_ended_at_s
    turns           (chat_id, turn_no); message_id (the client's ``messageId``), question,
                    status running|completed|aborted|failed|interrupted, started/ended_at_s
    messages        (chat_id, position); turn_no, message_id (the line id), role,
                    kind user|answer|tool, content, tool_call (JSON)
    embed_sessions  session_sha256; account, user_key, identity (JSON), created/expires/
                    used/revoked_at_s

Text that comes from requests (ids, questions) is ``Text``, never a bounded ``String``, so
PostgreSQL never refuses a long value that SQLite would have taken. Secrets are stored hashed
(SHA-256 of the API key and of the session id): a copy of the database gives no usable key or
session.
"""

from __future__ import annotations

from typing import Final, Literal

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

UserKind = Literal["external", "internal"]
TurnStatus = Literal["running", "completed", "aborted", "failed", "interrupted"]
MessageKind = Literal["user", "answer", "tool"]
USER_KINDS: Final = ("external", "internal")

accounts = Table(
    "accounts",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("created_at_s", Float, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_sha256", String(64), primary_key=True),
    Column("account", ForeignKey("accounts.name"), nullable=False),
    Column("source", String(20), nullable=False),
    Column("created_at_s", Float, nullable=False),
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("account", ForeignKey("accounts.name"), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("user_id", Text, nullable=False),
    Column("email", Text),
    Column("groups", JSON, nullable=False),
    Column("attributes", JSON, nullable=False),
    Column("security_context", JSON, nullable=False),
    Column("is_ephemeral", Boolean, nullable=False),
    Column("expires_at_s", Float),
    Column("created_at_s", Float, nullable=False),
    Column("last_seen_at_s", Float, nullable=False),
    UniqueConstraint("account", "kind", "user_id", name="uq_users_account_kind_user_id"),
    Index("ix_users_expires_at_s", "expires_at_s"),
)

threads = Table(
    "threads",
    metadata,
    Column("chat_id", String(64), primary_key=True),
    Column("account", ForeignKey("accounts.name"), nullable=False),
    Column("user_row", ForeignKey("users.id"), nullable=False, index=True),
    Column("owner", Text, nullable=False),
    Column("memory_id", String(80), nullable=False),
    Column("follow_up", JSON),
    Column("created_at_s", Float, nullable=False),
    Column("updated_at_s", Float, nullable=False),
    Column("last_turn_ended_at_s", Float),
)

turns = Table(
    "turns",
    metadata,
    Column("chat_id", ForeignKey("threads.chat_id"), primary_key=True),
    Column("turn_no", Integer, primary_key=True),
    Column("message_id", Text),
    Column("question", Text, nullable=False),
    Column("status", String(12), nullable=False),
    Column("started_at_s", Float, nullable=False),
    Column("ended_at_s", Float),
    Index("ix_turns_message_id", "chat_id", "message_id"),
)

messages = Table(
    "messages",
    metadata,
    Column("chat_id", ForeignKey("threads.chat_id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("turn_no", Integer, nullable=False),
    Column("message_id", Text, nullable=False),
    Column("role", String(10), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("content", Text),
    Column("tool_call", JSON),
)

embed_sessions = Table(
    "embed_sessions",
    metadata,
    Column("session_sha256", String(64), primary_key=True),
    Column("account", ForeignKey("accounts.name"), nullable=False),
    Column("user_key", Text, nullable=False),
    Column("identity", JSON, nullable=False),
    Column("created_at_s", Float, nullable=False),
    Column("expires_at_s", Float, nullable=False),
    Column("used_at_s", Float),
    Column("revoked_at_s", Float),
)
