"""Prometheus metrics of the sink process (exposed when ``sink_metrics_port`` is set).

Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/):
``chatscribe_sink_<what>_<unit>``, counters end in ``_total``. The worker's metrics live in
:mod:`pipeline.metrics`; ``ops/grafana/pipeline.json`` charts both.

What is measured, per batch (:meth:`pipeline.sink.loop.Sink.run_once`):

* ``chatscribe_sink_batch_records``: records fetched by one ``getmany`` (histogram);
* ``chatscribe_sink_write_seconds``: wall time of one PostgreSQL transaction (histogram);
* ``chatscribe_sink_lines_total{result}``: lines given to the archive, ``inserted`` (new rows)
  or ``duplicate`` (already stored: redelivery after a crash or a replay);
* ``chatscribe_sink_events_total{result}``: lifecycle events, likewise;
* ``chatscribe_sink_dead_letters_total{source}``: records sent to ``chat.lines.dlq``, by source
  topic kind (``lines``, ``events``);
* ``chatscribe_sink_write_retries_total``: PostgreSQL writes retried after a transient error;
* ``chatscribe_sink_batches_total{committed}``: batches archived, by whether their offsets were
  committed (``false``: a rebalance took the partitions first);
* ``chatscribe_sink_parsed_bytes{form}``: raw bytes of the lines the writer holds parsed until
  their attempt ends, ``kept`` as lines or ``folded`` into open attempts' transcripts (gauge;
  each form has its budget in :mod:`pipeline.archive.parsed`), and
  ``chatscribe_sink_open_attempts``: the attempts being folded;
* ``chatscribe_sink_consumer_lag_records{topic,partition}``: records between the consumer's
  position and the partition's high watermark (gauge, updated after every batch; the lag is
  defined once, in :mod:`pipeline.kafka.lag`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Final, Protocol

from prometheus_client import Counter, Gauge, Histogram, start_http_server
from tenacity import RetryCallState

logger = logging.getLogger("pipeline.sink.loop")

SUMMARY_EVERY_S: Final = 10.0
"""Seconds between two ``sink progress`` log lines."""

BATCH_RECORDS: Final = Histogram(
    "chatscribe_sink_batch_records",
    "Records fetched in one sink batch (getmany).",
    buckets=(1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
)
WRITE_S: Final = Histogram(
    "chatscribe_sink_write_seconds",
    "Seconds of one archive transaction (lines and events of a batch).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LINES: Final = Counter(
    "chatscribe_sink_lines_total",
    "chat.lines records given to the archive, by result (inserted, duplicate).",
    ["result"],
)
EVENTS: Final = Counter(
    "chatscribe_sink_events_total",
    "chat.job-events records given to the archive, by result (inserted, duplicate).",
    ["result"],
)
DEAD_LETTERS: Final = Counter(
    "chatscribe_sink_dead_letters_total",
    "Records the sink sent to the dead-letter topic, by source (lines, events).",
    ["source"],
)
WRITE_RETRIES: Final = Counter(
    "chatscribe_sink_write_retries_total",
    "Archive writes retried after PostgreSQL was unavailable.",
)
BATCHES: Final = Counter(
    "chatscribe_sink_batches_total",
    "Batches archived, by whether their offsets were committed.",
    ["committed"],
)
PARSED_BYTES: Final = Gauge(
    "chatscribe_sink_parsed_bytes",
    "Raw bytes of lines held parsed until their attempt ends, by form (kept, folded).",
    ["form"],
)
OPEN_ATTEMPTS: Final = Gauge(
    "chatscribe_sink_open_attempts",
    "Attempts whose lines the sink is folding into their transcript.",
)
CONSUMER_LAG: Final = Gauge(
    "chatscribe_sink_consumer_lag_records",
    "Records behind the high watermark, per assigned partition of the sink.",
    ["topic", "partition"],
)

# Label values seen by set_lag, so revoked partitions stop being reported.
_lag_labels: set[tuple[str, str]] = set()

for _result in ("inserted", "duplicate"):
    LINES.labels(result=_result)
    EVENTS.labels(result=_result)
for _source in ("lines", "events"):
    DEAD_LETTERS.labels(source=_source)


class _Report(Protocol):
    @property
    def lines(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def dead_lettered(self) -> int: ...


def observe_write(
    *,
    seconds: float,
    lines: int,
    lines_inserted: int,
    events: int,
    events_inserted: int,
    kept_bytes: int = 0,
    folded_bytes: int = 0,
    open_folds: int = 0,
) -> None:
    """Records one archive transaction: its duration, how many rows were new, what is held."""
    WRITE_S.observe(seconds)
    PARSED_BYTES.labels(form="kept").set(kept_bytes)
    PARSED_BYTES.labels(form="folded").set(folded_bytes)
    OPEN_ATTEMPTS.set(open_folds)
    LINES.labels(result="inserted").inc(lines_inserted)
    LINES.labels(result="duplicate").inc(max(lines - lines_inserted, 0))
    EVENTS.labels(result="inserted").inc(events_inserted)
    EVENTS.labels(result="duplicate").inc(max(events - events_inserted, 0))


def set_lag(partitions: Iterable[tuple[str, int, int]]) -> None:
    """Sets the lag gauge for the assigned partitions and drops the others.

    Args:
        partitions: ``(topic, partition, lag in records)`` of every assigned partition.
    """
    seen: set[tuple[str, str]] = set()
    for topic, partition, lag in partitions:
        labels = (topic, str(partition))
        CONSUMER_LAG.labels(*labels).set(lag)
        seen.add(labels)
    for labels in _lag_labels - seen:
        CONSUMER_LAG.remove(*labels)
    _lag_labels.clear()
    _lag_labels.update(seen)


class SinkStats:
    """Counters of one sink for its ``__repr__`` and the periodic summary log line."""

    def __init__(self) -> None:
        self.batches = self.lines = self.events = self.dead_lettered = 0
        self.rejoins = 0
        self._since = time.monotonic()
        self._lines_since = 0

    def add(self, report: _Report) -> None:
        """Counts one batch's report."""
        self.batches += 1
        self.lines += report.lines
        self.events += report.events
        self.dead_lettered += report.dead_lettered
        self._lines_since += report.lines

    def summary_due(self) -> bool:
        """Returns: True once ``SUMMARY_EVERY_S`` passed since the last summary."""
        return time.monotonic() - self._since >= SUMMARY_EVERY_S

    def log_summary(self, lag: int | None) -> None:
        """Logs the ``sink progress`` line (rate since the last one, totals, lag) and restarts."""
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


def log_retry(state: RetryCallState) -> None:
    """Counts and logs one retried archive write (a tenacity ``before_sleep`` hook)."""
    WRITE_RETRIES.inc()
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    logger.warning(
        "archive unavailable, retrying attempt=%d wait_s=%.1f error=%s",
        state.attempt_number,
        state.upcoming_sleep,
        error,
    )


def serve(port: int) -> None:
    """Serves ``/metrics`` on ``port`` (all interfaces) from a daemon thread.

    Raises:
        OSError: The port is taken.
    """
    start_http_server(port)
