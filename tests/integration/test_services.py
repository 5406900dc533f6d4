"""The real services that ``ops/services.sh`` starts work the way the pipeline relies on.

Kafka: an idempotent producer and a consumer group move a 5 MiB record through an auto-created
topic, so the broker's ``message.max.bytes``, the producer's ``max_request_size`` and the
consumer's ``max_partition_fetch_bytes`` agree (32 MiB). PostgreSQL: a fresh schema per test,
idempotent upserts, and durability settings left on.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Callable

import psycopg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import ConsumerRecord
from psycopg import sql
from psycopg.types.json import Jsonb

pytestmark = pytest.mark.integration

MAX_RECORD_BYTES = 32 * 1024 * 1024
LARGE_RECORD_BYTES = 5 * 1024 * 1024
CONSUME_TIMEOUT_S = 30.0


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> list[int]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        max_request_size=MAX_RECORD_BYTES,
    )
    await producer.start()
    try:
        offsets = []
        for key, value in records:
            metadata = await producer.send_and_wait(topic, value, key=key)
            offsets.append(metadata.offset)
        return offsets
    finally:
        await producer.stop()


async def _consume(consumer: AIOKafkaConsumer, count: int) -> list[ConsumerRecord[bytes, bytes]]:
    received: list[ConsumerRecord[bytes, bytes]] = []
    async with asyncio.timeout(CONSUME_TIMEOUT_S):
        while len(received) < count:
            batches = await consumer.getmany(timeout_ms=1_000)
            for batch in batches.values():
                received.extend(batch)
    return received


async def test_kafka_round_trip_carries_a_5_mib_record(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("services")
    large = os.urandom(LARGE_RECORD_BYTES)
    offsets = await _produce(kafka_bootstrap, topic, [(b"k", b"small"), (b"k", large)])
    assert offsets[1] == offsets[0] + 1

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=unique_name("group"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=MAX_RECORD_BYTES,
    )
    await consumer.start()
    try:
        received = await _consume(consumer, 2)
        await consumer.commit()
        partition = TopicPartition(topic, received[0].partition)
        committed = await consumer.committed(partition)
    finally:
        await consumer.stop()

    assert [r.value for r in received] == [b"small", large]
    assert hashlib.sha256(received[1].value or b"").digest() == hashlib.sha256(large).digest()
    assert {r.partition for r in received} == {received[0].partition}
    assert committed == received[1].offset + 1


async def test_kafka_auto_created_topic_has_four_partitions(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("partitions")
    await _produce(kafka_bootstrap, topic, [(b"k", b"v")])

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        [description] = await admin.describe_topics([topic])
    finally:
        await admin.close()

    partitions = {p["partition"] for p in description["partitions"]}
    assert partitions == {0, 1, 2, 3}


def test_postgres_round_trip_in_fresh_schema(pg_conninfo: str, pg_schema: str) -> None:
    table = sql.Identifier(pg_schema, "answers")
    upsert = sql.SQL(
        "INSERT INTO {} (job_id, line_no, body) VALUES (%s, %s, %s) "
        "ON CONFLICT (job_id, line_no) DO NOTHING"
    ).format(table)
    job_id = uuid.uuid4()

    with psycopg.connect(pg_conninfo) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (job_id uuid, line_no int, body jsonb NOT NULL, "
                "PRIMARY KEY (job_id, line_no))"
            ).format(table)
        )
        with conn.cursor() as cur:
            cur.executemany(upsert, [(job_id, n, Jsonb({"n": n})) for n in range(3)])
            # A redelivered line is written once: the first value wins.
            cur.execute(upsert, (job_id, 1, Jsonb({"n": "duplicate"})))
            assert cur.rowcount == 0
        conn.commit()
        rows = conn.execute(
            sql.SQL("SELECT line_no, body FROM {} ORDER BY line_no").format(table)
        ).fetchall()

    assert rows == [(0, {"n": 0}), (1, {"n": 1}), (2, {"n": 2})]


def test_pg_schema_is_empty_and_owned_by_the_test_role(pg_conninfo: str, pg_schema: str) -> None:
    with psycopg.connect(pg_conninfo) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
        ).fetchone()
        owner = conn.execute(
            "SELECT pg_get_userbyid(nspowner) = current_user FROM pg_namespace WHERE nspname = %s",
            (pg_schema,),
        ).fetchone()

    assert tables == (0,)
    assert owner == (True,)


@pytest.mark.parametrize(("setting", "expected"), [("fsync", "on"), ("synchronous_commit", "on")])
def test_postgres_keeps_commits_durable(pg_conninfo: str, setting: str, expected: str) -> None:
    with psycopg.connect(pg_conninfo) as conn:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()

    assert row == (expected,)
