"""Consumer lag: the one definition, and the two places that measure it.

Lag of a partition = its end offset (high watermark) − the offset the group reads next, never
negative (:func:`records_behind`; the figure ``kafka-consumer-groups.sh`` shows as LAG). Who
knows "the offset the group reads next" decides how it is read:

* the worker (:class:`LagReporter`): the group's committed offset on ``chat.requests``, read by a
  consumer that does not join the group (so it never causes a rebalance): records not yet
  finished and committed. Each worker reports the partitions assigned to it, so summing the
  gauge over workers gives the group's lag without double counting;
* the sink (:func:`assigned_lag`): its own consumer's position, from the high watermark of the
  last fetch, with no broker round trip (it runs after every batch); the sink commits each
  batch right after writing it, so its position is the committed offset plus at most the batch
  fetched ahead (:mod:`pipeline.sink.prefetch`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from pipeline import metrics
from pipeline.kafka.clients import create_admin, create_consumer
from pipeline.kafka.stall import PartitionOffsets
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

LAG_INTERVAL_S: Final = 5.0

Assignment = Callable[[], Iterable[tuple[str, int]]]
"""Returns the ``(topic, partition)`` pairs assigned to this worker right now."""
OffsetsObserver = Callable[[dict[tuple[str, int], PartitionOffsets]], None]
"""Called after each refresh with every assigned partition's committed and end offsets."""


def records_behind(end_offset: int, next_offset: int) -> int:
    """Returns: the lag of one partition in records (see the module docstring).

    Args:
        end_offset: The partition's end offset (high watermark): one past its last record.
        next_offset: The offset the group reads next (committed offset, or position).
    """
    return max(end_offset - next_offset, 0)


async def assigned_lag(consumer: Any) -> list[tuple[str, int, int]] | None:
    """Returns: ``(topic, partition, lag in records)`` of every partition of ``consumer``.

    None when not known (no fetch yet, or rebalancing). The position counts a batch fetched
    ahead as consumed.

    Args:
        consumer: A started, subscribed ``AIOKafkaConsumer`` (the sink's).
    """
    found: list[tuple[str, int, int]] = []
    try:
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            if highwater is None:
                return None
            found.append(
                (tp.topic, tp.partition, records_behind(highwater, await consumer.position(tp)))
            )
    except (IllegalStateError, KafkaError):
        return None  # rebalancing: no figure this time
    return found


class LagReporter:
    """Refreshes ``chatscribe_worker_consumer_lag_records`` every ``interval_s`` seconds.

    Args:
        settings: Bootstrap servers and ``worker_group`` (the group whose commits count).
        assignment: The worker's current assignment (faust's ``consumer.assignment()``).
        interval_s: Seconds between two refreshes.
        observer: Given the offsets after each refresh that ended (the worker's stall
            watchdog, :mod:`pipeline.kafka.stall`); a refresh that fails calls nothing.
    """

    def __init__(
        self,
        settings: Settings,
        assignment: Assignment,
        *,
        interval_s: float = LAG_INTERVAL_S,
        observer: OffsetsObserver | None = None,
    ) -> None:
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._assignment = assignment
        self.observer = observer
        self._interval_s = interval_s
        self._reported: set[tuple[str, int]] = set()
        self.refreshes = 0

    def __repr__(self) -> str:
        return f"<LagReporter refreshes={self.refreshes} partitions={len(self._reported)}>"

    async def run(self) -> None:
        """Refreshes until cancelled; Kafka errors are logged and the next refresh tries again."""
        self._consumer = create_consumer(self._settings, group_id=self._settings.worker_group)
        await self._consumer.start()
        try:
            while True:
                try:
                    await self.refresh()
                except KafkaError as exc:
                    logger.warning("consumer lag not refreshed error=%r", exc)
                await asyncio.sleep(self._interval_s)
        finally:
            await self._consumer.stop()

    async def refresh(self) -> dict[tuple[str, int], int]:
        """Sets the gauge for every assigned partition; removes it for the others.

        Returns:
            ``(topic, partition)`` → lag in records.
        """
        consumer = self._consumer
        assert consumer is not None, "LagReporter not running"
        assigned = sorted(set(self._assignment()))
        tps = [TopicPartition(topic, partition) for topic, partition in assigned]
        ends = await consumer.end_offsets(tps) if tps else {}
        lags: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], PartitionOffsets] = {}
        for tp in tps:
            committed = await consumer.committed(tp) or 0
            lag = records_behind(ends[tp], committed)
            lags[(tp.topic, tp.partition)] = lag
            offsets[(tp.topic, tp.partition)] = PartitionOffsets(committed, ends[tp])
            metrics.CONSUMER_LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        if self.observer is not None:
            self.observer(offsets)
        for topic, partition in self._reported - set(lags):
            metrics.CONSUMER_LAG.remove(topic, str(partition))
        self._reported = set(lags)
        self.refreshes += 1
        return lags


class GroupOffsets:
    """Reads a consumer group's committed offsets and the end offsets of its topics.

    Its consumer carries the group's id but never subscribes, so it never joins the group (no
    rebalance) and does not depend on the group member it watches (the sink's stall watchdog).

    Args:
        settings: Bootstrap servers.
        group: The consumer group whose commits are read.
        topics: Full topic names; every partition of them is read.
        timeout_s: Longest one :meth:`read` may take.
    """

    def __init__(
        self, settings: Settings, *, group: str, topics: Sequence[str], timeout_s: float
    ) -> None:
        self._consumer = create_consumer(settings, group_id=group)
        self._settings = settings
        self._partitions: list[TopicPartition] = []
        self._started = False
        self._group = group
        self._topics = list(topics)
        self._timeout_s = timeout_s

    async def stop(self) -> None:
        """Stops the consumer (started by the first :meth:`read`)."""
        await self._consumer.stop()

    async def read(self) -> dict[tuple[str, int], PartitionOffsets] | None:
        """Returns: ``(topic, partition)`` → committed and end offsets; None when not known.

        Not known: Kafka failed or did not answer within ``timeout_s`` (a coordinator away).
        The topics' partitions are described once, at the first read that succeeds.
        """
        consumer = self._consumer
        try:
            async with asyncio.timeout(self._timeout_s):
                if not self._started:
                    await consumer.start()
                    self._started = True
                if not self._partitions:
                    self._partitions = await self._describe()
                ends = await consumer.end_offsets(self._partitions)
                return {
                    (tp.topic, tp.partition): PartitionOffsets(
                        await consumer.committed(tp) or 0, ends[tp]
                    )
                    for tp in self._partitions
                }
        except (KafkaError, TimeoutError) as exc:
            logger.info("group offsets not read group=%s error=%r", self._group, exc)
            return None

    async def _describe(self) -> list[TopicPartition]:
        admin = create_admin(self._settings)
        await admin.start()
        try:
            described = await admin.describe_topics(self._topics)
        finally:
            await admin.close()
        return [
            TopicPartition(topic["topic"], partition["partition"])
            for topic in described
            for partition in topic["partitions"]
        ]
