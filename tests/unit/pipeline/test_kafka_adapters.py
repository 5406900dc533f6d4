"""The Kafka adapters translate aiokafka's errors and write every dead letter by one rule set."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaConnectionError
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from models import wire
from models.records import DeadLetter
from pipeline.errors import (
    InvalidJobError,
    InvalidRecordError,
    PartitionsRevokedError,
    RecordDeliveryError,
    TransientError,
)
from pipeline.kafka import consumer
from pipeline.kafka.clients import (
    connection_options,
    key_partition,
    replication_for,
    under_replicated,
)
from pipeline.kafka.dead_letters import MAX_REASON_CHARS, send_dead_letters
from pipeline.kafka.lag import records_behind
from pipeline.settings import Settings
from pipeline.worker.app import broker_credentials


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


class RevokedConsumer:
    """Raises what aiokafka raises once a rebalance took the partitions."""

    async def commit(self, offsets: dict[Any, int]) -> None:
        raise CommitFailedError("group rebalanced")

    def seek(self, partition: Any, offset: int) -> None:
        raise IllegalStateError("no longer assigned")

    async def position(self, partition: Any) -> int:
        raise IllegalStateError("no longer assigned")


async def test_rebalance_errors_become_partitions_revoked_errors() -> None:
    revoked, tp = RevokedConsumer(), TP("t.lines", 3)
    with pytest.raises(PartitionsRevokedError) as commit_error:
        await consumer.commit(revoked, {tp: 5})
    with pytest.raises(PartitionsRevokedError) as seek_error:
        consumer.seek(revoked, tp, 5)
    with pytest.raises(PartitionsRevokedError):
        await consumer.position(revoked, tp)
    assert isinstance(commit_error.value, TransientError)
    assert (seek_error.value.topic, seek_error.value.partition) == ("t.lines", 3)
    assert isinstance(seek_error.value.__cause__, IllegalStateError)


def test_lag_is_records_behind_the_end_never_negative() -> None:
    assert records_behind(120, 100) == 20
    assert records_behind(100, 120) == 0


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any = field(default_factory=list)


class Producer:
    def __init__(self, *, fail: bool = False) -> None:
        self.sent: list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]] = []
        self._fail = fail

    async def send(
        self, topic: str, value: bytes, *, key: bytes | None, headers: Any, partition: Any = None
    ) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._fail:
            future.set_exception(KafkaConnectionError("broker gone"))
        else:
            future.set_result(None)
        self.sent.append((topic, value, key, list(headers)))
        return future


async def test_worker_and_sink_dead_letters_follow_one_rule_set() -> None:
    """Original key, value and headers kept (pairs or a faust mapping), reason cut, source set."""
    job = Record("p.chat.requests", 1, 7, b"job-1", b"not a job", {"trace": b"abc"})
    line = Record("p.chat.lines", 2, 9, b"job-2", b"raw", [("chatscribe-attempt", b"1")])
    long_reason = "x" * (MAX_REASON_CHARS + 50)
    producer = Producer()
    await send_dead_letters(
        producer,
        "p.dlq",
        [
            (job, InvalidJobError(long_reason, topic=job.topic, partition=1, offset=7)),
            (line, InvalidRecordError("bad", topic=line.topic, partition=2, offset=9)),
        ],
    )
    (_, job_value, job_key, job_headers), (_, _, _, line_headers) = producer.sent
    assert (job_value, job_key) == (b"not a job", b"job-1")
    assert ("trace", b"abc") in job_headers
    assert ("chatscribe-attempt", b"1") in line_headers
    letter = DeadLetter.from_headers(job_headers)
    assert letter.reason == "x" * MAX_REASON_CHARS
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "p.chat.requests",
        1,
        7,
    )
    assert dict(line_headers)[wire.HEADER_DLQ_REASON] == b"bad"


async def test_an_unacknowledged_dead_letter_is_a_delivery_error() -> None:
    record = Record("p.chat.lines", 0, 1, b"k", b"v")
    error = InvalidRecordError("bad", topic=record.topic, partition=0, offset=1)
    with pytest.raises(RecordDeliveryError):
        await send_dead_letters(Producer(fail=True), "p.dlq", [(record, error)])


# Kafka's Java client (clients/src/test/java/.../utils/UtilsTest.java, testMurmur2): the signed
# murmur2 of these keys; the default partitioner takes toPositive(hash) % partitions.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "signed"), sorted(JAVA_MURMUR2.items()))
@pytest.mark.parametrize("count", [1, 3, 4, 12])
def test_key_partition_is_the_java_clients_choice(key: bytes, signed: int, count: int) -> None:
    assert key_partition(key, range(count)) == (signed & 0x7FFFFFFF) % count


def test_key_partition_orders_partitions_by_id_and_refuses_none() -> None:
    ids = [40, 10, 30, 20]  # the producer's metadata gives partitions in any order
    index = (JAVA_MURMUR2[b"foobar"] & 0x7FFFFFFF) % len(ids)
    assert key_partition(b"foobar", ids) == sorted(ids)[index]
    with pytest.raises(ValueError, match="no partitions"):
        key_partition(b"foobar", [])


@pytest.mark.parametrize(
    ("brokers", "factor", "min_insync", "expected"),
    [
        (1, None, None, (1, 1)),
        (2, None, None, (2, 1)),
        (3, None, None, (3, 2)),
        (6, None, None, (3, 2)),
        (3, 2, None, (2, 1)),
        (3, None, 3, (3, 3)),
        (1, 1, 2, (1, 1)),  # never more in sync than replicas
    ],
)
def test_replication_comes_from_the_cluster_unless_set(
    brokers: int, factor: int | None, min_insync: int | None, expected: tuple[int, int]
) -> None:
    settings = Settings(kafka_replication_factor=factor, kafka_min_insync_replicas=min_insync)
    found = replication_for(brokers, settings)
    assert (found.factor, found.min_insync) == expected


def test_under_replicated_names_partitions_short_of_replicas_or_out_of_sync() -> None:
    described = [
        {
            "topic": "t",
            "partitions": [
                {"partition": 0, "replicas": [1, 2, 3], "isr": [1, 2, 3]},
                {"partition": 1, "replicas": [1, 2, 3], "isr": [1, 3]},
                {"partition": 2, "replicas": [1], "isr": [1]},
            ],
        }
    ]
    assert under_replicated(described, 3) == ["t:1", "t:2"]
    assert under_replicated(described, 1) == ["t:1"]


def test_faust_gets_the_same_tls_and_sasl_settings_as_the_pipelines_clients() -> None:
    assert broker_credentials(Settings()) is None
    sasl = Settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="svc",
        kafka_sasl_password="secret",
    )
    found = broker_credentials(sasl)
    options = credentials_to_aiokafka_auth(found)
    assert options == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "secret",
        "ssl_context": None,
    }
    assert {k: v for k, v in connection_options(sasl).items()} == {
        k: v for k, v in options.items() if k != "ssl_context"
    }
    tls = credentials_to_aiokafka_auth(broker_credentials(Settings(kafka_security_protocol="SSL")))
    assert tls["security_protocol"] == "SSL" and tls["ssl_context"] is not None
