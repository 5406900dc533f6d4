"""Opening the Chat API's state database: engine, schema, and the account seeded from settings.

The database is a SQLite file by default and PostgreSQL when ``CHATSCRIBE_API_DATABASE_URL``
says so (``postgresql+psycopg://...``). The schema is created with SQLAlchemy's
``metadata.create_all`` at start-up, not with Alembic: these are a handful of tables owned by
one service, created in one step, while ``migrations/`` versions the separate PostgreSQL
archive. A later schema change would get its own Alembic environment; until then
``create_all`` is idempotent and needs nothing from the operator.

At start-up :func:`open_state` also makes the served account exist and marks turns still
``running`` from a previous process as ``interrupted`` (their stream died with that process).

API keys have two homes. The configured keys (``CHATSCRIBE_API_KEYS``) live in the process: it
holds their digests (:attr:`StateDatabase.configured`) and never writes them, so two replicas of
one service on one state database with different variables (a rolling key change) each accept
their own keys and never revoke each other's, and a key removed from the variable stops working
when the process restarts without it (issue 12). Keys added with ``chatscribe api keys add``
live in the database (``source="cli"``), seen by every process, until ``chatscribe api keys
revoke`` removes them; adding a key the variable also grants makes it outlive the variable.
Rows marked ``source="config"`` were written by earlier versions, which stored the variable's
keys; a process started with keys deletes them, so nothing keeps accepting a key that the
configuration dropped. The admin commands open the state without keys (``api_keys=None``).
One state database serves one running process at a time per account for turns; a second
process marks the first one's running turns ``interrupted`` (they are corrected when they end).

All calls are synchronous; the HTTP layer runs them in worker threads.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import make_url

from chat_api.state import tables

logger = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_S = 30.0
KEY_SOURCE_CONFIG = "config"
KEY_SOURCE_CLI = "cli"
Clock = Callable[[], float]


def key_digest(secret: str) -> str:
    """Returns: the SHA-256 of ``secret`` as 64 hex digits (API keys, session ids)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class StateDatabase:
    """The engine and clock every store shares.

    Attributes:
        engine: SQLAlchemy engine on the state database.
        account: The account this process serves (``accountName`` of the chat path).
        clock: Epoch seconds (``time.time``; tests pass a fake one).
        configured: :func:`key_digest` of the keys this process was configured with
            (``CHATSCRIBE_API_KEYS``); held here, never stored (module docstring).
    """

    engine: Engine
    account: str
    clock: Clock = field(default=time.time)
    configured: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"StateDatabase(url={self.engine.url!r}, account={self.account!r})"

    def account_of_key(self, api_key: str) -> str | None:
        """Returns: the account the API key belongs to, or None for an unknown key.

        A configured key of this process is its account's; any other is looked up in the
        database (keys added with ``chatscribe api keys add``).
        """
        digest = key_digest(api_key)
        if digest in self.configured:
            return self.account
        query = select(tables.api_keys.c.account).where(tables.api_keys.c.key_sha256 == digest)
        with self.engine.connect() as conn:
            return conn.execute(query).scalar_one_or_none()


def create_state_engine(url: str) -> Engine:
    """Returns an engine on ``url``.

    SQLite files get their folder, WAL, a busy timeout and foreign keys enforced on every
    connection.

    Raises:
        sqlalchemy.exc.ArgumentError: ``url`` is not a database URL.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # SQLite checks foreign keys only when asked, per connection (sqlite.org/foreignkeys).
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def open_state(
    url: str,
    *,
    account: str,
    api_keys: Iterable[str] | None = None,
    clock: Clock = time.time,
) -> StateDatabase:
    """Opens the state database, creating the schema and seeding ``account`` and its keys.

    Args:
        url: SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
        account: The account served.
        api_keys: The configured API keys of ``account`` (plain text): held by the returned
            state as digests, never stored; the rows earlier versions stored for their
            configuration are deleted. None (the admin commands) leaves every key as it is.
        clock: Epoch seconds.

    Returns:
        The database, ready for the stores.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: The database cannot be reached or written.
    """
    engine = create_state_engine(url)
    tables.metadata.create_all(engine)
    digests = frozenset(key_digest(key) for key in api_keys or ())
    state = StateDatabase(engine=engine, account=account, clock=clock, configured=digests)
    now = clock()
    with engine.begin() as conn:
        found = select(tables.accounts).where(tables.accounts.c.name == account)
        if conn.execute(found).first() is None:
            conn.execute(insert(tables.accounts).values(name=account, created_at_s=now))
        if api_keys is not None:
            _delete_stored_config_keys(conn, account)
        interrupted = conn.execute(
            update(tables.turns)
            .where(tables.turns.c.status == "running")
            .values(status="interrupted", ended_at_s=now)
        ).rowcount
    logger.info(
        "state opened url=%s account=%s api_keys=%d interrupted_turns=%d",
        engine.url.render_as_string(hide_password=True),
        account,
        len(digests),
        interrupted,
    )
    return state


def _insert_missing_keys(
    conn: Connection, account: str, digests: set[str], *, source: str, now: float
) -> int:
    keys = tables.api_keys
    known = set(conn.execute(select(keys.c.key_sha256).where(keys.c.account == account)).scalars())
    for digest in sorted(digests - known):
        conn.execute(
            insert(keys).values(key_sha256=digest, account=account, source=source, created_at_s=now)
        )
    return len(digests - known)


def _delete_stored_config_keys(conn: Connection, account: str) -> None:
    """Deletes the configuration keys earlier versions stored (module docstring)."""
    keys = tables.api_keys
    removed = conn.execute(
        delete(keys).where(keys.c.account == account, keys.c.source == KEY_SOURCE_CONFIG)
    ).rowcount
    if removed:
        logger.info("stored configuration keys deleted account=%s count=%d", account, removed)


def add_key(state: StateDatabase, api_key: str, *, source: str = KEY_SOURCE_CLI) -> bool:
    """Stores ``api_key`` for the account, seen by every process on this database.

    A key the configuration also grants now outlives its removal from ``CHATSCRIBE_API_KEYS``.

    Returns:
        False when the key was already stored.
    """
    keys, digest = tables.api_keys, key_digest(api_key)
    with state.engine.begin() as conn:
        added = _insert_missing_keys(
            conn, state.account, {digest}, source=source, now=state.clock()
        )
        conn.execute(
            update(keys)
            .where(keys.c.account == state.account, keys.c.key_sha256 == digest)
            .values(source=source)
        )
    return added == 1


def revoke_key(state: StateDatabase, api_key: str) -> bool:
    """Removes ``api_key`` from the account. Returns: False when it was not there."""
    keys = tables.api_keys
    with state.engine.begin() as conn:
        removed = conn.execute(
            delete(keys).where(
                keys.c.account == state.account, keys.c.key_sha256 == key_digest(api_key)
            )
        ).rowcount
    return removed == 1


def count_keys(state: StateDatabase) -> int:
    """Returns: the number of API keys ``state`` accepts: its configured ones and the stored."""
    keys = tables.api_keys
    query = select(keys.c.key_sha256).where(keys.c.account == state.account)
    with state.engine.connect() as conn:
        stored = set(conn.execute(query).scalars())
    return len(stored | state.configured)
