"""aiokafka producers, consumers and topics configured the way the pipeline needs them.

Every Kafka client of the pipeline is built here (faust's own in :mod:`pipeline.worker.app`).
Settings that matter for correctness (``local-services.md``, "Client settings worth knowing"):

* producers are idempotent with ``acks=all`` (aiokafka defaults to ``acks=1`` without
  idempotence), so a retried batch is neither lost nor duplicated and one key's records keep
  their order within the partition;
* producer ``max_request_size``, consumer ``max_partition_fetch_bytes`` and the broker's
  ``message.max.bytes`` all equal ``settings.max_record_bytes``: a consumer whose fetch size is
  below the largest record gets stuck;
* consumers never auto-commit: offsets are committed after the work is durable;
* topics are created with a replication factor and ``min.insync.replicas`` from the settings or,
  by default, from the cluster's size (:func:`replication_for`: 3 and 2 on three brokers), so
  ``acks=all`` means a record is on two brokers before it is acknowledged.

aiokafka errors are translated here, once, into :class:`RecordDeliveryError` (transient) and
:class:`RecordTooLargeError` (permanent).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError, MessageSizeTooLargeError
from aiokafka.helpers import create_ssl_context
from aiokafka.partitioner import DefaultPartitioner

from models.records import Headers, JobEvent
from models.wire import TOPIC_JOB_EVENTS, TOPIC_LINES
from pipeline.errors import RecordDeliveryError, RecordTooLargeError
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

DEFAULT_REPLICATION: Final = 3
"""Replicas of a new topic on a cluster of three brokers or more (:func:`replication_for`)."""

LINGER_MS: Final = 0
"""No lingering: a batch leaves as soon as the partition has no request in flight, and records
queue behind an in-flight request anyway, so batches still form under load. A job waits for
acknowledgements three times (``started``; its lines before the terminal event; the terminal
event, :class:`pipeline.worker.job_runner.JobRunner`) and each wait paid the whole linger: 5 ms
made one
stream at a time 7x slower (bench ``stream-c1``); an acknowledgement itself takes ~0.3 ms."""
LINES_LINGER_MS: Final = 10
"""Linger of the worker's producer for ``chat.lines`` only (:class:`JobOutput`'s
``lines_producer``): LLM-paced streams send a line every ~70 ms each, so without lingering
nearly every line was a produce request of its own (~1 ms of worker and broker CPU each, issue
13). Nobody waits on a line but the terminal event, which pays at most this once per job;
lifecycle events keep :data:`LINGER_MS`."""
MAX_BATCH_BYTES: Final = 1024 * 1024
"""Producer batch size per partition (aiokafka's default is 16 KiB). aiokafka sends one produce
request at a time per broker (one batch per partition in it), and a send into a full batch waits
until that batch is sent (``MessageBatch.wait_drain``: an ``asyncio.wait`` per waiting send).
With 16 KiB, 100 streams' lines queued ~150 ms in the producer (bench ``stream-c100``); with
256 KiB, 1,000 paced streams (~6 MB/s) still filled batches while a request was out, and line
latency p99 was 0.9-1.0 s (``bench.drive --mode worker``, C=1,000, uvloop) against 0.53-0.55 s
with 1 MiB. Memory: at most two batches per partition (filling, in flight)."""
PRODUCER_REQUEST_TIMEOUT_MS: Final = 120_000
"""How long a queued record may wait for the broker (aiokafka's default is 40 s): long enough to
ride out a broker restart without failing the job's records."""
DEFAULT_PARTITIONS: Final = 4
TOPIC_ERROR_ALREADY_EXISTS: Final = 36
"""Kafka protocol error code TOPIC_ALREADY_EXISTS in a CreateTopics response."""

BOOTSTRAP_CHECK_MS: Final = 10_000
"""How long :func:`bootstrap_problem` waits for each server."""
PRUNE_PENDING_AT: Final = 1024
"""A job's output forgets acknowledged records once this many are tracked."""


def connection_options(settings: Settings) -> dict[str, Any]:
    """Returns: how every aiokafka client of the pipeline connects (TLS and SASL).

    ``security_protocol``; with SSL or SASL_SSL an ``ssl_context`` made by aiokafka's
    ``create_ssl_context`` (the CA file, or the system's CAs, and a client certificate when
    set; host names verified); with a SASL protocol the mechanism and credentials. PLAINTEXT
    adds nothing. Source: aiokafka, "SSL/SASL" (https://aiokafka.readthedocs.io/en/stable/).

    Raises:
        FileNotFoundError, ssl.SSLError: A CA, certificate or key file is missing or invalid.
    """
    protocol = settings.kafka_security_protocol
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = create_ssl_context(
            cafile=settings.kafka_ssl_cafile and str(settings.kafka_ssl_cafile),
            certfile=settings.kafka_ssl_certfile and str(settings.kafka_ssl_certfile),
            keyfile=settings.kafka_ssl_keyfile and str(settings.kafka_ssl_keyfile),
        )
    if protocol.startswith("SASL_"):
        password = settings.kafka_sasl_password
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        options["sasl_plain_password"] = password.get_secret_value() if password else None
    return options


async def bootstrap_problem(settings: Settings) -> str | None:
    """Connects once to each bootstrap server and says why none would take the pipeline.

    aiokafka's clients report a refused TLS handshake or SASL login only as "Unable to
    bootstrap" (the reason goes to its log), so the errors raised at start add this.

    Returns:
        None when a server accepted the connection (and the login); otherwise each
        server's error, e.g. ``"127.0.0.1:9093: SaslAuthenticationFailed: ... Invalid
        username or password"``.
    """
    reasons: list[str] = []
    for server in settings.kafka_bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            conn = await create_conn(
                host,
                int(port),
                request_timeout_ms=BOOTSTRAP_CHECK_MS,
                **connection_options(settings),
            )
        except (OSError, ValueError, KafkaError) as exc:
            reasons.append(f"{server.strip()}: {type(exc).__name__}: {exc}")
        else:
            conn.close()
            return None
    return "; ".join(reasons)


async def _start_error(settings: Settings, what: str, exc: KafkaError) -> RecordDeliveryError:
    """Returns: the error for a failed admin call, with :func:`bootstrap_problem`'s reason."""
    problem = await bootstrap_problem(settings) if isinstance(exc, KafkaConnectionError) else None
    reason = f"{what}: {exc!r}" + (f" ({problem})" if problem else "")
    return RecordDeliveryError(reason, topic=settings.kafka_bootstrap)


def create_admin(settings: Settings) -> AIOKafkaAdminClient:
    """Builds (does not start) an admin client with :func:`connection_options`."""
    return AIOKafkaAdminClient(
        bootstrap_servers=settings.kafka_bootstrap, **connection_options(settings)
    )


def create_producer(
    settings: Settings, *, client_id: str = "chatscribe", linger_ms: int = LINGER_MS
) -> AIOKafkaProducer:
    """Builds (does not start) an idempotent producer; call inside a running event loop.

    Returns:
        An ``AIOKafkaProducer`` with ``enable_idempotence=True``, ``acks="all"``,
        ``max_request_size=settings.max_record_bytes``, ``linger_ms`` (default
        :data:`LINGER_MS`), batches of up to
        :data:`MAX_BATCH_BYTES` (a larger record gets a batch of its own) and a request timeout
        of :data:`PRODUCER_REQUEST_TIMEOUT_MS`.
    """
    return AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap,
        **connection_options(settings),
        client_id=client_id,
        enable_idempotence=True,
        acks="all",
        max_request_size=settings.max_record_bytes,
        linger_ms=linger_ms,
        max_batch_size=min(MAX_BATCH_BYTES, settings.max_record_bytes),
        request_timeout_ms=PRODUCER_REQUEST_TIMEOUT_MS,
    )


def create_consumer(
    settings: Settings, *topics: str, group_id: str | None, **overrides: Any
) -> AIOKafkaConsumer:
    """Builds (does not start) a consumer that never auto-commits.

    Args:
        settings: Bootstrap servers and ``max_record_bytes``.
        topics: Full topic names (already prefixed) to subscribe to.
        group_id: Consumer group, or None for a group-less consumer.
        overrides: Further ``AIOKafkaConsumer`` arguments (e.g. ``auto_offset_reset``).

    Returns:
        An ``AIOKafkaConsumer`` with ``enable_auto_commit=False``,
        ``max_partition_fetch_bytes=settings.max_record_bytes`` and, unless overridden,
        ``auto_offset_reset="earliest"``.
    """
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap,
        **connection_options(settings),
        "group_id": group_id,
        "enable_auto_commit": False,
        "max_partition_fetch_bytes": settings.max_record_bytes,
        "fetch_max_bytes": max(settings.max_record_bytes, 52_428_800),
        "auto_offset_reset": "earliest",
    }
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)


@dataclass(frozen=True)
class Replication:
    """How the topics the pipeline creates are replicated.

    Attributes:
        factor: Replicas of each partition.
        min_insync: ``min.insync.replicas``: the replicas that must hold a record before an
            ``acks=all`` producer (ours) is acknowledged; a partition with fewer in sync refuses
            writes rather than keep a record on too few brokers.
    """

    factor: int
    min_insync: int


def replication_for(brokers: int, settings: Settings) -> Replication:
    """Returns: the replication of new topics on a cluster of ``brokers`` brokers.

    The settings' values when given; otherwise 3 and 2 on three brokers or more, one replica
    per broker and one fewer in sync (at least 1) on smaller clusters: 1 and 1 on one node.
    That is the usual production choice (Kafka's documentation, "Replication": a replication
    factor of 3 with ``min.insync.replicas`` 2 survives one broker's loss without refusing
    writes).
    """
    factor = settings.kafka_replication_factor or max(1, min(DEFAULT_REPLICATION, brokers))
    min_insync = settings.kafka_min_insync_replicas or max(1, factor - 1)
    return Replication(factor=factor, min_insync=min(min_insync, factor))


async def cluster_replication(settings: Settings) -> Replication:
    """Returns: :func:`replication_for` the cluster at ``settings.kafka_bootstrap``.

    Raises:
        RecordDeliveryError: The cluster could not be reached.
    """
    admin = create_admin(settings)
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
    except KafkaError as exc:
        raise await _start_error(settings, "cannot describe the cluster", exc) from exc
    finally:
        await admin.close()
    return replication_for(len(cluster["brokers"]), settings)


async def ensure_topics(
    settings: Settings, names: Iterable[str], partitions: int = DEFAULT_PARTITIONS
) -> list[str]:
    """Creates the topics that do not exist yet, and warns about under-replicated ones.

    New topics get :func:`replication_for` the cluster (the number of brokers it reports).
    A topic it uses whose partitions have fewer replicas than that, or fewer in sync than
    their replicas, is logged as a warning naming the partitions: records there are one
    broker's loss away from being refused (or lost, with fewer replicas than wanted).

    Args:
        settings: Bootstrap servers, ``topic_prefix`` and the replication settings.
        names: Topic names from :mod:`models.wire`; the prefix is applied here.
        partitions: Partitions of each created topic.

    Returns:
        The full names of the topics this call created.

    Raises:
        RecordDeliveryError: The broker could not be reached or refused to create a topic.
    """
    wanted = [settings.topic(name) for name in names]
    missing: list[str] = []
    admin = create_admin(settings)
    try:
        await admin.start()
        replication = replication_for(len((await admin.describe_cluster())["brokers"]), settings)
        missing = sorted(set(wanted) - set(await admin.list_topics()))
        if missing:
            min_insync = {"min.insync.replicas": str(replication.min_insync)}
            new = [
                NewTopic(
                    name,
                    partitions,
                    replication.factor,
                    topic_configs={**min_insync, **topic_configs(settings, name)},
                )
                for name in missing
            ]
            response = await admin.create_topics(new)
            _check_created(response.topic_errors)
        existing = sorted(set(wanted) - set(missing))
        if existing:
            _warn_under_replicated(await admin.describe_topics(existing), replication.factor)
    except KafkaError as exc:
        raise await _start_error(settings, "cannot create topics", exc) from exc
    finally:
        await admin.close()
    if missing:
        logger.info(
            "topics created topics=%s partitions=%s replication_factor=%d min_insync_replicas=%d",
            ",".join(missing),
            partitions,
            replication.factor,
            replication.min_insync,
        )
    return missing


def under_replicated(topics: Iterable[dict[str, Any]], factor: int) -> list[str]:
    """Finds the partitions with fewer than ``factor`` replicas or fewer in sync than they have.

    Args:
        topics: ``describe_topics`` answers (each partition's ``replicas`` and ``isr`` ids).
        factor: The replication factor wanted.

    Returns:
        ``topic:partition`` of each, sorted.
    """
    found: list[str] = []
    for topic in topics:
        for part in topic.get("partitions", ()):
            replicas, isr = part.get("replicas", []), part.get("isr", [])
            if len(replicas) < factor or len(isr) < len(replicas):
                found.append(f"{topic['topic']}:{part['partition']}")
    return sorted(found)


def _warn_under_replicated(topics: Iterable[dict[str, Any]], factor: int) -> None:
    found = under_replicated(topics, factor)
    if found:
        logger.warning(
            "under-replicated partitions (fewer than %d replicas, or replicas out of sync): %s",
            factor,
            ",".join(found),
        )


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    """Returns: the configuration a created topic gets: ``retention.ms`` of ``chat.lines``.

    ``settings.lines_retention_ms`` (None: the broker's default) keeps the raw lines in Kafka no
    longer than the archive keeps them (README, "Retention").
    """
    if name == settings.topic(TOPIC_LINES) and settings.lines_retention_ms is not None:
        return {"retention.ms": str(settings.lines_retention_ms)}
    return {}


def _check_created(topic_errors: Iterable[tuple[Any, ...]]) -> None:
    for topic, code, *rest in topic_errors:
        if code not in (0, TOPIC_ERROR_ALREADY_EXISTS):
            message = rest[0] if rest else ""
            raise RecordDeliveryError(f"create failed with code {code}: {message}", topic=topic)


async def produce(
    producer: AIOKafkaProducer,
    topic: str,
    *,
    key: bytes | None,
    value: bytes,
    headers: Headers = (),
) -> None:
    """Sends one record and waits until Kafka acknowledged it.

    Raises:
        RecordTooLargeError: The record exceeds ``max_record_bytes``.
        RecordDeliveryError: Kafka did not acknowledge it.
    """
    future = await _send(producer, topic, key=key, value=value, headers=headers)
    try:
        await future
    except KafkaError as exc:
        raise RecordDeliveryError(f"record not acknowledged: {exc!r}", topic=topic) from exc


Pending = tuple[str, "asyncio.Future[Any]"]
"""A queued record: its topic and the future that resolves when Kafka acknowledged it."""


async def send(
    producer: AIOKafkaProducer,
    topic: str,
    *,
    key: bytes | None,
    value: bytes,
    headers: Headers = (),
) -> Pending:
    """Queues one record without waiting for its acknowledgement; see :func:`delivered`.

    Raises:
        RecordTooLargeError: The record exceeds ``max_record_bytes``.
        RecordDeliveryError: The producer could not queue it.
    """
    return topic, await _send(producer, topic, key=key, value=value, headers=headers)


async def delivered(pending: Iterable[Pending]) -> None:
    """Waits until Kafka acknowledged every queued record.

    Raises:
        RecordDeliveryError: A record was not acknowledged.
    """
    for topic, future in pending:
        try:
            await future
        except KafkaError as exc:
            raise RecordDeliveryError(f"record not acknowledged: {exc!r}", topic=topic) from exc


async def partition_of(producer: AIOKafkaProducer, topic: str, key: bytes) -> int:
    """Returns: the partition of ``topic`` that records keyed ``key`` go to.

    The same choice as the producer's own (:func:`key_partition`), made once instead of per
    record.

    Raises:
        RecordDeliveryError: Kafka's metadata for ``topic`` cannot be had.
    """
    try:
        partitions = await producer.partitions_for(topic)
    except KafkaError as exc:
        raise RecordDeliveryError(f"no partitions known: {exc!r}", topic=topic) from exc
    return key_partition(key, partitions)


def key_partition(key: bytes, partitions: Iterable[int]) -> int:
    """Returns: the partition among ``partitions`` that a producer sends records keyed ``key`` to.

    aiokafka's ``DefaultPartitioner``: murmur2 of the key, made positive, modulo the number of
    partitions, over the partitions sorted by id, as the Java client's default partitioner
    (``Utils.toPositive(Utils.murmur2(key)) % numPartitions``).

    Raises:
        ValueError: ``partitions`` is empty.
    """
    ordered = sorted(partitions)
    if not ordered:
        raise ValueError("no partitions to choose from")
    return int(DefaultPartitioner()(key, ordered, ordered))


async def _send(
    producer: AIOKafkaProducer,
    topic: str,
    *,
    key: bytes | None,
    value: bytes,
    headers: Headers,
    partition: int | None = None,
) -> asyncio.Future[Any]:
    try:
        future: asyncio.Future[Any] = await producer.send(
            topic, value, key=key, headers=list(headers), partition=partition
        )
    except MessageSizeTooLargeError as exc:
        raise RecordTooLargeError(
            "record larger than max_record_bytes", topic=topic, size_bytes=len(value)
        ) from exc
    except KafkaError as exc:
        raise RecordDeliveryError(f"cannot queue record: {exc!r}", topic=topic) from exc
    return future


def _succeeded(future: asyncio.Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


class JobOutput:
    """Sends one job's records and waits for their delivery at the points that need it.

    Records are sent without waiting for each acknowledgement; :meth:`delivered` waits for all
    of them. Every record of the job has the job id as key, so they share a partition and the
    idempotent producer keeps their order. Each topic's partition is computed once, at the
    job's first record there (:func:`partition_of`): a partition added to a topic while the job
    runs does not split its records.

    Args:
        producer: A started idempotent producer (:func:`create_producer`).
        settings: Topic prefix.
        job_id: The record key.
        lines_producer: The producer of the lines, when they have their own (one that lingers,
            :data:`LINES_LINGER_MS`); default ``producer``. A job's lines stay in order (one
            producer, one key); the terminal event follows :meth:`delivered`, so lines and
            events need no common producer.
    """

    def __init__(
        self,
        producer: AIOKafkaProducer,
        settings: Settings,
        job_id: str,
        *,
        lines_producer: AIOKafkaProducer | None = None,
    ) -> None:
        self._producer = producer
        self._lines_producer = lines_producer or producer
        self._key = job_id.encode()
        self._lines_topic = settings.topic(TOPIC_LINES)
        self._events_topic = settings.topic(TOPIC_JOB_EVENTS)
        self._pending: list[tuple[str, asyncio.Future[Any]]] = []
        self._partitions: dict[str, int] = {}  # topic -> the job's partition there
        self.lines_sent = 0

    def __repr__(self) -> str:
        pending = len(self._pending)
        return f"<JobOutput key={self._key!r} lines_sent={self.lines_sent} pending={pending}>"

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        """Queues one line for ``chat.lines``: value = the raw bytes, metadata in ``headers``.

        Args:
            raw: The line as received.
            headers: Its headers (:class:`models.records.LineHeaders`).

        Raises:
            RecordTooLargeError: The line exceeds ``max_record_bytes``.
            RecordDeliveryError: The producer could not queue it in time.
        """
        await self._queue(self._lines_producer, self._lines_topic, raw, headers)
        self.lines_sent += 1

    async def send_event(self, event: JobEvent) -> None:
        """Queues a lifecycle event for ``chat.job-events``. Raises as :meth:`send_line`.

        The events' partition is computed at the first event, as the lines' is (a job sends 3-4
        events; the producer's partitioner is pure-Python murmur2, ~4 µs a record).
        """
        await self._queue(self._producer, self._events_topic, event.to_value(), ())

    async def delivered(self) -> None:
        """Waits until Kafka acknowledged (``acks=all``) every record queued so far.

        Raises:
            RecordDeliveryError: A record was not acknowledged.
        """
        pending, self._pending = self._pending, []
        await delivered(pending)

    async def _queue(
        self, producer: AIOKafkaProducer, topic: str, value: bytes, headers: Headers
    ) -> None:
        """Sends one record of the job to its partition of ``topic`` (computed at the first)."""
        partition = self._partitions.get(topic)
        if partition is None:
            partition = self._partitions[topic] = await partition_of(producer, topic, self._key)
        future = await _send(
            producer, topic, key=self._key, value=value, headers=headers, partition=partition
        )
        self._track(topic, future)

    def _track(self, topic: str, future: asyncio.Future[Any]) -> None:
        self._pending.append((topic, future))
        if len(self._pending) >= PRUNE_PENDING_AT:
            self._pending = [(t, f) for t, f in self._pending if not _succeeded(f)]
