"""Fixtures shared by every test: the real Kafka and PostgreSQL that ``ops/services.sh`` starts.

Integration tests need both services; when one does not answer the test fails (never skips) and
the message says how to start them (``make services-up``). The addresses come from the same
``CHATSCRIBE_*`` variables as the pipeline's settings, with the same defaults.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from uuid import uuid4

import psycopg
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.stack_support import TOPIC_PREFIXES, pg_schema_made

# Same defaults as pipeline/settings.py and ops/services.sh.
DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_DATABASE_URL = "postgresql+psycopg://chatscribe:chatscribe@127.0.0.1:15432/chatscribe"
SERVICE_CHECK_TIMEOUT_S = 15.0
START_HINT = "Start the services with `make services-up` (ops/services.sh up)."

NameFactory = Callable[[str], str]
T = TypeVar("T")


def psycopg_conninfo(database_url: str) -> str:
    """Turn a SQLAlchemy URL into one psycopg accepts.

    Args:
        database_url: ``postgresql+psycopg://user:password@host:port/db`` (any ``+driver``).

    Returns:
        The same URL as ``postgresql://user:password@host:port/db``.
    """
    return re.sub(r"^postgresql\+\w+://", "postgresql://", database_url)


async def _list_kafka_topics(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5_000)
    try:
        async with asyncio.timeout(SERVICE_CHECK_TIMEOUT_S):
            await admin.start()
            topics: list[str] = await admin.list_topics()
            return topics
    finally:
        await admin.close()


def _run_in_own_loop(coro: Coroutine[Any, Any, T]) -> T:
    # A thread with its own event loop keeps this check apart from pytest-asyncio's loops.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _delete_own_topics(bootstrap: str, prefixes: tuple[str, ...]) -> int:
    """Deletes the topics whose names start with one of ``prefixes``; returns how many."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        await admin.start()
        own = sorted(t for t in await admin.list_topics() if t.startswith(prefixes))
        for start in range(0, len(own), TOPICS_PER_DELETE):
            await admin.delete_topics(own[start : start + TOPICS_PER_DELETE])
        return len(own)
    finally:
        await admin.close()


TOPICS_PER_DELETE = 100
@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a Kafka broker that answers an admin call (list topics).

    At the session's end the topics of this session's test settings and names
    (:data:`tests.stack_support.TOPIC_PREFIXES`) are deleted: only those, so a test run
    beside this one keeps its own, and the broker's start-up does not slow down run after run
    (it loads every partition's log before it serves).
    """
    bootstrap = os.environ.get("CHATSCRIBE_KAFKA_BOOTSTRAP", DEFAULT_KAFKA_BOOTSTRAP)
    try:
        _run_in_own_loop(_list_kafka_topics(bootstrap))
    except Exception as exc:
        problem = f"Kafka does not answer at {bootstrap} ({type(exc).__name__}: {exc})."
    else:
        yield bootstrap
        if TOPIC_PREFIXES:
            _run_in_own_loop(_delete_own_topics(bootstrap, tuple(TOPIC_PREFIXES)))
        return
    pytest.fail(f"{problem} {START_HINT}", pytrace=False)  # outside `except`: no chained traceback


@pytest.fixture(scope="session")
def database_url() -> str:
    """SQLAlchemy URL (``postgresql+psycopg://...``) of a PostgreSQL that accepts its login."""
    url = os.environ.get("CHATSCRIBE_DATABASE_URL", DEFAULT_DATABASE_URL)
    where = url.rsplit("@", 1)[-1]  # never print the password
    try:
        with psycopg.connect(psycopg_conninfo(url), connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        problem = f"PostgreSQL does not accept the login at {where} ({type(exc).__name__}: {exc})."
    else:
        return url
    pytest.fail(f"{problem} {START_HINT}", pytrace=False)


@pytest.fixture(scope="session")
def pg_conninfo(database_url: str) -> str:
    """The ``database_url`` as a psycopg conninfo URL (``postgresql://...``)."""
    return psycopg_conninfo(database_url)


@pytest.fixture
def unique_name() -> NameFactory:
    """Factory of names no other test (or earlier run) uses: ``t-<10 hex>-<suffix>``.

    Use it for topics and consumer groups: ``unique_name("jobs")`` -> ``"t-1f0c9a2b3d-jobs"``.
    """

    def make(suffix: str) -> str:
        name = f"t-{uuid4().hex[:10]}-{suffix}"
        TOPIC_PREFIXES.add(name)
        return name

    return make


@pytest.fixture
def pg_schema(pg_conninfo: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL schema ``test_<12 hex>``, dropped with its contents afterwards."""
    with pg_schema_made(pg_conninfo, f"test_{uuid4().hex[:12]}") as name:
        yield name
