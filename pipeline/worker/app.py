"""The worker process: a faust app that runs the chat jobs of ``chat.requests``.

With :mod:`pipeline.worker.group` (its consumer group), the only module that imports faust (and
mode). Per record of ``chat.requests``:

1. parse it as a :class:`~models.records.ChatJob`; if it is not one, the original bytes go to
   ``chat.requests.dlq`` with the reason and source topic/partition/offset in headers;
2. a job whose chat URL the outbound policy refuses (not under ``chat_url_allow``, or the
   worker's own key asked for a URL outside ``api_key_urls``: :mod:`pipeline.chat.targets`)
   goes to ``chat.requests.dlq`` with the reason, and a ``failed`` event
   (``ChatUrlRefusedError``) tells the archive; the URL is never called;
3. otherwise its earlier attempts are looked up in its own events
   (:class:`~pipeline.worker.history.JobHistory`): a job that already has a final outcome is only
   acknowledged; a job another worker started and lost (SIGKILL, a partition handed over) is
   continued as the next attempt, fetching the thread's state when its chat id is known
   (:func:`pipeline.worker.attempts.plan_attempt`);
4. :class:`~pipeline.worker.job_runner.JobRunner` runs it: ``started``, every line to
``chat.lines``,
   ``first_line``, and one terminal event, all durable before it returns;
5. only then is the record acked, and only once every earlier record of its partition taken
   here has ended too (:mod:`pipeline.worker.ordered_acks`); faust commits acked offsets.

So a job's offset is committed only after its lines and terminal event are in Kafka
(at-least-once). On a rebalance faust waits for the running jobs to end and be acked
(``stream_wait_empty``) before it commits and gives the partitions up
(:mod:`pipeline.worker.group`); a job whose worker died is redelivered from the last committed
offset to the next owner.

An error of the job's own (HTTP, stream, bug) becomes a ``failed`` event and
never escapes the agent (faust would ack and drop the record silently). When Kafka itself does
not confirm the records, the worker crashes instead: the record stays unacknowledged and is
redelivered after a restart.

``chat.cancellations`` (key: job id) aborts a running job of this worker; the topic has as many
partitions as ``chat.requests``, so faust's co-partitioning assignor
(:class:`~pipeline.worker.group.BalancedAssignor`) gives a job's cancellation to the worker that
holds the job's partition.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Final, cast

import faust
import uvloop
from faust.types import EventT, StreamT
from mode import Service
from pydantic import ValidationError

from models import wire
from models.records import ChatJob, JobEvent
from pipeline import collector, metrics
from pipeline.chat.client import ChatClient
from pipeline.chat.targets import OutboundPolicy
from pipeline.errors import (
    ChatUrlRefusedError,
    InvalidJobError,
    PartitionsStalledError,
    RecordDeliveryError,
)
from pipeline.kafka.clients import (
    DEFAULT_PARTITIONS,
    LINES_LINGER_MS,
    JobOutput,
    cluster_replication,
    connection_options,
    create_producer,
    ensure_topics,
)
from pipeline.kafka.dead_letters import send_dead_letters
from pipeline.kafka.lag import LagReporter
from pipeline.kafka.stall import PartitionOffsets, StallWatch
from pipeline.settings import Settings
from pipeline.worker.admission import Admission
from pipeline.worker.attempts import PriorAttempts, superseded_event
from pipeline.worker.cancellations import Cancellations
from pipeline.worker.group import (
    BalancedAssignor,
    HandOver,
    add_rebalance_hooks,
    assignment,
    requeue,
)
from pipeline.worker.history import JobHistory, topic_partitions
from pipeline.worker.job_runner import ABORT_GRACE_S, JobControl, JobRunner, RetryPolicy
from pipeline.worker.ordered_acks import OrderedAcks

logger = logging.getLogger(__name__)

OUTPUT_TOPICS: Final = (
    wire.TOPIC_REQUESTS,
    wire.TOPIC_CANCELLATIONS,
    wire.TOPIC_LINES,
    wire.TOPIC_JOB_EVENTS,
    wire.TOPIC_REQUESTS_DLQ,
)
REBALANCE_MARGIN_S: Final = 30.0


class WorkerResources(Service):
    """What the agents share: the idempotent producer, the Chat API client, the job runner.

    Added to the app as its first dependency, so it starts before the agents and stops after
    them (faust drains running jobs first when ``stream_wait_empty`` is on).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        lag: LagReporter | None = None,
        handover: HandOver | None = None,
        on_stall: Callable[[PartitionsStalledError], Coroutine[Any, Any, None]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self._lag = lag
        self._stall = StallWatch(settings.worker_stall_timeout_s)
        self._on_stall = on_stall
        self.processing = 0
        """``chat.requests`` records being handled now (history lookup, admission, job)."""
        if lag is not None:
            lag.observer = self._observe_offsets
        self.handover = handover or HandOver(lambda: False)
        self._background: list[asyncio.Task[None]] = []
        self.worker_id = settings.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.cancellations = Cancellations()
        self._producer: Any = None
        self._lines_producer: Any = None
        self._client: ChatClient | None = None
        self._runner: JobRunner | None = None
        self.history = JobHistory(settings)
        self.admission = Admission(settings)
        self.outbound = OutboundPolicy.from_settings(settings)

    def __repr__(self) -> str:
        running = len(self.cancellations.running)
        return f"<WorkerResources worker_id={self.worker_id} running={running} {self.handover!r}>"

    async def on_start(self) -> None:
        """Creates the topics, starts the producer, opens the HTTP pool."""
        await ensure_topics(self.settings, OUTPUT_TOPICS, partitions=DEFAULT_PARTITIONS)
        self._producer = create_producer(self.settings, client_id=f"chatscribe-{self.worker_id}")
        await self._producer.start()
        self._lines_producer = create_producer(
            self.settings, client_id=f"chatscribe-{self.worker_id}-lines", linger_ms=LINES_LINGER_MS
        )
        await self._lines_producer.start()
        events_topic = self.settings.topic(wire.TOPIC_JOB_EVENTS)
        producer = self._producer
        partitions = await topic_partitions(
            lambda: producer.partitions_for(events_topic), topic=events_topic
        )
        await self.history.start(partitions)
        await self.admission.start()
        if self._lag is not None:
            self._background.append(asyncio.create_task(self._lag.run(), name="consumer-lag"))
        self._background.append(asyncio.create_task(self.handover.watch(), name="hand-over"))
        self._client = ChatClient(self.settings)
        self._runner = JobRunner(
            self._client,
            job_deadline_s=self.settings.job_deadline_s,
            worker_id=self.worker_id,
            max_attempts=self.settings.worker_max_attempts,
            retry=RetryPolicy(
                throttle_floor_s=self.settings.worker_throttle_floor_s,
                max_throttles=self.settings.worker_max_throttled,
            ),
            job_deadline_max_s=self.settings.job_deadline_max_s,
            max_attempt_lines=self.settings.worker_max_attempt_lines,
            max_attempt_bytes=self.settings.worker_max_attempt_bytes,
        )
        logger.info("worker resources started worker_id=%s", self.worker_id)

    async def on_stop(self) -> None:
        """Flushes and stops the producer, closes the HTTP pool."""
        if self._lines_producer is not None:
            await self._lines_producer.stop()
        if self._producer is not None:
            await self._producer.stop()
        if self._client is not None:
            await self._client.aclose()
        await self.history.stop()
        await self.admission.stop()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        logger.info("worker resources stopped worker_id=%s", self.worker_id)

    async def process(self, event: EventT[Any]) -> None:
        """Handles one ``chat.requests`` record: dead-letters it or runs its job.

        Errors of the job itself end as its ``failed`` event; only failures to write to Kafka
        (:class:`RecordDeliveryError`) are raised.
        """
        self.processing += 1
        try:
            await self._process(event)
        finally:
            self.processing -= 1

    def _observe_offsets(self, offsets: dict[tuple[str, int], PartitionOffsets]) -> None:
        """The stall watchdog: the assigned partitions' offsets after each lag refresh.

        The rule: :mod:`pipeline.kafka.stall` (in flight: a record being handled). A stall is
        logged, counted, and handed to ``on_stall`` (the app stops the worker).
        """
        stalled = self._stall.observe(time.monotonic(), offsets, in_flight=self.processing > 0)
        if not stalled:
            return
        error = PartitionsStalledError(
            partitions=stalled, timeout_s=self.settings.worker_stall_timeout_s
        )
        logger.warning("worker stalled worker_id=%s error=%s", self.worker_id, error)
        metrics.STALLS.labels(process="worker").inc()
        if self._on_stall is not None:
            self._background.append(asyncio.create_task(self._on_stall(error)))

    async def _process(self, event: EventT[Any]) -> None:
        message = event.message
        value: bytes = message.value or b""
        try:
            job = ChatJob.from_value(value)
        except ValidationError as exc:
            reason = f"invalid chat job: {_summary(exc)}"
            await self._dead_letter(
                event,
                InvalidJobError(
                    reason, topic=message.topic, partition=message.partition, offset=message.offset
                ),
            )
            return
        self._check_key(job, message.key)
        refused = self.outbound.refusal(job.chat_url, own_key=job.api_key is None)
        if refused is not None:
            await self._refuse(event, job, refused)
            return
        prior = await self.history.prior(job.job_id, submitted_ms=int(message.timestamp * 1000))
        try:
            await self._run(job, prior, message)
        except RecordDeliveryError:
            raise
        except Exception as exc:
            logger.exception("job crashed job_id=%s error=%r", job.job_id, exc)
            await self._report_crash(job, exc, attempt=prior.attempt + 1)

    async def _run(self, job: ChatJob, prior: PriorAttempts, message: Any) -> None:
        assert self._runner is not None, "WorkerResources not started"
        output = JobOutput(
            self._producer, self.settings, job.job_id, lines_producer=self._lines_producer
        )
        if prior.attempt and not prior.open:
            logger.info("job already finished job_id=%s attempt=%s", job.job_id, prior.attempt)
            return
        await self._close_lost_attempt(job, prior)
        if await self._skipped_early(job, output, prior):
            return
        async with self.admission.admitted(job) as ticket:  # pipeline.worker.admission
            if await self._skipped_early(job, output, prior):  # cancelled while it waited
                return
            control = JobControl(observer=ticket)
            self.cancellations.running[job.job_id] = control
            try:
                run = self._runner.run_job(job, output, prior=prior, control=control)
                if not await self.handover.run(job.job_id, run):
                    await requeue(self._producer, message)  # before the original is acked
            finally:
                self.cancellations.running.pop(job.job_id, None)

    async def _skipped_early(self, job: ChatJob, output: JobOutput, prior: PriorAttempts) -> bool:
        """Records ``job`` aborted when it was cancelled before it started. Returns: whether."""
        assert self._runner is not None, "WorkerResources not started"
        early = self.cancellations.take_early(job.job_id)
        if early is None:
            return False
        reason = f"{early} before start"
        await self._runner.skip(job, output, reason=reason, attempt=prior.attempt + 1)
        return True

    async def _close_lost_attempt(self, job: ChatJob, prior: PriorAttempts) -> None:
        """Records the lost attempt as superseded before the next one starts (durably)."""
        event = superseded_event(
            prior, job_id=job.job_id, run_id=job.run_id, worker_id=self.worker_id
        )
        if event is None:
            return
        logger.info("attempt superseded job_id=%s attempt=%s", job.job_id, event.attempt)
        output = JobOutput(self._producer, self.settings, job.job_id)
        await output.send_event(event)
        await output.delivered()

    async def _report_crash(self, job: ChatJob, exc: Exception, *, attempt: int) -> None:
        """Best effort: a ``failed`` event for a job whose run raised unexpectedly."""
        event = JobEvent(
            job_id=job.job_id,
            run_id=job.run_id,
            kind="failed",
            attempt=attempt,
            error=str(exc) or repr(exc),
            error_type=type(exc).__name__,
            worker_id=self.worker_id,
        )
        output = JobOutput(self._producer, self.settings, job.job_id)
        await output.send_event(event)
        await output.delivered()

    async def _refuse(self, event: EventT[Any], job: ChatJob, refused: ChatUrlRefusedError) -> None:
        """Dead-letters a job whose chat URL is refused, and records it ``failed``."""
        message = event.message
        error = InvalidJobError(
            str(refused), topic=message.topic, partition=message.partition, offset=message.offset
        )
        await self._dead_letter(event, error)
        await self._report_crash(job, refused, attempt=1)

    async def _dead_letter(self, event: EventT[Any], error: InvalidJobError) -> None:
        topic = self.settings.topic(wire.TOPIC_REQUESTS_DLQ)
        await send_dead_letters(self._producer, topic, [(event.message, error)])
        metrics.DEAD_LETTERS.inc()

    @staticmethod
    def _check_key(job: ChatJob, key: bytes | None) -> None:
        if key is not None and key != job.job_id.encode():
            logger.warning("record key is not the job id job_id=%s key=%r", job.job_id, key)


def broker_credentials(settings: Settings) -> faust.auth.Credentials | None:
    """Returns: faust's form of :func:`pipeline.kafka.clients.connection_options` (None: PLAINTEXT).

    faust's aiokafka driver turns these into the same ``security_protocol``, ``ssl_context``
    and SASL options as the pipeline's own clients (``credentials_to_aiokafka_auth``).
    """
    options = connection_options(settings)
    protocol = options["security_protocol"]
    if protocol == "SSL":
        return faust.SSLCredentials(options["ssl_context"])
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(
            username=options["sasl_plain_username"],
            password=options["sasl_plain_password"],
            ssl_context=options.get("ssl_context"),
            mechanism=options["sasl_mechanism"],
        )
    return None


def create_app(settings: Settings, *, replication_factor: int | None = None) -> faust.App:
    """Builds the worker's faust app (not started).

    Args:
        settings: Kafka address, topic prefix, consumer group (``worker_group``), concurrency,
            record size and deadlines.
        replication_factor: Replicas of the topics faust creates (its partition-assignment
            leader topic; ours exist before it starts, :func:`run_worker`); None:
            ``settings.kafka_replication_factor`` or 1.

    Returns:
        A faust app with the ``chat.requests`` agent (``worker_concurrency`` jobs at once) and
        the ``chat.cancellations`` agent; no web server, in-memory store, raw keys and values.
    """
    hard_limit_s = settings.job_deadline_s + ABORT_GRACE_S + REBALANCE_MARGIN_S
    session_s = settings.worker_session_timeout_s
    app = faust.App(
        settings.worker_group,
        broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",")],
        autodiscover=False,
        datadir=Path(tempfile.gettempdir()) / f"chatscribe-faust-{settings.worker_group}",
        web_enabled=False,
        store="memory://",
        topic_partitions=DEFAULT_PARTITIONS,
        topic_replication_factor=replication_factor or settings.kafka_replication_factor or 1,
        broker_credentials=broker_credentials(settings),
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        consumer_max_fetch_size=settings.max_record_bytes,
        producer_max_request_size=settings.max_record_bytes,
        producer_acks=-1,
        broker_commit_every=1,
        broker_commit_interval=0.5,
        # faust's aiokafka driver uses the app's (co-partitioning) assignor only when this is
        # above 0 or the app has tables; BalancedAssignor then ignores it.
        table_standby_replicas=1,
        PartitionAssignor=BalancedAssignor,
        stream_wait_empty=True,
        stream_processing_timeout=hard_limit_s,
        broker_rebalance_timeout=hard_limit_s,
        broker_session_timeout=session_s,
        broker_heartbeat_interval=min(3.0, session_s / 6),
        broker_request_timeout=max(90.0, session_s * 1.5),
    )
    requests = settings.topic(wire.TOPIC_REQUESTS)
    lag = LagReporter(settings, assignment(app, requests))
    handover = HandOver(lambda: bool(app.rebalancing or app.should_stop))
    resources = WorkerResources(
        settings, lag=lag, handover=handover, on_stall=lambda exc: _crash(app, exc)
    )
    app.add_dependency(resources)
    _add_agents(app, settings, resources)
    add_rebalance_hooks(app, resources.history, worker_id=resources.worker_id, topic=requests)
    return app


def _add_agents(app: faust.App, settings: Settings, resources: WorkerResources) -> None:
    requests = app.topic(settings.topic(wire.TOPIC_REQUESTS), partitions=DEFAULT_PARTITIONS)
    cancellations = app.topic(
        settings.topic(wire.TOPIC_CANCELLATIONS), partitions=DEFAULT_PARTITIONS
    )

    acks: OrderedAcks[EventT[Any]] = OrderedAcks()

    @app.agent(requests, name="chat-jobs", concurrency=settings.worker_concurrency)
    async def chat_jobs(stream: StreamT[Any]) -> None:
        # Manual acks: a record is acked only after its job's records are durable, and only
        # once every earlier record of its partition is (pipeline.worker.ordered_acks).
        manual: StreamT[Any] = cast(faust.Stream[Any], stream).noack()
        async for event in manual.events():
            tp, offset = event.message.tp, event.message.offset
            acks.begin(tp, offset)
            try:
                await resources.process(event)
            except RecordDeliveryError as exc:
                await _crash(app, exc)
                return  # without acking: the record is redelivered after a restart
            except Exception as exc:  # a bug: log it, and do not hold the partition back
                logger.exception("chat.requests record dropped error=%r", exc)
            for done in acks.finish(tp, offset, event):
                await manual.ack(done)

    @app.agent(cancellations, name="chat-cancellations")
    async def chat_cancellations(stream: StreamT[Any]) -> None:
        async for event in stream.events():
            resources.cancellations.receive(event.message.key, event.message.value)


async def _crash(app: faust.App, exc: RecordDeliveryError | PartitionsStalledError) -> None:
    """Stops the worker (exit code 1); the caller leaves the current record unacknowledged."""
    reason = "kafka did not confirm records" if isinstance(exc, RecordDeliveryError) else "stalled"
    logger.critical("%s; stopping the worker error=%r", reason, exc)
    await app.crash(exc)


def run_worker(settings: Settings, *, loglevel: str = "info") -> None:
    """Runs a worker until SIGINT/SIGTERM (blocking; for ``chatscribe worker``).

    Starts faust's worker programmatically, so faust parses no command line. Logging already
    configured by the caller (the CLI) is kept; otherwise faust configures it at ``loglevel``.
    Serves Prometheus metrics on ``settings.metrics_port`` when it is set.

    Raises:
        SystemExit: With a non-zero code when the worker crashed.
    """
    loop = uvloop.new_event_loop()  # libuv: cheaper reads and timers per stream (issue 13)
    asyncio.set_event_loop(loop)
    # Every topic the worker reads or writes is created here, replicated for the cluster
    # (pipeline.kafka.clients.replication_for), before faust could create one with its own.
    loop.run_until_complete(ensure_topics(settings, wire.ALL_TOPICS))
    replication = loop.run_until_complete(cluster_replication(settings))
    app = create_app(settings, replication_factor=replication.factor)
    if settings.metrics_port is not None:
        metrics.serve(settings.metrics_port)
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=loglevel,
        quiet=True,
        redirect_stdouts=False,
        override_logging=not logging.getLogger().handlers,
    )
    collector.settle()  # the imports' and the app's objects: never scanned again (issue 13)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise


def _summary(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "value"
        parts.append(f"{where}: {error['msg']}")
    return f"{exc.error_count()} error(s): " + "; ".join(parts)
