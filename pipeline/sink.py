"""The sink: archive ``chat.lines`` and ``chat.job-events`` into PostgreSQL, effectively once.

One aiokafka consumer (group ``settings.sink_group``, no auto-commit) reads both topics in
batches (``getmany``). Per batch (design.md, "Flow"):

1. decode every record (:meth:`LineEnvelope.from_record`, :meth:`JobEvent.from_value`);
2. write the decoded records in one PostgreSQL transaction (:meth:`ArchiveWriter.write_batch`);
3. produce each record that could not be decoded, or that PostgreSQL could never store, to
   ``chat.lines.dlq`` (for both topics) with its original key, value and headers plus the
   dead-letter headers (:class:`models.records.DeadLetter`: reason, source topic, partition,
   offset), and await the deliveries;
4. only then commit the batch's offsets.

The writes are idempotent, so a sink killed between 2 and 4 re-reads the batch and changes
nothing: effectively once for the archive (a dead letter may be produced twice). When
PostgreSQL is unavailable the write is retried with exponential backoff (tenacity) for up to
``retry_budget_s``; after that the consumer is rewound to the batch's first offsets and the
loop tries again, so nothing is dropped or committed early. When PostgreSQL refuses a value,
the batch is split in halves until the refused records are found; they are dead-lettered and
the rest is archived.

:func:`run_sink` runs the loop until SIGTERM or SIGINT, then finishes the current batch,
commits and returns. Tests drive a :class:`Sink` with :meth:`Sink.start`, :meth:`Sink.run_once`
and :meth:`Sink.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from models import wire
from models.errors import LineRecordError
from models.records import JobEvent, LineEnvelope
from pipeline.archive import ArchiveWriter, BatchOutcome, refusal
from pipeline.dead_letters import Record, send_dead_letters
from pipeline.errors import ArchiveRejectedError, ArchiveUnavailableError, TransientError
from pipeline.kafka import create_consumer, create_producer, ensure_topics
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

RETRY_BUDGET_S: Final = 60.0
"""How long one batch's write is retried before the consumer is rewound (well below aiokafka's
``max_poll_interval_ms`` of 300 s, so the group keeps the sink)."""
RETRY_MIN_S: Final = 0.5
RETRY_MAX_S: Final = 15.0
SUMMARY_EVERY_S: Final = 10.0
Item = tuple[Record, LineEnvelope | JobEvent]


@dataclass(frozen=True)
class BatchReport:
    """What :meth:`Sink.run_once` did with one batch.

    Attributes:
        records: Records fetched (0: nothing arrived within ``sink_batch_wait_ms``).
        lines, events: Records archived from each topic.
        dead_lettered: Records sent to the dead-letter topic.
        outcome: The writer's report (None when the batch was split or empty).
        committed: Whether the batch's offsets were committed.
    """

    records: int
    lines: int = 0
    events: int = 0
    dead_lettered: int = 0
    outcome: BatchOutcome | None = None
    committed: bool = False


class Sink:
    """A batched consumer of ``chat.lines`` and ``chat.job-events`` writing the archive.

    Args:
        settings: Kafka, topics, group, batching and database settings.
        writer: The archive writer; by default one with its own engine, closed by :meth:`stop`.
        retry_budget_s: Seconds one batch's write is retried while PostgreSQL is unavailable.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        writer: ArchiveWriter | None = None,
        retry_budget_s: float = RETRY_BUDGET_S,
    ) -> None:
        self._settings = settings
        self._writer = writer
        self._owns_writer = writer is None
        self._retry_budget_s = retry_budget_s
        self._lines_topic = settings.topic(wire.TOPIC_LINES)
        self._events_topic = settings.topic(wire.TOPIC_JOB_EVENTS)
        self._dlq_topic = settings.topic(wire.TOPIC_LINES_DLQ)
        self._consumer: Any = None
        self._producer: Any = None
        self._stopping = asyncio.Event()
        self._stats = _Stats()

    def __repr__(self) -> str:
        s = self._stats
        return (
            f"<Sink group={self._settings.sink_group} batches={s.batches} lines={s.lines} "
            f"events={s.events} dead_lettered={s.dead_lettered}>"
        )

    async def start(self) -> None:
        """Creates the topics if missing and starts the consumer and the dead-letter producer.

        Raises:
            RecordDeliveryError: Kafka cannot be reached.
        """
        topics = (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ)
        await ensure_topics(self._settings, topics)
        if self._writer is None:
            self._writer = ArchiveWriter.from_settings(self._settings)
        self._producer = create_producer(self._settings, client_id="chatscribe-sink")
        await self._producer.start()
        self._consumer = create_consumer(
            self._settings,
            self._lines_topic,
            self._events_topic,
            group_id=self._settings.sink_group,
            client_id="chatscribe-sink",
        )
        await self._consumer.start()
        logger.info(
            "sink started group=%s topics=%s,%s",
            self._settings.sink_group,
            self._lines_topic,
            self._events_topic,
        )

    async def stop(self) -> None:
        """Stops the consumer (without committing) and the producer; closes an owned writer."""
        self._stopping.set()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()
        if self._owns_writer and self._writer is not None:
            self._writer.close()
        logger.info("sink stopped %r", self)

    def request_stop(self) -> None:
        """Asks :meth:`run` to return after the batch in progress (signal-handler safe)."""
        self._stopping.set()

    async def run(self) -> None:
        """Archives batches until :meth:`request_stop`; transient failures pause and retry.

        Raises:
            PermanentError: A failure no retry can fix (e.g. a missing table).
        """
        while not self._stopping.is_set():
            try:
                await self.run_once()
            except TransientError as exc:
                logger.warning("batch not archived, will read it again: %s", exc)
                await self._pause(RETRY_MIN_S)
            if self._stats.summary_due():
                self._stats.log_summary(await self._lag())

    async def run_once(self, *, commit: bool = True) -> BatchReport:
        """Fetches one batch, archives it and (unless ``commit=False``) commits its offsets.

        Args:
            commit: False leaves the offsets uncommitted, as a sink killed after the database
                commit would (tests of the restart semantics).

        Returns:
            What happened to the batch.

        Raises:
            ArchiveUnavailableError: PostgreSQL stayed unavailable for ``retry_budget_s``;
                the consumer was rewound to the batch.
            RecordDeliveryError: A dead letter was not acknowledged; the consumer was rewound.
        """
        batches = await self._consumer.getmany(
            timeout_ms=self._settings.sink_batch_wait_ms,
            max_records=self._settings.sink_batch_max_records,
        )
        records = [record for part in batches.values() for record in part]
        if not records:
            return BatchReport(records=0)
        try:
            report = await self._archive(records)
        except TransientError:
            self._rewind(batches)
            raise
        committed = await self._commit(batches) if commit else False
        self._stats.add(report)
        return dataclasses.replace(report, committed=committed)

    async def _archive(self, records: Sequence[Record]) -> BatchReport:
        """Decodes and writes a batch, then dead-letters what could not be archived."""
        items, dead = self._decode(records)
        lines = [value for _, value in items if isinstance(value, LineEnvelope)]
        events = [value for _, value in items if isinstance(value, JobEvent)]
        outcome: BatchOutcome | None = None
        try:
            if items:
                outcome = await self._write(lines, events)
        except ArchiveRejectedError as exc:
            logger.warning("batch refused by PostgreSQL, splitting it: %s", exc)
            refused = await self._bisect(items)
            dead += refused
            gone = {id(record) for record, _ in refused}
            kept = [value for record, value in items if id(record) not in gone]
            lines = [value for value in kept if isinstance(value, LineEnvelope)]
            events = [value for value in kept if isinstance(value, JobEvent)]
        await self._dead_letter(dead)
        return BatchReport(
            records=len(records),
            lines=len(lines),
            events=len(events),
            dead_lettered=len(dead),
            outcome=outcome,
        )

    def _decode(self, records: Sequence[Record]) -> tuple[list[Item], list[tuple[Record, str]]]:
        items: list[Item] = []
        dead: list[tuple[Record, str]] = []
        for record in records:
            try:
                items.append((record, self._decode_one(record)))
            except (LineRecordError, ValueError) as exc:
                dead.append((record, f"{type(exc).__name__}: {exc}"))
        return items, dead

    def _decode_one(self, record: Record) -> LineEnvelope | JobEvent:
        value: LineEnvelope | JobEvent
        if record.topic == self._lines_topic:
            value = LineEnvelope.from_record(record.key, record.value, record.headers)
            problem = refusal(value.job_id, value.attempt, value.line_no)
        elif record.topic == self._events_topic:
            value = JobEvent.from_value(record.value or b"")
            problem = refusal(value.job_id, value.attempt, value.line_count or 0)
        else:
            raise ValueError(f"record from unexpected topic {record.topic}")
        if problem is not None:
            raise ValueError(problem)
        return value

    async def _write(self, lines: list[LineEnvelope], events: list[JobEvent]) -> BatchOutcome:
        """Writes in a worker thread, retrying while PostgreSQL is unavailable."""
        writer = self._writer
        assert writer is not None, "Sink.start() first"
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(ArchiveUnavailableError),
            wait=wait_exponential(multiplier=RETRY_MIN_S, max=RETRY_MAX_S),
            stop=stop_after_delay(self._retry_budget_s),
            sleep=self._pause,
            before_sleep=_log_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if self._stopping.is_set() and attempt.retry_state.attempt_number > 1:
                    raise ArchiveUnavailableError("sink stopping while PostgreSQL is unavailable")
                return await asyncio.to_thread(writer.write_batch, lines, events)
        raise AssertionError("unreachable: tenacity reraises")

    async def _bisect(self, items: list[Item]) -> list[tuple[Record, str]]:
        """Writes ``items`` in halves until single refused records remain.

        Returns:
            The refused records with their reasons (to dead-letter).
        """
        lines = [v for _, v in items if isinstance(v, LineEnvelope)]
        events = [v for _, v in items if isinstance(v, JobEvent)]
        try:
            await self._write(lines, events)
            return []
        except ArchiveRejectedError as exc:
            if len(items) == 1:
                return [(items[0][0], f"archive refused the record: {exc}")]
        middle = len(items) // 2
        return await self._bisect(items[:middle]) + await self._bisect(items[middle:])

    async def _dead_letter(self, dead: Sequence[tuple[Record, str]]) -> None:
        await send_dead_letters(self._producer, self._dlq_topic, dead)

    async def _commit(self, batches: dict[Any, list[Record]]) -> bool:
        offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            logger.warning(
                "offsets not committed (rebalance); the batch is archived and will "
                "be absorbed when read again: %r",
                exc,
            )
            return False
        return True

    def _rewind(self, batches: dict[Any, list[Record]]) -> None:
        for tp, records in batches.items():
            try:
                self._consumer.seek(tp, records[0].offset)
            except IllegalStateError:
                logger.info(
                    "partition revoked before rewind topic=%s partition=%d", tp.topic, tp.partition
                )

    async def _pause(self, seconds: float) -> None:
        """Sleeps ``seconds`` or until a stop is requested, whichever comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    async def _lag(self) -> int | None:
        """Returns: records behind the high watermark over the assigned partitions, if known."""
        total = 0
        try:
            for tp in self._consumer.assignment():
                highwater = self._consumer.highwater(tp)
                if highwater is None:
                    return None
                total += max(highwater - await self._consumer.position(tp), 0)
        except (IllegalStateError, KafkaError):
            return None  # rebalancing: no figure this time
        return total


class _Stats:
    """Counters for ``__repr__`` and the periodic summary line."""

    def __init__(self) -> None:
        self.batches = self.lines = self.events = self.dead_lettered = 0
        self._since = time.monotonic()
        self._lines_since = 0

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        self.lines += report.lines
        self.events += report.events
        self.dead_lettered += report.dead_lettered
        self._lines_since += report.lines

    def summary_due(self) -> bool:
        return time.monotonic() - self._since >= SUMMARY_EVERY_S

    def log_summary(self, lag: int | None) -> None:
        elapsed = max(time.monotonic() - self._since, 1e-9)
        logger.info(
            "sink progress lines_per_s=%.0f batches=%d lines=%d events=%d dead_lettered=%d lag=%s",
            self._lines_since / elapsed,
            self.batches,
            self.lines,
            self.events,
            self.dead_lettered,
            "unknown" if lag is None else lag,
        )
        self._since, self._lines_since = time.monotonic(), 0


def _log_retry(state: RetryCallState) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    logger.warning(
        "archive unavailable, retrying attempt=%d wait_s=%.1f error=%s",
        state.attempt_number,
        state.upcoming_sleep,
        error,
    )


def run_sink(settings: Settings) -> None:
    """Runs a sink until SIGTERM or SIGINT (blocking); the batch in progress is finished and
    committed before it returns.

    Raises:
        PermanentError: A failure no retry can fix.
        RecordDeliveryError: Kafka cannot be reached at start.
    """
    asyncio.run(_serve(settings))


async def _serve(settings: Settings) -> None:
    sink = Sink(settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, sink.request_stop)
    try:
        await sink.start()
        await sink.run()
    finally:
        await sink.stop()
