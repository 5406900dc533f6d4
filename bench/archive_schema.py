"""Bench-only PostgreSQL schemas and Kafka topics: create, measure, drop.

Every benchmark archives into a schema of its own (``bench_<hex>``, migrated with
:func:`pipeline.archive.engine.upgrade`) and topics under a prefix of its own, both removed at the
end, so runs never see each other's rows and the shared services stay clean.

:func:`install_commit_clock` adds, in that schema only, a table ``bench_commits`` and a deferred
constraint trigger on ``answers``: when the transaction that writes a job's ``answers`` row (the
sink normalises an attempt once all its lines and its terminal event are stored) commits, the
trigger records ``clock_timestamp()`` at commit time. That is the moment the job is archived.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from aiokafka.admin import AIOKafkaAdminClient
from psycopg import sql

from models import wire
from pipeline.archive.engine import upgrade
from pipeline.kafka.clients import ensure_topics
from pipeline.settings import Settings

ARCHIVE_TABLES: Final = (
    "jobs",
    "job_events",
    "stream_lines",
    "messages",
    "tool_calls",
    "sql_queries",
    "answers",
)
TOPIC_READY_TIMEOUT_S: Final = 30.0
_COMMIT_CLOCK: Final = """
CREATE TABLE {schema}.bench_commits (
    job_id text NOT NULL, attempt integer NOT NULL, committed_at timestamptz NOT NULL
);
CREATE FUNCTION {schema}.bench_mark_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.bench_commits VALUES (NEW.job_id, NEW.attempt, clock_timestamp());
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER bench_answers_committed AFTER INSERT ON {schema}.answers
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.bench_mark_commit();
"""


def conninfo(settings: Settings) -> str:
    """Returns: the settings' SQLAlchemy URL as a psycopg conninfo (``postgresql://...``)."""
    url = settings.database_url.get_secret_value()
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)


@dataclass(frozen=True)
class BenchSpace:
    """A schema and a topic prefix for one benchmark.

    Attributes:
        settings: Pipeline settings pointing at them (groups unique too).
    """

    settings: Settings

    @classmethod
    def new(cls, label: str, base: Settings | None = None, **overrides: Any) -> BenchSpace:
        """Returns: a space named ``bench_<label>_<hex>`` (not created yet)."""
        name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
        fields = {
            **(base or Settings()).model_dump(),
            "database_schema": name,
            "topic_prefix": f"{name}.",
            "worker_group": f"{name}-worker",
            "sink_group": f"{name}-sink",
            **overrides,
        }
        return cls(Settings(**fields))

    @property
    def schema(self) -> str:
        """The PostgreSQL schema's name."""
        return self.settings.database_schema

    def create(self, *, commit_clock: bool = False) -> None:
        """Creates and migrates the schema (and the commit clock), and creates the topics."""
        with psycopg.connect(conninfo(self.settings), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        upgrade(self.settings)
        if commit_clock:
            install_commit_clock(self.settings)
        asyncio.run(ensure_topics(self.settings, wire.ALL_TOPICS))
        asyncio.run(wait_for_partitions(self.settings, wire.ALL_TOPICS))

    def drop(self) -> None:
        """Drops the schema with its rows and deletes the topics; never raises for a missing one."""
        with psycopg.connect(conninfo(self.settings), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )
        asyncio.run(delete_topics(self.settings, wire.ALL_TOPICS))

    def relation_bytes(self, tables: Iterable[str] = ARCHIVE_TABLES) -> dict[str, int]:
        """Returns ``pg_total_relation_size`` (heap, TOAST, indexes) per table, in bytes.

        A partitioned table (``stream_lines``, migration 0006) counts its partitions.
        """
        query = (
            "SELECT coalesce(sum(pg_total_relation_size(relid)), 0)"
            " FROM pg_partition_tree(%s::regclass)"
        )
        with psycopg.connect(conninfo(self.settings)) as conn:
            return {
                table: int(
                    conn.execute(query, (f"{self.schema}.{table}",)).fetchone()[0]  # type: ignore[index]
                )
                for table in tables
            }


def install_commit_clock(settings: Settings) -> None:
    """Adds ``bench_commits`` and its deferred trigger on ``answers`` (module docstring)."""
    schema = sql.Identifier(settings.database_schema).as_string()
    with psycopg.connect(conninfo(settings), autocommit=True) as conn:
        conn.execute(_COMMIT_CLOCK.format(schema=schema).encode())


async def wait_for_partitions(
    settings: Settings, names: Sequence[str], *, timeout_s: float = TOPIC_READY_TIMEOUT_S
) -> None:
    """Waits until the broker's metadata shows partitions for every prefixed topic.

    A process started right after the topics were created may otherwise find none.

    Raises:
        TimeoutError: Some topic still has no partitions after ``timeout_s``.
    """
    wanted = [settings.topic(name) for name in names]
    async with asyncio.timeout(timeout_s):
        while not await _have_partitions(settings, wanted):  # noqa: ASYNC110 (polling Kafka)
            await asyncio.sleep(0.3)


async def _have_partitions(settings: Settings, topics: Sequence[str]) -> bool:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    return len(described) == len(topics) and all(
        topic.get("error_code") == 0 and topic.get("partitions") for topic in described
    )


async def delete_topics(settings: Settings, names: Sequence[str]) -> None:
    """Deletes the prefixed topics that exist; the others are ignored."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        wanted = {settings.topic(name) for name in names}
        present = sorted(wanted & set(await admin.list_topics()))
        if present:
            await admin.delete_topics(present)
    finally:
        await admin.close()
