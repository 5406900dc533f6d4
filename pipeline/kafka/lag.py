"""Consumer lag of the worker group, per partition, as a Prometheus gauge.

Lag of a partition = its end offset (high watermark) − the group's committed offset: the
``chat.requests`` records not yet finished and committed. Each worker reports the partitions
assigned to it, so summing the gauge over workers gives the group's lag without double counting.
A group-less read of committed offsets does not join the group, so it never causes a rebalance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Final

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from pipeline import metrics
from pipeline.kafka.clients import create_consumer
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

LAG_INTERVAL_S: Final = 5.0

Assignment = Callable[[], Iterable[tuple[str, int]]]
"""Returns the ``(topic, partition)`` pairs assigned to this worker right now."""


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
            committed = await consumer.committed(tp) or 0
            lag = max(ends[tp] - committed, 0)
            lags[(tp.topic, tp.partition)] = lag
            metrics.CONSUMER_LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        for topic, partition in self._reported - set(lags):
            metrics.CONSUMER_LAG.remove(topic, str(partition))
        self._reported = set(lags)
        self.refreshes += 1
        return lags
