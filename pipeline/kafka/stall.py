"""Stalled partitions: records wait, nothing is in flight, and the group's offset does not move.

A consumer can hold partitions and read nothing from them: a lookup that never returns, a
group member the coordinator forgot while the client still believes it belongs (issue 25, "no
silent stalls"). Lag alone does not show it (lag is also what a busy process has), so the
watchdogs of the worker (:mod:`pipeline.worker.app`) and the sink (:mod:`pipeline.sink.loop`)
feed :class:`StallWatch` with each partition's committed offset and end offset, and whether the
process has work in flight, every few seconds. The rule, stated once here and tested in
``tests/unit/pipeline/test_stall.py``:

    a partition is *stalled* when, for ``timeout_s`` seconds, its committed offset stayed below
    its end offset (records wait) and did not move, and nothing of it was in flight at any
    observation of that stretch.

Work in flight resets the stretch: the process is waiting on something else, which has its
own timeouts. For the worker that is any record being handled (a job running or waiting for
admission: its capacity, not a partition, is what is busy); for the sink, the partitions of the
batch being written (a batch retried while PostgreSQL is away holds every partition that has
records; a partition whose records never reach a batch is the stall). Pure logic: no I/O, no
clock of its own (``now`` is passed in).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_GAP_S", "STALL_CHECK_S", "PartitionOffsets", "StallWatch"]

STALL_CHECK_S: Final = 5.0
"""Seconds between two observations of a watchdog."""
MAX_GAP_S: Final = 3 * STALL_CHECK_S
"""Observations further apart start every stretch afresh (module docstring)."""

Partition = tuple[str, int]
"""``(topic, partition)``."""


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition's offsets at an observation.

    Attributes:
        committed: The group's committed offset (the next record it reads); 0 when none yet.
        end: The partition's end offset (high watermark): one past its last record.
    """

    committed: int
    end: int

    @property
    def waiting(self) -> bool:
        """True when records wait for the group (``committed < end``)."""
        return self.committed < self.end


@dataclass
class StallWatch:
    """Tells which partitions stalled (module docstring), from successive observations.

    Args:
        timeout_s: Seconds a partition may wait without progress (``worker_stall_timeout_s``,
            ``sink_stall_timeout_s``).
        max_gap_s: Longest time between two observations that continues a stretch.
    """

    timeout_s: float
    max_gap_s: float = MAX_GAP_S
    _last: float | None = None
    _since: dict[Partition, float] = field(default_factory=dict)
    _committed: dict[Partition, int] = field(default_factory=dict)
    stalls: int = 0

    def observe(
        self,
        now: float,
        offsets: Mapping[Partition, PartitionOffsets],
        *,
        in_flight: bool = False,
        busy: Collection[Partition] = (),
    ) -> list[Partition]:
        """Records one observation; returns the partitions stalled now (sorted).

        A partition reported is watched afresh, so a stall that lasts is reported again every
        ``timeout_s`` seconds, not at every observation.

        Args:
            now: Monotonic seconds.
            offsets: The watched partitions' offsets (those assigned, or the whole group's);
                a partition missing from it is no longer watched, and any change of the set
                starts every stretch afresh.
            in_flight: Whether the process has work in flight now (every partition's).
            busy: Partitions with work in flight now.
        """
        gap = self._last is not None and now - self._last > self.max_gap_s
        if gap or set(offsets) != set(self._committed):
            self._since.clear()
        self._last = now
        since: dict[Partition, float] = {}
        for tp, seen in offsets.items():
            if not seen.waiting or in_flight or tp in busy:
                continue
            moved = self._committed.get(tp) != seen.committed
            since[tp] = now if moved else self._since.get(tp, now)
        self._committed = {tp: seen.committed for tp, seen in offsets.items()}
        stalled = sorted(tp for tp, start in since.items() if now - start >= self.timeout_s)
        for tp in stalled:
            since[tp] = now
        self._since = since
        self.stalls += len(stalled)
        return stalled

    def forget(self) -> None:
        """Starts afresh (after a rejoin: the partitions may belong to others now)."""
        self._since.clear()
        self._committed.clear()
