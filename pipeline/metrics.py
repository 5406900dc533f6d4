"""Prometheus metrics of the pipeline processes (exposed when ``metrics_port`` is set).

Names follow Prometheus conventions: ``chatscribe_<process>_<what>_<unit>``; counters end in
``_total``.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Histogram, start_http_server

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
JOB_S: Final = Histogram(
    "chatscribe_worker_job_seconds",
    "Seconds from a job's start to its terminal event.",
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)


def serve(port: int) -> None:
    """Serves ``/metrics`` on ``port`` (all interfaces) from a daemon thread."""
    start_http_server(port)
