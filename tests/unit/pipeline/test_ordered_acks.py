"""Acks released in offset order per partition (pipeline.worker.ordered_acks)."""

from __future__ import annotations

import pytest

from pipeline.worker.ordered_acks import OrderedAcks


def test_ordered_acks_later_record_is_held_until_the_earlier_one_ends() -> None:
    acks: OrderedAcks[str] = OrderedAcks()
    for offset in (31, 32, 33):
        acks.begin("p0", offset)
    assert acks.finish("p0", 32, "e32") == []
    assert acks.finish("p0", 33, "e33") == []
    assert acks.running() == 1
    assert acks.finish("p0", 31, "e31") == ["e31", "e32", "e33"]
    assert acks.running() == 0
    assert repr(acks) == "<OrderedAcks running=0 held=0>"


def test_ordered_acks_partitions_do_not_hold_each_other() -> None:
    acks: OrderedAcks[str] = OrderedAcks()
    acks.begin("p0", 5)
    acks.begin("p1", 6)
    assert acks.finish("p1", 6, "p1@6") == ["p1@6"]
    assert repr(acks) == "<OrderedAcks running=1 held=0>"
    assert acks.finish("p0", 5, "p0@5") == ["p0@5"]


def test_ordered_acks_releases_up_to_the_next_running_record() -> None:
    acks: OrderedAcks[int] = OrderedAcks()
    for offset in range(4):
        acks.begin("p", offset)
    assert acks.finish("p", 2, 2) == []
    assert acks.finish("p", 0, 0) == [0]
    assert repr(acks) == "<OrderedAcks running=2 held=1>"
    assert acks.finish("p", 1, 1) == [1, 2]
    assert acks.finish("p", 3, 3) == [3]


def test_ordered_acks_finishing_twice_or_unknown_is_an_error() -> None:
    acks: OrderedAcks[int] = OrderedAcks()
    acks.begin("p", 1)
    acks.begin("p", 2)
    acks.finish("p", 2, 2)
    with pytest.raises(KeyError):
        acks.finish("p", 2, 2)
    with pytest.raises(KeyError):
        acks.finish("q", 1, 1)
