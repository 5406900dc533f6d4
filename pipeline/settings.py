"""Process configuration, read once from ``CHATSCRIBE_*`` environment variables.

One frozen :class:`Settings` per process, built at the edge (the CLI) and passed down; nothing
deeper reads ``os.environ``. Defaults match what ``ops/services.sh`` starts.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
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


class Settings(BaseSettings):
    """Pipeline settings (worker, sink, batch, CLI).

    Attributes:
        kafka_bootstrap: ``host:port[,host:port]`` of the Kafka brokers.
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
        sink_batch_max_records, sink_batch_wait_ms: Sink batching: records per ``getmany``
            and how long to wait for them.
        sink_batch_linger_ms: How long the sink keeps adding to a small batch after its first
            records arrived, while records come slowly (:func:`pipeline.sink.prefetch.fetch`):
            at a low line rate, one transaction per ~200 ms of lines instead of one per
            ``getmany`` (issue 13).
        sink_metrics_port: TCP port of the sink's Prometheus ``/metrics``
            (:mod:`pipeline.sink.metrics`); None: not served.
        redact_detectors: Named redaction detectors applied to lines before storage
            (comma-separated; :data:`pipeline.archive.redaction.DETECTORS`).
        redact_patterns: Regular expressions redacted before storage (a JSON list).
        console_token: The token every page of ``chatscribe console`` asks for (header,
            cookie or ``?token=`` link); required to bind anything but loopback.
        otel_endpoint: OTLP/HTTP endpoint (base URL, or full ``.../v1/traces`` URL) the sink
            sends each normalised attempt to as a trace (:mod:`pipeline.sink.traces`); None
            (the default): no live export.
    """

    model_config = SettingsConfigDict(env_prefix="CHATSCRIBE_", frozen=True, extra="ignore")

    kafka_bootstrap: str = DEFAULT_KAFKA_BOOTSTRAP
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
    worker_max_attempts: int = Field(default=3, ge=1)
    worker_session_timeout_s: float = Field(default=30.0, ge=6.0, le=300.0)
    sink_batch_max_records: int = Field(default=5000, ge=1)
    sink_batch_wait_ms: int = Field(default=200, ge=0)
    sink_batch_linger_ms: int = Field(default=200, ge=0)
    max_record_bytes: int = MAX_RECORD_BYTES
    metrics_port: int | None = None
    sink_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    redact_detectors: Annotated[tuple[str, ...], NoDecode] = ()
    redact_patterns: tuple[str, ...] = ()
    console_token: SecretStr | None = None
    otel_endpoint: str | None = Field(default=None, pattern=r"^https?://[^/\s]+")

    @field_validator("redact_detectors", mode="before")
    @classmethod
    def _split_detectors(cls, value: Any) -> Any:
        """``"email, phone"`` from the environment becomes ``("email", "phone")``."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    def topic(self, name: str) -> str:
        """Returns: the topic ``name`` (a :mod:`models.wire` constant) with the prefix applied."""
        return f"{self.topic_prefix}{name}"
