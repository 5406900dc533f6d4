"""Acknowledgements released in offset order per partition (pure, no I/O).

Why: the worker drives several jobs of one partition at once, and they end in any order. faust
(faust-streaming 0.15, ``Consumer._new_offset``) commits the end of the first run of
consecutive *acked* offsets, and it detects a still-running offset before them only when the
committed offset is known and the gap is more than one: with a job running at offset 31 after a
commit of 31, acking 32 lets faust commit 33; on a fresh group or right after a rebalance (the
revoked partitions' committed offsets are dropped before the running jobs finish) any ack goes.
A worker killed then would lose the job at offset 31 for good. Releasing each ack only when
every lower offset of its partition that started here has ended keeps faust's committed offset
below every running job, so a job is redelivered unless its outcome is durable (issue 4,
"Delivery").

Usage: :meth:`OrderedAcks.begin` when a record is taken (before the first ``await``),
:meth:`OrderedAcks.finish` when its job is over; ack what ``finish`` returns, in order.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

_RUNNING = object()


class OrderedAcks(Generic[T]):
    """Holds back the ack of a record until the records before it in its partition ended.

    Partitions are any hashable (faust's ``TP``); offsets are Kafka offsets (ints); items are
    what the caller acks (faust events).
    """

    def __init__(self) -> None:
        self._open: dict[Hashable, dict[int, object]] = {}

    def __repr__(self) -> str:
        running = self.running()
        held = sum(len(offsets) for offsets in self._open.values()) - running
        return f"<OrderedAcks running={running} held={held}>"

    def begin(self, partition: Hashable, offset: int) -> None:
        """Records that the record at ``offset`` of ``partition`` started."""
        self._open.setdefault(partition, {})[offset] = _RUNNING

    def finish(self, partition: Hashable, offset: int, item: T) -> list[T]:
        """Records that the record at ``offset`` ended.

        Returns:
            The items now safe to ack, lowest offset first: this one and those held behind it,
            or nothing while a lower offset of the partition still runs.

        Raises:
            KeyError: ``offset`` of ``partition`` was not begun (or was forgotten).
        """
        offsets = self._open[partition]
        if offsets[offset] is not _RUNNING:
            raise KeyError((partition, offset))
        offsets[offset] = item
        released: list[T] = []
        while offsets:
            lowest = min(offsets)
            if offsets[lowest] is _RUNNING:
                break
            released.append(offsets.pop(lowest))  # type: ignore[arg-type]
        if not offsets:
            del self._open[partition]
        return released

    def running(self) -> int:
        """Returns: records begun and not finished."""
        return sum(1 for offsets in self._open.values() for v in offsets.values() if v is _RUNNING)
