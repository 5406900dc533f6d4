"""Prometheus metrics of the pipeline processes (exposed when ``metrics_port`` is set).

Names follow Prometheus conventions: ``chatscribe_<process>_<what>_<unit>``; counters end in
``_total``. Lines per second is ``rate(chatscribe_worker_lines_total[1m])``. The sink's own
metrics are in :mod:`pipeline.sink.metrics`.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram, start_http_server

JOBS: Final = Counter(
    "chatscribe_worker_jobs_total",
    "Jobs finished by the worker, by terminal event kind.",
    ["outcome"],
)
LINES: Final = Counter(
    "chatscribe_worker_lines_total", "NDJSON lines produced to chat.lines by the worker."
)
DEAD_LETTERS: Final = Counter(
    "chatscribe_worker_dead_letters_total", "chat.requests records sent to the dead-letter topic."
)
RETRIES: Final = Counter(
    "chatscribe_worker_stream_retries_total",
    "Chat API calls retried before the first line, by error type.",
    ["error_type"],
)
FIRST_LINE_S: Final = Histogram(
    "chatscribe_worker_first_line_seconds",
    "Seconds from a job's start to its first line (retries included).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
FINAL_ANSWER_S: Final = Histogram(
    "chatscribe_worker_final_answer_seconds",
    "Seconds from an attempt's start to its final answer (a final line, or a state with one).",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
JOBS_IN_FLIGHT: Final = Gauge(
    "chatscribe_worker_jobs_in_flight", "Chat streams the worker is driving right now."
)
TAKEOVERS: Final = Counter(
    "chatscribe_worker_attempts_continued_total",
    "Attempts after the first: by mode (ask again, fetch the thread's state, exhausted).",
    ["mode"],
)
CONSUMER_LAG: Final = Gauge(
    "chatscribe_worker_consumer_lag_records",
    "Records of chat.requests not yet committed by the worker group, per assigned partition.",
    ["topic", "partition"],
)
JOB_S: Final = Histogram(
    "chatscribe_worker_job_seconds",
    "Seconds from a job's start to its terminal event.",
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
KAFKA_OUTAGE: Final = Gauge(
    "chatscribe_kafka_outage",
    "1 while this process cannot reach Kafka (pipeline.kafka.outage), else 0.",
)
KAFKA_OUTAGE_SECONDS: Final = Counter(
    "chatscribe_kafka_outage_seconds_total", "Seconds this process spent in Kafka outages."
)
KAFKA_OUTAGES: Final = Counter(
    "chatscribe_kafka_outages_total", "Kafka outages this process went through."
)
KAFKA_LOG_RECORDS_HELD: Final = Counter(
    "chatscribe_kafka_log_records_held_total",
    "aiokafka/kafka warning and error records summarised instead of written, during outages.",
)

THROTTLED: Final = Counter(
    "chatscribe_worker_throttled_total",
    "Chat API answers 429 (or 503 with Retry-After) absorbed: waited out and asked again.",
)
TARGET_LIMIT: Final = Gauge(
    "chatscribe_worker_target_concurrency_limit",
    "Adaptive concurrency limit of a target (chat URL host and agent) in this worker.",
    ["target"],
)
ADMISSION_WAIT_S: Final = Histogram(
    "chatscribe_worker_admission_wait_seconds",
    "Seconds a job waited for headroom, its target's adaptive limit and its leases.",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
WORKER_HEADROOM: Final = Gauge(
    "chatscribe_worker_headroom",
    "1 while the worker takes new jobs (event-loop lag and CPU under their limits), else 0.",
)
HISTORY_SCAN_S: Final = Histogram(
    "chatscribe_worker_history_scan_seconds",
    "Seconds one scan of a chat.job-events partition for earlier attempts took (timed out too).",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
HISTORY_SCAN_TIMEOUTS: Final = Counter(
    "chatscribe_worker_history_scan_timeouts_total",
    "Scans of chat.job-events that did not end within worker_history_scan_timeout_s.",
)
STALLS: Final = Counter(
    "chatscribe_stalls_total",
    "Stalls a watchdog found: assigned partitions without progress while records waited.",
    ["process"],
)


def serve(port: int) -> None:
    """Serves ``/metrics`` on ``port`` (all interfaces) from a daemon thread."""
    start_http_server(port)
