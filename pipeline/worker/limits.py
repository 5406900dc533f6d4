"""Adaptive concurrency per target and the worker's own headroom (pure: no I/O, no clock).

:class:`AimdLimit` finds how many streams a target (an agent: chat URL host and path) takes at
once. Additive increase, multiplicative decrease, as TCP's congestion window (RFC 5681 §3.1) and
Netflix's ``concurrency-limits`` ``AIMDLimit`` (backoff ratio 0.9):

* while no throttling was seen, every accepted call (a 2xx status: the agent serves it) raises
  the limit by 1 (slow start: the limit doubles per round trip); afterwards by ``1 / limit``
  (one per round);
* a throttled answer (429, or 503 with ``Retry-After``) multiplies it by ``backoff_ratio``, but
  never below the calls the agent is serving at that moment (streams past their first line:
  proof that it takes that many at once), so a run that found a concurrency limit stays at it
  instead of falling 10% below and climbing back one call per round (issue 13: with 2 s turns a
  500-job run is ten rounds, and the sawtooth kept 96% of the limit); a first-line latency that
  rose above ``latency_tolerance`` times the target's baseline (plus ``min_rise_s``) multiplies
  it by ``backoff_ratio`` with no such floor (the agent is slowing down while it serves);
* one decrease per round: a signal from a call admitted before the latest decrease (an older
  *epoch*) does not decrease again, so a burst of 429s answering one overshoot costs one step.

:class:`Headroom` says whether the worker process may take another job: the smoothed lag of
the event loop and the process's CPU share stay below their limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

BACKOFF_RATIO: Final = 0.9
LATENCY_TOLERANCE: Final = 2.0
MIN_RISE_S: Final = 0.5
LATENCY_SMOOTHING: Final = 0.2
"""Weight of a new first-line latency in the smoothed figure (exponential moving average)."""
BASELINE_DRIFT: Final = 0.01
"""How fast the latency baseline follows latencies above it (it drops to a lower one at once)."""
SPARE_RATIO: Final = 0.5
"""Jobs admitted ahead of a free stream slot, as a share of the limit (at least
:data:`MIN_SPARE`): they deliver their ``started`` event while the streams run, and call the
moment a stream ends, so a slot is not idle for a Kafka round trip between two jobs."""
MIN_SPARE: Final = 2


@dataclass
class AimdLimit:
    """The adaptive concurrency limit of one target in one worker (module docstring).

    Args:
        initial: Starting limit.
        minimum, maximum: Bounds of the limit.
        backoff_ratio: Factor of a decrease (0 < ratio < 1).
        latency_tolerance, min_rise_s: A smoothed first-line latency above
            ``baseline * latency_tolerance + min_rise_s`` seconds counts as a slow-down.

    Attributes:
        limit: The current limit (fractional; :attr:`allowed` is its floor).
        in_flight: Streams (calls) admitted and not released.
        serving: Those of them the agent accepted (answered with a 2xx status).
        prepared: Jobs admitted to this target (streaming or about to), at most
            :attr:`allowed` plus :attr:`spare`.
        epoch: Decreases so far; tickets carry the epoch they were admitted in.
        slow_start: True until the first decrease.
        baseline_s, smoothed_s: First-line latency baseline and moving average (None: no
            sample yet).
    """

    initial: float = 16.0
    minimum: int = 1
    maximum: int = 5000
    backoff_ratio: float = BACKOFF_RATIO
    latency_tolerance: float = LATENCY_TOLERANCE
    min_rise_s: float = MIN_RISE_S
    limit: float = field(init=False)
    in_flight: int = field(default=0, init=False)
    serving: int = field(default=0, init=False)
    prepared: int = field(default=0, init=False)
    epoch: int = field(default=0, init=False)
    slow_start: bool = field(default=True, init=False)
    baseline_s: float | None = field(default=None, init=False)
    smoothed_s: float | None = field(default=None, init=False)
    decreases: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not 0 < self.backoff_ratio < 1:
            raise ValueError(f"backoff_ratio must be in (0, 1), not {self.backoff_ratio}")
        self.limit = float(min(max(self.initial, self.minimum), self.maximum))

    @property
    def allowed(self) -> int:
        """Calls allowed in flight now: the limit's floor, at least ``minimum``."""
        return max(math.floor(self.limit), self.minimum)

    @property
    def spare(self) -> int:
        """Jobs that may be prepared beyond :attr:`allowed`.

        :data:`SPARE_RATIO` of it; in slow start as many as :attr:`allowed` (the limit doubles
        per round, so the next round's calls are ready when their slots open).
        """
        ratio = 1.0 if self.slow_start else SPARE_RATIO
        return max(math.ceil(self.allowed * ratio), MIN_SPARE)

    def try_prepare(self) -> bool:
        """Admits one job to prepare (below ``allowed + spare``). Returns: whether it was."""
        if self.prepared >= self.allowed + self.spare:
            return False
        self.prepared += 1
        return True

    def unprepare(self) -> None:
        """A job admitted by :meth:`try_prepare` ended."""
        self.prepared = max(self.prepared - 1, 0)

    def try_acquire(self) -> int | None:
        """Admits one call when fewer than :attr:`allowed` are in flight.

        Returns:
            The epoch to hand back with the call's signals, or None when the limit is reached.
        """
        if self.in_flight >= self.allowed:
            return None
        self.in_flight += 1
        return self.epoch

    def on_accepted(self) -> None:
        """A call admitted by :meth:`try_acquire` was accepted: it is served; the limit grows."""
        self.serving += 1
        step = 1.0 if self.slow_start else 1.0 / max(self.limit, 1.0)
        self.limit = min(self.limit + step, float(self.maximum))

    def release(self, *, served: bool = False) -> None:
        """A call admitted by :meth:`try_acquire` ended (``served``: after :meth:`on_accepted`)."""
        self.in_flight = max(self.in_flight - 1, 0)
        if served:
            self.serving = max(self.serving - 1, 0)

    def on_throttled(self, epoch: int) -> bool:
        """A call of ``epoch`` was throttled.

        Returns:
            True when this was the epoch's decrease: the limit fell to ``backoff_ratio`` of
            itself, but not below :attr:`serving` (module docstring).
        """
        return self._decrease(epoch, floor=self.serving)

    def on_first_line(self, epoch: int, latency_s: float) -> bool:
        """A call of ``epoch`` gave its first line ``latency_s`` seconds after it started.

        Returns:
            True when the limit decreased (the smoothed latency rose past the tolerance).
        """
        self._observe(latency_s)
        return self._slowed_down() and self._decrease(epoch)

    def _observe(self, latency_s: float) -> None:
        if self.smoothed_s is None or self.baseline_s is None:
            self.smoothed_s = self.baseline_s = latency_s
            return
        self.smoothed_s += LATENCY_SMOOTHING * (latency_s - self.smoothed_s)
        if latency_s < self.baseline_s:
            self.baseline_s = latency_s
        else:
            self.baseline_s += BASELINE_DRIFT * (latency_s - self.baseline_s)

    def _slowed_down(self) -> bool:
        if self.smoothed_s is None or self.baseline_s is None:
            return False
        return self.smoothed_s > self.baseline_s * self.latency_tolerance + self.min_rise_s

    def _decrease(self, epoch: int, floor: int = 0) -> bool:
        if epoch != self.epoch:
            return False
        self.limit = max(self.limit * self.backoff_ratio, float(floor), float(self.minimum))
        self.epoch += 1
        self.decreases += 1
        self.slow_start = False
        if self.smoothed_s is not None and self.baseline_s is not None:
            self.smoothed_s = self.baseline_s  # judge the new limit on fresh samples
        return True


@dataclass
class Headroom:
    """Whether a worker process can take another job, from periodic samples.

    Args:
        max_lag_s: Largest smoothed event-loop lag (seconds a timer fires late).
        max_cpu: Largest smoothed CPU share of one core (process CPU seconds per wall second).
        smoothing: Weight of a new sample in the moving averages.

    Attributes:
        lag_s, cpu: The smoothed figures.
        last_lag_s, last_cpu: The latest sample's.
    """

    max_lag_s: float = 0.1
    max_cpu: float = 0.9
    smoothing: float = 0.3
    lag_s: float = field(default=0.0, init=False)
    cpu: float = field(default=0.0, init=False)
    last_lag_s: float = field(default=0.0, init=False)
    last_cpu: float = field(default=0.0, init=False)

    def sample(self, *, lag_s: float, cpu_s: float, wall_s: float) -> None:
        """Adds one sample of timer lag and CPU share.

        The timer fired ``lag_s`` late; the process used ``cpu_s`` seconds of CPU in ``wall_s``
        seconds.
        """
        share = cpu_s / wall_s if wall_s > 0 else 0.0
        self.last_lag_s, self.last_cpu = max(lag_s, 0.0), share
        self.lag_s += self.smoothing * (self.last_lag_s - self.lag_s)
        self.cpu += self.smoothing * (share - self.cpu)

    @property
    def ok(self) -> bool:
        """True while both smoothed figures are under their limits."""
        return self.lag_s < self.max_lag_s and self.cpu < self.max_cpu

    @property
    def calm(self) -> bool:
        """True while the latest sample, too, is under both limits.

        Stricter than :attr:`ok`, which smooths a sudden load away for a few samples: a
        first-line latency measured while this is False may be this process's own delay.
        """
        return self.ok and self.last_lag_s < self.max_lag_s and self.last_cpu < self.max_cpu
