"""A Kafka outage as three log lines and a metric, instead of a flood of library errors.

While a broker is unreachable, aiokafka logs a connection or metadata error for every retry
(one worker wrote 1,421 ERROR lines in a 20 s outage: issue 13, point 5). :class:`OutageLog`
is a :class:`logging.Filter` on the process's handlers that turns that into:

* one WARNING when the outage starts (the first connection-type record of ``aiokafka`` or
  ``kafka``, quoted),
* a WARNING reminder every ``remind_s`` with the outage's duration, the records held back and
  the last of them (what the library says now: still no broker, or a group it cannot rejoin),
* one WARNING when it ends: no connection-type record for ``quiet_s`` seconds (the library
  retries every 0.1-2 s while the broker is away, and says nothing once it is back).

While an outage lasts, every WARNING-or-worse record of those libraries is held back and
counted; outside one they pass unchanged, as do records of every other logger. The metrics
:data:`pipeline.metrics.KAFKA_OUTAGE` (1 during an outage), ``..._OUTAGE_SECONDS``,
``..._OUTAGES`` and ``..._LOG_RECORDS_HELD`` show it. The clock (:meth:`OutageLog.tick`) runs in
a daemon thread started by :func:`install_outage_log`, so it works under any event loop.
Source of the messages: aiokafka's ``client.py``, ``consumer/fetcher.py``,
``consumer/group_coordinator.py``, ``producer/sender.py`` (0.12).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from pipeline import metrics

logger = logging.getLogger(__name__)

LIBRARY_LOGGERS: Final = ("aiokafka", "kafka")
REMIND_S: Final = 30.0
QUIET_S: Final = 5.0
TICK_S: Final = 1.0
LAST_HELD_CHARS: Final = 300
CONNECTION_MESSAGES: Final = (
    "Unable connect to",
    "Unable to update metadata",
    "Failed fetch messages from",
    "Failed fetch offsets from",
    "Heartbeat send request failed",
    "Heartbeat failed",
    "Heartbeat session expired",
    "Group Coordinator Request failed",
    "FindCoordinator Request failed",
    "Cannot send %r to",
    "Could not send %r",
    "Marking the coordinator dead",
    "Failed to commit",
    "Auto offset commit failed",
)
"""Starts of the library's message templates (``record.msg``) that mean "no broker"."""
CONNECTION_ERRORS: Final = frozenset(
    {
        "KafkaConnectionError",
        "NodeNotReadyError",
        "RequestTimedOutError",
        "CoordinatorNotAvailableError",
        "NotCoordinatorForGroupError",
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "TimeoutError",
    }
)
"""Names of exception types among a record's arguments that mean "no broker"."""


class OutageLog(logging.Filter):
    """Summarises a Kafka outage in the log (module docstring); thread-safe.

    Args:
        libraries: Logger names (and their children) whose records are summarised.
        remind_s: Seconds between two reminders while an outage lasts.
        quiet_s: Seconds without a connection-type record after which the outage has ended.
        clock: Monotonic seconds (tests pass their own).
        emit: Writes one of our own lines (level, message); defaults to this module's logger.
    """

    def __init__(
        self,
        libraries: Iterable[str] = LIBRARY_LOGGERS,
        *,
        remind_s: float = REMIND_S,
        quiet_s: float = QUIET_S,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[int, str], None] | None = None,
    ) -> None:
        super().__init__()
        self._prefixes = tuple(libraries)
        self.remind_s, self.quiet_s = remind_s, quiet_s
        self._clock = clock
        self._emit = emit or logger.log
        self._lock = threading.RLock()
        self.started_at: float | None = None
        self._last_seen = self._last_reminder = self._last_tick = 0.0
        self.held = 0
        self.outages = 0
        self.last_held: str = ""

    def __repr__(self) -> str:
        state = "outage" if self.started_at is not None else "ok"
        return f"<OutageLog state={state} outages={self.outages} held={self.held}>"

    @property
    def active(self) -> bool:
        """Whether an outage is going on."""
        return self.started_at is not None

    def filter(self, record: logging.LogRecord) -> bool:
        """Returns: whether ``record`` is written (False: held back as part of an outage)."""
        decided = getattr(record, "_chatscribe_outage", None)
        if decided is not None:  # the same record reaching a second handler
            return bool(decided)
        keep = self._decide(record)
        record._chatscribe_outage = keep
        return keep

    def tick(self) -> None:
        """Ends a quiet outage, reminds of a long one, and adds to the outage seconds."""
        with self._lock:
            if self.started_at is None:
                return
            now = self._clock()
            metrics.KAFKA_OUTAGE_SECONDS.inc(max(now - self._last_tick, 0.0))
            self._last_tick = now
            if now - self._last_seen >= self.quiet_s:
                self._end(now)
            elif now - self._last_reminder >= self.remind_s:
                self._last_reminder = now
                self._say(
                    logging.WARNING,
                    f"kafka outage continues duration_s={now - self.started_at:.0f}"
                    f" held_records={self.held} last_error={self.last_held!r}",
                )

    def _decide(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not self._is_library(record.name):
            return True
        connection = _is_connection(record)
        with self._lock:
            now = self._clock()
            if self.started_at is None:
                if not connection:
                    return True
                self._start(now, record)
            if connection:
                self._last_seen = now
            self.held += 1
            self.last_held = record.getMessage()[:LAST_HELD_CHARS]
            metrics.KAFKA_LOG_RECORDS_HELD.inc()
        return False

    def _start(self, now: float, record: logging.LogRecord) -> None:
        self.started_at = self._last_seen = self._last_reminder = self._last_tick = now
        self.held = 0
        self.outages += 1
        metrics.KAFKA_OUTAGE.set(1)
        metrics.KAFKA_OUTAGES.inc()
        self._say(
            logging.WARNING,
            f"kafka outage started: cannot reach the broker logger={record.name}"
            f" first_error={record.getMessage()[:300]!r}",
        )

    def _end(self, now: float) -> None:
        assert self.started_at is not None
        duration = self._last_seen - self.started_at
        self._say(
            logging.WARNING,
            f"kafka outage ended duration_s={duration:.1f} held_records={self.held}"
            f" quiet_for_s={now - self._last_seen:.1f}",
        )
        self.started_at = None
        metrics.KAFKA_OUTAGE.set(0)

    def _say(self, level: int, message: str) -> None:
        self._emit(level, message)

    def _is_library(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self._prefixes)


def _is_connection(record: logging.LogRecord) -> bool:
    template = record.msg if isinstance(record.msg, str) else ""
    if template.startswith(CONNECTION_MESSAGES):
        return True
    args = record.args if isinstance(record.args, tuple) else ()
    found = [*args, record.exc_info[1] if record.exc_info else None]
    return any(type(arg).__name__ in CONNECTION_ERRORS for arg in found if arg is not None)


_installed: OutageLog | None = None


def install_outage_log(
    *, remind_s: float = REMIND_S, quiet_s: float = QUIET_S, tick_s: float = TICK_S
) -> OutageLog:
    """Adds one :class:`OutageLog` to every handler of the root logger and starts its clock.

    Call at process start, after logging is configured (``chatscribe worker``, ``sink``);
    a second call returns the first filter.

    Returns:
        The filter (its ``outages`` and ``held`` counters, its ``active`` flag).
    """
    global _installed
    if _installed is not None:
        return _installed
    summary = OutageLog(remind_s=remind_s, quiet_s=quiet_s)
    for handler in logging.getLogger().handlers:
        handler.addFilter(summary)
    _installed = summary

    def clock() -> None:
        while True:
            time.sleep(tick_s)
            summary.tick()

    threading.Thread(target=clock, name="kafka-outage-clock", daemon=True).start()
    return summary
