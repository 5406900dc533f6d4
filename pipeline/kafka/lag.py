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
from collections.abc import Callable, Iterable
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from pipeline import metrics
from pipeline.kafka.clients import create_consumer
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

LAG_INTERVAL_S: Final = 5.0

Assignment = Callable[[], Iterable[tuple[str, int]]]
"""Returns the ``(topic, partition)`` pairs assigned to this worker right now."""


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
    """

    def __init__(
        self, settings: Settings, assignment: Assignment, *, interval_s: float = LAG_INTERVAL_S
    ) -> None:
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._assignment = assignment
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
        for tp in tps:
            lag = records_behind(ends[tp], await consumer.committed(tp) or 0)
            lags[(tp.topic, tp.partition)] = lag
            metrics.CONSUMER_LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        for topic, partition in self._reported - set(lags):
            metrics.CONSUMER_LAG.remove(topic, str(partition))
        self._reported = set(lags)
        self.refreshes += 1
        return lags
