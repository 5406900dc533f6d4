"""The stall rule of :mod:`pipeline.kafka.stall`, observation by observation."""

from __future__ import annotations

import pytest

from pipeline.kafka.stall import PartitionOffsets, StallWatch

TP = ("chat.lines", 0)
OTHER = ("chat.lines", 1)
TIMEOUT_S = 30.0
GAP_S = 15.0


def _observe(watch: StallWatch, rows: list[tuple[float, int, int, bool]]) -> list[list[object]]:
    """Feeds ``(now, committed, end, in_flight)`` rows for :data:`TP`; returns each answer."""
    return [
        list(watch.observe(now, {TP: PartitionOffsets(committed, end)}, in_flight=busy))
        for now, committed, end, busy in rows
    ]


@pytest.mark.parametrize(
    ("rows", "stalled_at"),
    [
        # records wait, the offset never moves, nothing in flight: stalled once 30 s passed
        ([(0, 5, 9, False), (15, 5, 9, False), (30, 5, 9, False)], [2]),
        # reported again only after another full timeout
        (
            [
                (0, 5, 9, False),
                (15, 5, 9, False),
                (30, 5, 9, False),
                (45, 5, 9, False),
                (60, 5, 9, False),
            ],
            [2, 4],
        ),
        # observations further apart than the gap (the process was stopped): a fresh stretch
        ([(0, 5, 9, False), (12, 5, 9, False), (30, 5, 9, False), (40, 5, 9, False)], []),
        ([(0, 5, 9, False), (20, 5, 9, False), (35, 5, 9, False), (50, 5, 9, False)], [3]),
        # the offset moves: progress, the stretch starts again
        ([(0, 5, 9, False), (10, 6, 9, False), (25, 6, 9, False), (40, 6, 9, False)], [3]),
        # nothing waits (committed == end): never stalled, however long
        ([(0, 9, 9, False), (30, 9, 9, False), (60, 9, 9, False)], []),
        # work in flight at one observation resets the stretch (a write retried meanwhile)
        (
            [
                (0, 5, 9, False),
                (10, 5, 9, True),
                (20, 5, 9, False),
                (35, 5, 9, False),
                (49, 5, 9, False),
            ],
            [],
        ),
        (
            [
                (0, 5, 9, False),
                (10, 5, 9, True),
                (20, 5, 9, False),
                (35, 5, 9, False),
                (50, 5, 9, False),
            ],
            [4],
        ),
        # new records arrive but the group's offset stays: still a stall
        ([(0, 5, 9, False), (15, 5, 12, False), (30, 5, 20, False)], [2]),
    ],
)
def test_stall_watch_reports_a_partition_waiting_without_progress(
    rows: list[tuple[float, int, int, bool]], stalled_at: list[int]
) -> None:
    answers = _observe(StallWatch(TIMEOUT_S, GAP_S), rows)
    assert [n for n, answer in enumerate(answers) if answer] == stalled_at
    assert all(answer in ([], [TP]) for answer in answers)


def test_stall_watch_reports_only_the_partition_that_stalled() -> None:
    watch = StallWatch(TIMEOUT_S)
    for now, other_committed in ((0, 1), (15, 2), (30, 3)):
        offsets = {TP: PartitionOffsets(5, 9), OTHER: PartitionOffsets(other_committed, 9)}
        stalled = watch.observe(now, offsets, in_flight=False)
    assert stalled == [TP]
    assert watch.stalls == 1


def test_stall_watch_starts_afresh_when_the_watched_partitions_change() -> None:
    """A rebalance (another member rejoined) pauses every partition: not a stall of its own."""
    watch = StallWatch(TIMEOUT_S, GAP_S)
    both = {TP: PartitionOffsets(5, 9), OTHER: PartitionOffsets(2, 9)}
    watch.observe(0, both)
    watch.observe(15, {TP: PartitionOffsets(5, 9)})  # OTHER went to another member
    assert watch.observe(30, {TP: PartitionOffsets(5, 9)}) == []
    assert watch.observe(45, {TP: PartitionOffsets(5, 9)}) == [TP]


def test_stall_watch_forgets_partitions_no_longer_watched() -> None:
    watch = StallWatch(TIMEOUT_S, GAP_S)
    watch.observe(0, {TP: PartitionOffsets(5, 9)}, in_flight=False)
    watch.observe(10, {}, in_flight=False)  # revoked
    assert watch.observe(20, {TP: PartitionOffsets(5, 9)}, in_flight=False) == []
    assert watch.observe(35, {TP: PartitionOffsets(5, 9)}, in_flight=False) == []
    watch.forget()
    assert watch.observe(45, {TP: PartitionOffsets(5, 9)}, in_flight=False) == []


def test_stall_watch_skips_partitions_in_flight_but_not_the_others() -> None:
    """The sink: a batch of partition 1 being written does not hide partition 0's stall."""
    watch = StallWatch(TIMEOUT_S)
    offsets = {TP: PartitionOffsets(5, 9), OTHER: PartitionOffsets(2, 9)}
    for now in (0, 15, 30):
        stalled = watch.observe(now, offsets, busy={OTHER})
    assert stalled == [TP]
