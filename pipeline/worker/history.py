"""Earlier attempts of a job, read back from its own events on ``chat.job-events``.

Why read back events rather than keep a faust Table: the ``started`` event of an attempt is
durable (``acks=all``) before the worker calls the Chat API, and the ``first_line`` event carries
the chat id; they are the records the archive is built from, so the takeover and the archive
can never disagree. A faust Table would be a second copy of the same facts whose changelog is
written fire-and-forget: a worker killed right after ``table[job] = attempt`` may lose the
write, and the next worker would reuse an attempt number and write different lines under the
same (job, attempt, line) keys. Its recovery also reads the whole changelog on every rebalance.

How: every record about a job is keyed by its id, so the job's events are in one partition of
``chat.job-events`` (the Java client's murmur2 partitioner). The first lookup for a partition after
an assignment scans that partition once, from the submission time of the job looked up (minus a
margin for clock skew between producers) to its end, and folds the events into
:class:`~pipeline.worker.attempts.PriorAttempts` per job. Jobs not yet committed can only have
events after their own submission. Within one assignment no other worker runs jobs of the partition,
so the index stays right until the next rebalance (:meth:`JobHistory.forget`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import ValidationError
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_exponential_jitter,
)

from models.records import JobEvent
from models.wire import TOPIC_JOB_EVENTS
from pipeline import metrics
from pipeline.errors import RecordDeliveryError
from pipeline.kafka.clients import create_consumer, key_partition
from pipeline.settings import Settings
from pipeline.worker.attempts import PriorAttempts

logger = logging.getLogger(__name__)

CLOCK_SKEW_MARGIN_MS: Final = 5 * 60 * 1000
"""How far before the job's submission time the scan starts."""
SCAN_BATCH_RECORDS: Final = 5000
SCAN_POLL_MS: Final = 1000
PARTITIONS_WAIT_S: Final = 60.0
"""How long a starting worker waits for a topic's partitions to show in Kafka's metadata."""
PARTITIONS_RETRY_MAX_S: Final = 2.0
SCAN_ATTEMPTS: Final = 2
"""Scans of one partition that may time out before the lookup fails."""


async def topic_partitions(
    lookup: Callable[[], Awaitable[Iterable[int] | None]],
    *,
    topic: str,
    timeout_s: float = PARTITIONS_WAIT_S,
) -> list[int]:
    """Returns: the partitions of ``topic``, sorted, once Kafka's metadata lists some.

    Right after a topic is created, the broker's metadata may list it with no partition yet
    (their leaders are still being elected); aiokafka's ``producer.partitions_for`` then gives
    an empty set. So ``lookup`` is called again, with exponential backoff and jitter (0.1 s up
    to 2 s), until it gives partitions or ``timeout_s`` passed.

    Args:
        lookup: Asks Kafka for the topic's partitions (``lambda: producer.partitions_for(t)``).
        topic: The topic's name, for the error.
        timeout_s: Seconds to keep trying.

    Raises:
        RecordDeliveryError: The topic still has no partition after ``timeout_s``, or Kafka
            kept failing (``KafkaError``).
    """
    retrying = AsyncRetrying(
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential_jitter(initial=0.1, max=PARTITIONS_RETRY_MAX_S),
        retry=retry_if_result(lambda found: not found) | retry_if_exception_type(KafkaError),
    )

    async def sorted_partitions() -> list[int]:
        return sorted(await lookup() or ())

    try:
        found: list[int] = await retrying(sorted_partitions)
    except RetryError as exc:
        last = exc.last_attempt
        detail = repr(last.exception()) if last.failed else "none listed"
        raise RecordDeliveryError(
            f"topic has no partitions after {timeout_s:g} s ({detail})", topic=topic
        ) from exc
    return found


@dataclass
class _Index:
    """Earlier attempts of the jobs of one partition, from ``since_ms`` on."""

    since_ms: int
    jobs: dict[str, PriorAttempts] = field(default_factory=dict)
    records: int = 0


class JobHistory:
    """Looks up a job's earlier attempts; one instance per worker process.

    Args:
        settings: Bootstrap servers, topic prefix, ``max_record_bytes``.
        margin_ms: Scan start before the job's submission time.
    """

    def __init__(self, settings: Settings, *, margin_ms: int = CLOCK_SKEW_MARGIN_MS) -> None:
        self._settings = settings
        self._topic = settings.topic(TOPIC_JOB_EVENTS)
        self._consumer: AIOKafkaConsumer | None = None
        self._margin_ms = margin_ms
        self._indexes: dict[int, _Index] = {}
        self._partitions: list[int] = []
        self._lock = asyncio.Lock()
        self.scans = 0

    def __repr__(self) -> str:
        indexed = {p: len(i.jobs) for p, i in self._indexes.items()}
        return f"<JobHistory topic={self._topic} scans={self.scans} indexed={indexed}>"

    async def start(self, partitions: Iterable[int]) -> None:
        """Starts the consumer.

        Args:
            partitions: The partitions of ``chat.job-events`` (the producer's metadata:
                ``await producer.partitions_for(topic)``).

        Raises:
            RecordDeliveryError: Kafka cannot be reached, or the topic has no partitions.
        """
        self._partitions = sorted(partitions)
        if not self._partitions:
            raise RecordDeliveryError("topic has no partitions", topic=self._topic)
        await self._start_consumer()

    async def _start_consumer(self) -> AIOKafkaConsumer:
        consumer = self._consumer = create_consumer(self._settings, group_id=None)
        try:
            await consumer.start()
        except KafkaError as exc:
            self._consumer = None
            raise RecordDeliveryError(f"cannot read events: {exc!r}", topic=self._topic) from exc
        return consumer

    async def stop(self) -> None:
        """Stops the consumer."""
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    def forget(self) -> None:
        """Drops every index (call on a rebalance: other workers may have run jobs since)."""
        self._indexes.clear()

    def partition_of(self, job_id: str) -> int:
        """Returns: the ``chat.job-events`` partition of the job's records.

        The producer's choice (:func:`pipeline.kafka.clients.key_partition`).
        """
        return key_partition(job_id.encode(), self._partitions)

    async def prior(self, job_id: str, *, submitted_ms: int) -> PriorAttempts:
        """Returns: what the job's events say about its earlier attempts.

        Args:
            job_id: The job.
            submitted_ms: The ``chat.requests`` record's timestamp (ms since the epoch).

        Raises:
            RecordDeliveryError: Kafka did not answer the scan.
        """
        partition = self.partition_of(job_id)
        since_ms = submitted_ms - self._margin_ms
        async with self._lock:
            index = self._indexes.get(partition)
            if index is None or since_ms < index.since_ms:
                index = await self._scan(partition, since_ms)
                self._indexes[partition] = index
        return index.jobs.get(job_id, PriorAttempts())

    async def _scan(self, partition: int, since_ms: int) -> _Index:
        """Scans ``partition`` from ``since_ms``, within ``worker_history_scan_timeout_s``.

        A scan past the timeout (a fetch that never returns: its leader paused or gone) is
        counted (:data:`pipeline.metrics.HISTORY_SCAN_TIMEOUTS`), logged, and started again
        on a new consumer, which looks the partition's leader up anew; a second one raises.

        Raises:
            RecordDeliveryError: Kafka failed the scan, or it timed out twice.
        """
        timeout_s = self._settings.worker_history_scan_timeout_s
        for attempt in range(1, SCAN_ATTEMPTS + 1):
            started = time.monotonic()
            try:
                async with asyncio.timeout(timeout_s):
                    consumer = self._consumer or await self._start_consumer()  # (re)started
                    return await self._read(consumer, partition, since_ms)
            except TimeoutError:
                metrics.HISTORY_SCAN_TIMEOUTS.inc()
                logger.warning(
                    "job history scan timed out topic=%s partition=%s timeout_s=%g attempt=%d",
                    self._topic,
                    partition,
                    timeout_s,
                    attempt,
                )
                await self._drop_consumer()
            finally:
                metrics.HISTORY_SCAN_S.observe(time.monotonic() - started)
        raise RecordDeliveryError(
            f"job history scan of partition {partition} timed out {SCAN_ATTEMPTS} times "
            f"({timeout_s:g} s each)",
            topic=self._topic,
        )

    async def _drop_consumer(self) -> None:
        """Stops the consumer of a scan that timed out, within the same timeout."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            async with asyncio.timeout(self._settings.worker_history_scan_timeout_s):
                await consumer.stop()
        except (TimeoutError, KafkaError) as exc:
            logger.warning("job history consumer not stopped cleanly error=%r", exc)

    async def _read(self, consumer: AIOKafkaConsumer, partition: int, since_ms: int) -> _Index:
        tp = TopicPartition(self._topic, partition)
        index = _Index(since_ms)
        logger.info("job history scan started topic=%s partition=%s", self._topic, partition)
        try:
            consumer.assign([tp])
            found = await consumer.offsets_for_times({tp: max(since_ms, 0)})
            end = (await consumer.end_offsets([tp]))[tp]
            start = found[tp].offset if found.get(tp) is not None else end
            consumer.seek(tp, start)
            while await consumer.position(tp) < end:
                batches = await consumer.getmany(
                    tp, timeout_ms=SCAN_POLL_MS, max_records=SCAN_BATCH_RECORDS
                )
                for record in batches.get(tp, []):
                    _fold(index, record.value)
        except KafkaError as exc:
            raise RecordDeliveryError(f"cannot read events: {exc!r}", topic=self._topic) from exc
        self.scans += 1
        logger.info(
            "job history scanned topic=%s partition=%s start=%s end=%s records=%s jobs=%s",
            self._topic,
            partition,
            start,
            end,
            index.records,
            len(index.jobs),
        )
        return index


def _fold(index: _Index, value: bytes | None) -> None:
    index.records += 1
    try:
        event = JobEvent.from_value(value or b"")
    except ValidationError:
        logger.warning("job history skips a value that is not a job event")
        return
    if event.kind == "accepted":
        return
    index.jobs[event.job_id] = index.jobs.get(event.job_id, PriorAttempts()).observe(event)
