"""The sink: archive ``chat.lines`` and ``chat.job-events`` into PostgreSQL, effectively once.

One aiokafka consumer (group ``settings.sink_group``, no auto-commit) reads both topics in
batches (``getmany``). Per batch (design.md, "Flow"):

1. decode every record (:meth:`LineEnvelope.from_record`, :meth:`JobEvent.from_value`); the
   next batch is fetched and decoded meanwhile, while this one is written
   (:mod:`pipeline.sink.prefetch`: one batch ahead, written and committed strictly after);
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
loop tries again, so nothing is dropped or committed early. When PostgreSQL refuses a value, or
writing the batch fails any other way that is not an outage or a missing schema (a record no
retry could archive: a poison pill), the batch is split in halves until the failing records are
found; they are dead-lettered with their error and the rest is archived, so one record never
stops the consumer group.

:func:`run_sink` runs the loop until SIGTERM or SIGINT, then finishes the current batch,
commits and returns. Tests drive a :class:`Sink` with :meth:`Sink.start`, :meth:`Sink.run_once`
and :meth:`Sink.stop`. With ``settings.sink_metrics_port`` set, :func:`run_sink` serves the
Prometheus metrics of :mod:`pipeline.sink.metrics`. After the write, the batch's unpublished
answers go to ``chat.answers`` (:mod:`pipeline.sink.answers`) and, with
``settings.otel_endpoint`` set, its normalised attempts to an OTLP endpoint as traces (best
effort, :mod:`pipeline.sink.traces`).

Why idempotent writes plus commit-after-write, and not offsets stored in PostgreSQL (issue 4,
"Delivery"):

* the archive must be idempotent on (job, attempt, line number) anyway: a line reaches
  ``chat.lines`` twice when a worker retries a delivery or a dead letter is replayed
  (``chatscribe dlq replay``); stored offsets would add a mechanism without removing one;
* offsets kept in Kafka stay the one truth that standard tools and the lag metric read, and a
  rebalance needs no listener seeking to offsets read from PostgreSQL;
* the price is bounded: after a crash at most the uncommitted batch is read again and absorbed
  by ``ON CONFLICT DO NOTHING`` (about 2/3 of ``COPY``'s rate, ``notes/measurements.md``).

Several sinks share the partitions through the consumer group (``settings.sink_group``);
per-job advisory locks (:mod:`pipeline.archive.jobs`) keep them from interleaving one job.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import Sequence
from typing import Any, Final

import uvloop
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline import collector
from pipeline import metrics as pipeline_metrics
from pipeline.archive.writer import ArchiveWriter, BatchOutcome
from pipeline.errors import (
    ArchiveRejectedError,
    ArchiveSchemaError,
    ArchiveUnavailableError,
    PartitionsRevokedError,
    TransientError,
)
from pipeline.kafka import consumer as kafka_consumer
from pipeline.kafka.clients import create_consumer, create_producer, ensure_topics
from pipeline.kafka.dead_letters import send_dead_letters
from pipeline.kafka.lag import GroupOffsets, assigned_lag
from pipeline.kafka.stall import STALL_CHECK_S, StallWatch
from pipeline.settings import Settings
from pipeline.sink import metrics
from pipeline.sink.answers import AnswerPublisher
from pipeline.sink.decode import Dead, Item, invalid_record
from pipeline.sink.prefetch import (
    LINGER_UNTIL_RECORDS,
    Batches,
    Fetched,
    Prefetcher,
    fetch,
    rewind_offsets,
)
from pipeline.sink.traces import TracePublisher

__all__ = ["BatchReport", "Sink", "run_sink"]

logger = logging.getLogger(__name__)

RETRY_BUDGET_S: Final = 60.0
"""How long one batch's write is retried before the consumer is rewound (well below aiokafka's
``max_poll_interval_ms`` of 300 s, so the group keeps the sink)."""
RETRY_MIN_S: Final = 0.5
RETRY_MAX_S: Final = 15.0
SINK_FETCH_MIN_BYTES: Final = 64 * 1024
SINK_FETCH_MAX_WAIT_MS: Final = 50
"""The broker answers the sink's fetch once it holds this many bytes for it, or after this
long (aiokafka's defaults, 1 byte and 500 ms, answer each fetch as soon as one record is there).
At LLM-paced rates a line is ~300 bytes: with the defaults the sink's linger loop fetched a few
lines per request, each request costing the broker and the sink CPU (at C=200 the broker spent
31 µs of CPU per line, issue 13); 50 ms is well inside the sink's 200 ms linger."""
LAG_EVERY_S: Final = 1.0
"""Least seconds between two updates of the consumer-lag gauge."""
REJOIN_STOP_S: Final = 10.0
"""How long a stalled consumer is given to leave the group before it is abandoned."""


@dataclasses.dataclass(frozen=True)
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
        self._answers: AnswerPublisher | None = None
        self._traces: TracePublisher | None = None
        self._stats = metrics.SinkStats()
        self._lag_at = 0.0
        self._prefetch: Prefetcher | None = None
        self._slow = True
        self._batch: asyncio.Task[BatchReport] | None = None
        self._writing: set[tuple[str, int]] = set()
        self._rejoining = False

    def __repr__(self) -> str:
        s = self._stats
        return (
            f"<Sink group={self._settings.sink_group} batches={s.batches} lines={s.lines} "
            f"events={s.events} dead_lettered={s.dead_lettered} rejoins={s.rejoins}>"
        )

    @property
    def stats(self) -> metrics.SinkStats:
        """Counters of what this sink archived (batches, lines, events, dead letters)."""
        return self._stats

    def assigned(self) -> set[tuple[str, int]]:
        """Returns: the ``(topic, partition)`` pairs the group gave this sink.

        Empty before its first fetch and during a rebalance.
        """
        if self._consumer is None:
            return set()
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    async def start(self) -> None:
        """Creates the topics if missing and starts the consumer and the dead-letter producer.

        Raises:
            RecordDeliveryError: Kafka cannot be reached.
        """
        topics = (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ, wire.TOPIC_ANSWERS)
        await ensure_topics(self._settings, topics)
        if self._writer is None:
            self._writer = ArchiveWriter.from_settings(self._settings)
        self._producer = create_producer(self._settings, client_id="chatscribe-sink")
        await self._producer.start()
        self._answers = AnswerPublisher(
            self._writer.engine, self._settings.topic(wire.TOPIC_ANSWERS), self._producer
        )
        if self._settings.otel_endpoint is not None:
            self._traces = TracePublisher(self._settings)
        self._consumer = self._new_consumer()
        await self._consumer.start()
        self._prefetch = Prefetcher(self._consumer, self._fetch)
        logger.info(
            "sink started group=%s topics=%s,%s",
            self._settings.sink_group,
            self._lines_topic,
            self._events_topic,
        )

    def _new_consumer(self) -> Any:
        return create_consumer(
            self._settings,
            self._lines_topic,
            self._events_topic,
            group_id=self._settings.sink_group,
            client_id="chatscribe-sink",
            fetch_min_bytes=SINK_FETCH_MIN_BYTES,
            fetch_max_wait_ms=SINK_FETCH_MAX_WAIT_MS,
        )

    async def stop(self) -> None:
        """Stops the consumer (without committing) and the producer; closes an owned writer."""
        self._stopping.set()
        if self._prefetch is not None:
            await self._prefetch.cancel()  # fetched ahead, never written: read again later
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()
        if self._owns_writer and self._writer is not None:
            self._writer.close()
        if self._traces is not None:
            self._traces.close()
        logger.info("sink stopped %r", self)

    def request_stop(self) -> None:
        """Asks :meth:`run` to return after the batch in progress (signal-handler safe)."""
        self._stopping.set()

    async def run(self) -> None:
        """Archives batches until :meth:`request_stop`; transient failures pause and retry.

        A watchdog (:meth:`_watch_stalls`) rejoins the group when its partitions stall.

        Raises:
            PermanentError: A failure no retry can fix (e.g. a missing table).
        """
        watchdog = asyncio.create_task(self._watch_stalls(), name="sink-stall-watchdog")
        try:
            await self._run_batches()
        finally:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
        if self._prefetch is not None and self._prefetch.pending:
            with contextlib.suppress(TransientError):  # not committed: read again later
                await self.run_once()  # the batch fetched ahead (none is fetched when stopping)

    async def _run_batches(self) -> None:
        while not self._stopping.is_set():
            self._batch = asyncio.create_task(self.run_once())
            try:
                await self._batch
            except TransientError as exc:
                logger.warning("batch not archived, will read it again: %s", exc)
                await self._pause(RETRY_MIN_S)
            except asyncio.CancelledError:
                if not self._rejoining:
                    raise
            finally:
                self._batch = None
            if self._rejoining:  # the watchdog cancelled the batch (or it ended just before)
                await self._rejoin()
            if self._stats.summary_due():
                self._stats.log_summary(await self._lag(publish=True))

    async def _watch_stalls(self) -> None:
        """Every :data:`STALL_CHECK_S`, asks the group's offsets whether its partitions stalled.

        The rule: :mod:`pipeline.kafka.stall` (in flight: the partitions of the batch being
        written), on the partitions assigned to this sink, or on all of the group's while it
        holds none. On a stall the batch in progress (waiting on a fetch or a commit that does
        not come) is cancelled and :meth:`_rejoin` replaces the consumer: its client starts
        with fresh metadata. (aiokafka 0.14 resets a partition's position with ListOffsets to
        the leader its metadata names and, on ``NotLeaderForPartitionError``, retries the same
        node without refreshing the metadata: after a broker's pause moved the leadership, a
        partition can wait for the periodic refresh, ``metadata_max_age_ms``, 5 min.)
        """
        topics = (self._lines_topic, self._events_topic)
        offsets = GroupOffsets(
            self._settings,
            group=self._settings.sink_group,
            topics=topics,
            timeout_s=STALL_CHECK_S,
        )
        watch = StallWatch(self._settings.sink_stall_timeout_s)
        try:
            while True:
                await asyncio.sleep(STALL_CHECK_S)
                found = await offsets.read()
                if found is None:
                    continue
                assigned = self.assigned()
                if assigned:  # none: a member the group may have forgotten watches them all
                    found = {tp: seen for tp, seen in found.items() if tp in assigned}
                stalled = watch.observe(time.monotonic(), found, busy=self._writing)
                if stalled and self._batch is not None and not self._rejoining:
                    logger.warning(
                        "sink stalled: partitions without progress while records wait, "
                        "rejoining the group group=%s stalled=%s timeout_s=%g",
                        self._settings.sink_group,
                        _named(stalled),
                        self._settings.sink_stall_timeout_s,
                    )
                    pipeline_metrics.STALLS.labels(process="sink").inc()
                    self._rejoining = True
                    self._batch.cancel()
                    watch.forget()
        finally:
            await offsets.stop()

    async def _rejoin(self) -> None:
        """Replaces the consumer: a new member joins the group from the committed offsets.

        The batch fetched ahead is dropped (never committed: read again). The old consumer is
        given :data:`REJOIN_STOP_S` to leave the group; one that does not is abandoned (the
        coordinator drops it after its session timeout).
        """
        try:
            if self._prefetch is not None:
                await self._prefetch.cancel()
            old, self._consumer = self._consumer, self._new_consumer()
            try:
                async with asyncio.timeout(REJOIN_STOP_S):
                    await old.stop()
            except Exception as exc:  # a consumer that cannot leave is abandoned
                logger.warning("stalled consumer not stopped cleanly error=%r", exc)
            await self._consumer.start()
            self._prefetch = Prefetcher(self._consumer, self._fetch)
            self._stats.rejoins += 1
            logger.info("sink rejoined group=%s", self._settings.sink_group)
        finally:
            self._rejoining = False

    async def run_once(self, *, commit: bool = True) -> BatchReport:
        """Archives one batch and (unless ``commit=False``) commits its offsets.

        The batch is the one fetched ahead, or one fetched now; fetching the next one starts
        meanwhile (:mod:`pipeline.sink.prefetch`).

        Args:
            commit: False leaves the offsets uncommitted, as a sink killed after the database
                commit would (tests of the restart semantics).

        Returns:
            What happened to the batch.

        Raises:
            ArchiveUnavailableError: PostgreSQL stayed unavailable for ``retry_budget_s``;
                the consumer was rewound to the batch (and to the batch fetched ahead).
            RecordDeliveryError: A dead letter was not acknowledged; the consumer was rewound.
        """
        assert self._prefetch is not None, "Sink.start() first"
        fetched = await self._prefetch.take() or await self._fetch()
        if not fetched.records:
            return BatchReport(records=0)
        if not self._stopping.is_set():
            self._prefetch.start()
        metrics.BATCH_RECORDS.observe(fetched.records)
        self._writing = {(tp.topic, tp.partition) for tp in fetched.batches}
        try:
            report = await self._archive(fetched)
        except TransientError:
            self._rewind(rewind_offsets(fetched, await self._prefetch.cancel()))
            raise
        finally:
            self._writing = set()
        committed = await self._commit(fetched.batches) if commit else False
        metrics.BATCHES.labels(committed=str(committed).lower()).inc()
        self._stats.add(report)
        if time.monotonic() - self._lag_at >= LAG_EVERY_S:
            await self._lag(publish=True)
        return dataclasses.replace(report, committed=committed)

    async def _fetch(self) -> Fetched:
        """Fetches a batch, lingering for more only while the records come slowly.

        It lingers only when the previous batch was small too, so the tail of a burst is not held
        back.
        """
        fetched = await fetch(
            self._consumer,
            wait_ms=self._settings.sink_batch_wait_ms,
            max_records=self._settings.sink_batch_max_records,
            lines_topic=self._lines_topic,
            events_topic=self._events_topic,
            linger_ms=self._settings.sink_batch_linger_ms if self._slow else 0,
        )
        self._slow = fetched.records < LINGER_UNTIL_RECORDS
        return fetched

    async def _archive(self, fetched: Fetched) -> BatchReport:
        """Writes a decoded batch, then dead-letters what could not be archived."""
        items, dead = fetched.items, list(fetched.dead)
        lines, events = fetched.lines, fetched.events
        outcome: BatchOutcome | None = None
        try:
            if items:
                outcome = await self._write(lines, events)
        except (TransientError, ArchiveSchemaError):
            raise
        except Exception as exc:  # a record no retry archives (a poison pill): isolate it
            logger.warning("batch not archived, splitting it to isolate the record: %r", exc)
            refused = await self._bisect(items)
            dead += refused
            gone = {id(record) for record, _ in refused}
            kept = [value for record, value in items if id(record) not in gone]
            lines = [value for value in kept if isinstance(value, LineEnvelope)]
            events = [value for value in kept if isinstance(value, JobEvent)]
        if self._answers is not None:  # after the DB commit, before the offsets (answers_topic)
            await self._answers.publish(lines, events)
        if self._traces is not None and outcome is not None:  # best effort (sink/traces.py)
            await self._traces.publish(outcome.normalised)
        await self._dead_letter(dead)
        return BatchReport(
            records=fetched.records,
            lines=len(lines),
            events=len(events),
            dead_lettered=len(dead),
            outcome=outcome,
        )

    async def _write(self, lines: list[LineEnvelope], events: list[JobEvent]) -> BatchOutcome:
        """Writes in a worker thread, retrying while PostgreSQL is unavailable."""
        writer = self._writer
        assert writer is not None, "Sink.start() first"
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(ArchiveUnavailableError),
            wait=wait_exponential(multiplier=RETRY_MIN_S, max=RETRY_MAX_S),
            stop=stop_after_delay(self._retry_budget_s),
            sleep=self._pause,
            before_sleep=metrics.log_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if self._stopping.is_set() and attempt.retry_state.attempt_number > 1:
                    raise ArchiveUnavailableError("sink stopping while PostgreSQL is unavailable")
                outcome = await asyncio.to_thread(writer.write_batch, lines, events)
                metrics.observe_write(
                    seconds=outcome.elapsed_s,
                    lines=outcome.lines,
                    lines_inserted=outcome.lines_inserted,
                    events=outcome.events,
                    events_inserted=outcome.events_inserted,
                    kept_bytes=outcome.kept_bytes,
                    folded_bytes=outcome.folded_bytes,
                    open_folds=outcome.open_folds,
                )
                return outcome
        raise AssertionError("unreachable: tenacity reraises")

    async def _bisect(self, items: list[Item]) -> list[Dead]:
        """Writes ``items`` in halves until single refused records remain.

        Returns:
            The refused records with their reasons (to dead-letter).
        """
        lines = [v for _, v in items if isinstance(v, LineEnvelope)]
        events = [v for _, v in items if isinstance(v, JobEvent)]
        try:
            await self._write(lines, events)
            return []
        except (TransientError, ArchiveSchemaError):
            raise
        except Exception as exc:  # the poison pill's own error is its reason
            if len(items) == 1:
                record = items[0][0]
                return [(record, invalid_record(record, _refusal(exc)))]
        middle = len(items) // 2
        return await self._bisect(items[:middle]) + await self._bisect(items[middle:])

    async def _dead_letter(self, dead: Sequence[Dead]) -> None:
        await send_dead_letters(self._producer, self._dlq_topic, dead)
        for record, _ in dead:
            source = "lines" if record.topic == self._lines_topic else "events"
            metrics.DEAD_LETTERS.labels(source=source).inc()

    async def _commit(self, batches: Batches) -> bool:
        committed = {tp: records[-1].offset + 1 for tp, records in batches.items()}
        try:
            await kafka_consumer.commit(self._consumer, committed)
        except PartitionsRevokedError as exc:
            logger.warning(
                "offsets not committed (rebalance); the batch is archived and will "
                "be absorbed when read again: %r",
                exc,
            )
            return False
        return True

    def _rewind(self, offsets: dict[Any, int]) -> None:
        for tp, offset in offsets.items():
            try:
                kafka_consumer.seek(self._consumer, tp, offset)
            except PartitionsRevokedError:
                logger.info(
                    "partition revoked before rewind topic=%s partition=%d", tp.topic, tp.partition
                )

    async def _pause(self, seconds: float) -> None:
        """Sleeps ``seconds`` or until a stop is requested, whichever comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    async def _lag(self, *, publish: bool = False) -> int | None:
        """Returns: records behind the high watermark over the assigned partitions, if known.

        Args:
            publish: Also set the per-partition lag gauge (:mod:`pipeline.sink.metrics`).
        """
        self._lag_at = time.monotonic()
        found = await assigned_lag(self._consumer)
        if found is None:
            return None
        if publish:
            metrics.set_lag(found)
        return sum(lag for _, _, lag in found)


def _refusal(exc: Exception) -> str:
    """Returns: why a record is dead-lettered, from the error that its write alone raised."""
    if isinstance(exc, ArchiveRejectedError):
        return f"archive refused the record: {exc}"
    return f"sink could not process the record: {type(exc).__name__}: {exc}"


def run_sink(settings: Settings) -> None:
    """Runs a sink until SIGTERM or SIGINT (blocking).

    The batch in progress is finished and committed before it returns.

    Raises:
        PermanentError: A failure no retry can fix.
        RecordDeliveryError: Kafka cannot be reached at start.
    """
    uvloop.run(_serve(settings))


async def _serve(settings: Settings) -> None:
    if settings.sink_metrics_port is not None:
        metrics.serve(settings.sink_metrics_port)
        logger.info("sink metrics served port=%d", settings.sink_metrics_port)
    sink = Sink(settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, sink.request_stop)
    try:
        await sink.start()
        collector.settle()  # the imports', engine's and consumer's objects (issue 13)
        await sink.run()
    finally:
        await sink.stop()


def _named(partitions: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{topic}/{partition}" for topic, partition in partitions)
