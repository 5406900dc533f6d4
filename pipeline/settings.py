"""Process configuration, read once from ``CHATSCRIBE_*`` environment variables.

One frozen :class:`Settings` per process, built at the edge (the CLI) and passed down; nothing
deeper reads ``os.environ``. Defaults match what ``ops/services.sh`` starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from models import wire

DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_DATABASE_URL = "postgresql+psycopg://chatscribe:chatscribe@127.0.0.1:15432/chatscribe"
DEFAULT_CHAT_URL = "http://127.0.0.1:8400" + wire.CHAT_PATH_TEMPLATE.format(
    cloud_region="local", account_name="demo", agent_id="1"
)
DEFAULT_API_KEY = "demo-key"
DEFAULT_WORKER_CONCURRENCY = 200
"""Streams one worker drives at most: LLM turns last 10–40 s and are mostly idle; on 2 cores
one worker process moved 200 paced streams at ~90% machine CPU and saturated near 250
(issue 13's measurements)."""
MAX_RECORD_BYTES = 32 * 1024 * 1024
"""Largest Kafka record; the broker's ``message.max.bytes`` in ``ops/`` matches it."""
DEFAULT_JOB_DEADLINE_MAX_S = 3600.0
"""Longest deadline a job may ask for (``deadline_s``); a longer one is cut to it."""
DEFAULT_THROTTLE_FLOOR_S = 1.0
"""Shortest wait after a throttled answer, whatever its ``Retry-After`` says (``0`` included)."""
DEFAULT_MAX_THROTTLED = 30
"""Throttled answers one call of a job waits out before the job fails."""
DEFAULT_MAX_ATTEMPT_LINES = 20_000
"""Lines one attempt's response may carry: a long LLM turn with its deltas and tool calls is a
few thousand lines (bench ``paced`` turns: 100-1,000)."""
DEFAULT_MAX_ATTEMPT_BYTES = 64 * 1024 * 1024
"""Bytes one attempt's response may carry (two of the largest records)."""
DEFAULT_RUN_MAX_JOBS = 10_000
"""Jobs one questions file may expand to; ``chatscribe batch --max-jobs`` raises it on purpose."""


class Settings(BaseSettings):
    """Pipeline settings (worker, sink, batch, CLI).

    Attributes:
        kafka_bootstrap: ``host:port[,host:port]`` of the Kafka brokers.
        kafka_replication_factor: Replicas of each topic the pipeline creates; None: from the
            cluster, 3 where it has 3 brokers or more, else one per broker
            (:func:`pipeline.kafka.clients.cluster_replication`).
        kafka_min_insync_replicas: ``min.insync.replicas`` of the topics it creates, the
            replicas that must hold a record before ``acks=all`` acknowledges it; None: one
            fewer than the replication factor, at least 1 (2 of 3).
        kafka_security_protocol: How every Kafka client connects: ``PLAINTEXT`` (local),
            ``SSL`` (TLS), ``SASL_PLAINTEXT`` or ``SASL_SSL`` (what managed services require).
        kafka_sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` with a SASL
            protocol; ``kafka_sasl_username`` and ``kafka_sasl_password`` its credentials.
        kafka_ssl_cafile: PEM file of the certificate authorities to trust (None: the
            system's); ``kafka_ssl_certfile`` and ``kafka_ssl_keyfile``: a client certificate
            and its key, for brokers that authenticate clients by certificate (mutual TLS).
        database_url: SQLAlchemy URL of the PostgreSQL archive (``postgresql+psycopg://``).
        database_schema: PostgreSQL schema holding the archive tables.
        topic_prefix: Prepended to every topic name (tests use a unique one).
        chat_url: Default full URL of the Chat API's chat endpoint.
        api_key: Chat API key sent as ``Authorization: Api-Key <key>``.
        worker_concurrency: Most streams one worker process drives at once (a ceiling: the
            worker admits jobs below it only while it has headroom, and per target only as many
            as the target's adaptive limit allows; :mod:`pipeline.worker.admission`).
        worker_max_loop_lag_ms: The worker takes no new job while its event loop runs this
            late (smoothed lag of a periodic timer).
        worker_max_cpu: The worker takes no new job while its process uses more than this
            share of one core (smoothed).
        target_initial_concurrency: Where the adaptive concurrency of a new target (chat URL
            host and agent) starts; it grows until the agent answers 429 or slows down.
        leases_poll_s: Pause between two attempts to take a run's or target's lease when the
            limit is reached (job fields ``limits``/``target_limits``).
        connect_timeout_s, read_timeout_s: httpx timeouts for the Chat API.
        job_deadline_s: Default seconds a job's stream may run before the worker aborts it.
        worker_max_attempts: Attempts of one job in all (a takeover after a crash or a broken
            stream is the next attempt); past them the job fails.
        worker_session_timeout_s: Kafka consumer-group session timeout of the worker: how
            soon the group notices a worker that died (SIGKILL) and hands its jobs over.
        worker_history_scan_timeout_s: Longest one scan of a ``chat.job-events`` partition
            for a job's earlier attempts may take (:mod:`pipeline.worker.history`); a scan
            past it is started again on a new consumer once, then the worker stops with
            :class:`~pipeline.errors.RecordDeliveryError` (its record is redelivered).
        worker_stall_timeout_s, sink_stall_timeout_s: How long the worker's or the sink's
            assigned partitions may make no progress while records wait for them and nothing
            is in flight before its watchdog logs the stall and re-seeks or rejoins
            (:mod:`pipeline.kafka.stall`).
        sink_batch_max_records, sink_batch_wait_ms: Sink batching: records per ``getmany``
            and how long to wait for them.
        sink_batch_linger_ms: How long the sink keeps adding to a small batch after its first
            records arrived, while records come slowly (:func:`pipeline.sink.prefetch.fetch`):
            at a low line rate, one transaction per ~200 ms of lines instead of one per
            ``getmany`` (issue 13).
        sink_metrics_port: TCP port of the sink's Prometheus ``/metrics``
            (:mod:`pipeline.sink.metrics`); None: not served.
        chat_url_allow: URL prefixes every chat URL a job names must match (scheme, host,
            port or ``*``, path prefix; comma-separated). Empty: the origin of ``chat_url``
            (:mod:`pipeline.chat.targets`; a refused job is dead-lettered with the reason).
        api_key_urls: URL prefixes the worker's own ``api_key`` is sent to (comma-separated);
            a job aimed elsewhere must carry its own key. Empty: the origin of ``chat_url``.
        job_deadline_max_s: Longest deadline a job may ask for; a longer ``deadline_s`` is cut
            to it.
        worker_throttle_floor_s: Shortest wait after a throttled answer (429, or 503 with
            ``Retry-After``); it doubles with each throttled answer of the same call, up to 30
            s, plus jitter, or the agent's ``Retry-After`` when that is longer.
        worker_max_throttled: Throttled answers one call waits out; the next one fails the job
            (:class:`~pipeline.errors.ChatThrottleLimitError`).
        worker_max_attempt_lines, worker_max_attempt_bytes: Caps on one attempt's response; past
            either the stream is closed, the lines before it stay, and the attempt fails
            (:class:`~pipeline.errors.ChatResponseTooLargeError`).
        run_max_jobs: Jobs one questions file may expand to (``batch --max-jobs`` overrides).
        redact_detectors: Named redaction detectors applied to lines before storage
            (comma-separated; :data:`pipeline.archive.redaction.DETECTORS`).
        redact_patterns: Regular expressions redacted before storage (a JSON list).
        chain_anchor_dir: Directory of the append-only file ``seals.jsonl`` where the sink and
            ``retention apply`` anchor each attempt's seal outside PostgreSQL, and which
            ``chatscribe verify`` compares the archive with (:mod:`pipeline.archive.seals`);
            None: seals are kept in PostgreSQL only, so a consistent rewrite of a whole
            attempt inside the database goes unnoticed. Reviewers' verdicts are anchored in
            ``verdicts.jsonl`` of the same directory (:mod:`pipeline.archive.verdicts`).
        lines_retention_ms: ``retention.ms`` given to the ``chat.lines`` topic when the
            pipeline creates it (match the archive's retention policy); None: the broker's
            default (``log.retention.hours``, 7 days unless configured). Topics that exist
            keep their configuration (``kafka-configs.sh --alter`` changes it).
        console_token: The token every page of ``chatscribe console`` asks for (header,
            cookie or ``?token=`` link); required to bind anything but loopback.
        otel_endpoint: OTLP/HTTP endpoint (base URL, or full ``.../v1/traces`` URL) the sink
            sends each normalised attempt to as a trace (:mod:`pipeline.sink.traces`); None
            (the default): no live export.
    """

    model_config = SettingsConfigDict(env_prefix="CHATSCRIBE_", frozen=True, extra="ignore")

    kafka_bootstrap: str = DEFAULT_KAFKA_BOOTSTRAP
    kafka_replication_factor: int | None = Field(default=None, ge=1)
    kafka_min_insync_replicas: int | None = Field(default=None, ge=1)
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    database_url: SecretStr = SecretStr(DEFAULT_DATABASE_URL)
    database_schema: str = Field(default="public", pattern=r"^[a-z_][a-z0-9_]*$")
    topic_prefix: str = ""
    chat_url: str = DEFAULT_CHAT_URL
    api_key: SecretStr = SecretStr(DEFAULT_API_KEY)
    worker_id: str | None = None
    worker_group: str = "chatscribe-worker"
    sink_group: str = "chatscribe-sink"
    worker_concurrency: int = Field(default=DEFAULT_WORKER_CONCURRENCY, ge=1, le=5000)
    worker_max_loop_lag_ms: float = Field(default=100.0, gt=0)
    worker_max_cpu: float = Field(default=0.9, gt=0)
    target_initial_concurrency: int = Field(default=16, ge=1)
    leases_poll_s: float = Field(default=0.2, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=120.0, gt=0)
    job_deadline_s: float = Field(default=300.0, gt=0)
    job_deadline_max_s: float = Field(default=DEFAULT_JOB_DEADLINE_MAX_S, gt=0)
    chat_url_allow: Annotated[tuple[str, ...], NoDecode] = ()
    api_key_urls: Annotated[tuple[str, ...], NoDecode] = ()
    worker_throttle_floor_s: float = Field(default=DEFAULT_THROTTLE_FLOOR_S, gt=0)
    worker_max_throttled: int = Field(default=DEFAULT_MAX_THROTTLED, ge=1)
    worker_max_attempt_lines: int = Field(default=DEFAULT_MAX_ATTEMPT_LINES, ge=1)
    worker_max_attempt_bytes: int = Field(default=DEFAULT_MAX_ATTEMPT_BYTES, ge=1)
    run_max_jobs: int = Field(default=DEFAULT_RUN_MAX_JOBS, ge=1)
    worker_max_attempts: int = Field(default=3, ge=1)
    worker_session_timeout_s: float = Field(default=30.0, ge=6.0, le=300.0)
    worker_history_scan_timeout_s: float = Field(default=60.0, gt=0)
    worker_stall_timeout_s: float = Field(default=60.0, gt=0)
    sink_stall_timeout_s: float = Field(default=60.0, gt=0)
    sink_batch_max_records: int = Field(default=5000, ge=1)
    sink_batch_wait_ms: int = Field(default=200, ge=0)
    sink_batch_linger_ms: int = Field(default=200, ge=0)
    max_record_bytes: int = MAX_RECORD_BYTES
    metrics_port: int | None = None
    sink_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    redact_detectors: Annotated[tuple[str, ...], NoDecode] = ()
    redact_patterns: tuple[str, ...] = ()
    console_token: SecretStr | None = None
    chain_anchor_dir: Path | None = None
    lines_retention_ms: int | None = Field(default=None, ge=1)
    otel_endpoint: str | None = Field(default=None, pattern=r"^https?://[^/\s]+")

    @field_validator("redact_detectors", "chat_url_allow", "api_key_urls", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        """``"email, phone"`` from the environment becomes ``("email", "phone")``."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="after")
    def _sasl_has_credentials(self) -> Settings:
        """A SASL protocol without a username and password is refused at start, by name."""
        sasl = self.kafka_security_protocol.startswith("SASL_")
        if sasl and (self.kafka_sasl_username is None or self.kafka_sasl_password is None):
            raise ValueError(
                f"CHATSCRIBE_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs "
                "CHATSCRIBE_KAFKA_SASL_USERNAME and CHATSCRIBE_KAFKA_SASL_PASSWORD"
            )
        return self

    @field_validator("chat_url_allow", "api_key_urls")
    @classmethod
    def _url_prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Every entry must be a URL prefix (:class:`pipeline.chat.targets.UrlPrefix`)."""
        from pipeline.chat.targets import UrlPrefix

        for entry in value:
            UrlPrefix.parse(entry)
        return value

    def topic(self, name: str) -> str:
        """Returns: the topic ``name`` (a :mod:`models.wire` constant) with the prefix applied."""
        return f"{self.topic_prefix}{name}"
