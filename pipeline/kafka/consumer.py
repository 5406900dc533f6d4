"""Offset operations of a group consumer, with aiokafka's errors translated once, here.

The sink (:mod:`pipeline.sink.loop`, :mod:`pipeline.sink.prefetch`) commits, seeks and reads
positions of the partitions assigned to it. A rebalance may take a partition away between two
of those calls: aiokafka then raises ``IllegalStateError`` (the partition is no longer
assigned) or ``CommitFailedError`` (the group moved on); both become
:class:`pipeline.errors.PartitionsRevokedError`, so the sink decides with ``isinstance`` and
never imports aiokafka. Source for the behaviour:
https://aiokafka.readthedocs.io/en/stable/consumer.html ("Consumer groups and topic subscriptions").
"""

from __future__ import annotations

from typing import Any

from aiokafka.errors import CommitFailedError, IllegalStateError

from pipeline.errors import PartitionsRevokedError

Consumer = Any
"""A started ``aiokafka.AIOKafkaConsumer`` (aiokafka ships no type hints)."""
Partition = Any
"""An ``aiokafka.TopicPartition`` (``topic``, ``partition``)."""


async def commit(consumer: Consumer, offsets: dict[Partition, int]) -> None:
    """Commits ``offsets`` (partition → next offset to read) for the consumer's group.

    Raises:
        PartitionsRevokedError: A rebalance took some of the partitions first.
    """
    try:
        await consumer.commit(offsets)
    except (CommitFailedError, IllegalStateError) as exc:
        raise PartitionsRevokedError(f"offsets not committed: {exc!r}") from exc


def seek(consumer: Consumer, partition: Partition, offset: int) -> None:
    """Makes ``offset`` the next record read from ``partition``.

    Raises:
        PartitionsRevokedError: The partition is no longer assigned to the consumer.
    """
    try:
        consumer.seek(partition, offset)
    except IllegalStateError as exc:
        raise PartitionsRevokedError(
            "partition revoked before seek", topic=partition.topic, partition=partition.partition
        ) from exc


async def position(consumer: Consumer, partition: Partition) -> int:
    """Returns: the offset of the next record the consumer reads from ``partition``.

    Raises:
        PartitionsRevokedError: The partition is no longer assigned (or is being reassigned).
    """
    try:
        return int(await consumer.position(partition))
    except IllegalStateError as exc:
        raise PartitionsRevokedError(
            f"no position: {exc!r}", topic=partition.topic, partition=partition.partition
        ) from exc
