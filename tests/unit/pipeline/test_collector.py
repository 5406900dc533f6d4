"""The collector settings of the pipeline's processes (pipeline.collector)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pipeline import collector


@pytest.fixture
def restored() -> Iterator[None]:
    """Puts the test process's collector back as it was (``gc`` is process-wide)."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()


@pytest.mark.usefixtures("restored")
def test_settle_freezes_the_heap_it_finds_and_makes_collections_rarer() -> None:
    gc.unfreeze()
    kept = [{"n": n} for n in range(1000)]  # containers alive at start-up
    collector.settle()
    assert gc.get_threshold() == collector.THRESHOLDS
    assert gc.get_freeze_count() >= len(kept)


@pytest.mark.usefixtures("restored")
def test_cycles_made_after_settling_are_still_collected() -> None:
    collector.settle()

    class Node:
        other: object = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    del first, second
    assert gc.collect() >= 2


@pytest.mark.usefixtures("restored")
def test_a_pause_ends_with_the_collector_on_only_if_it_was_on() -> None:
    gc.enable()
    with collector.collector_paused():
        assert not gc.isenabled()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pauser found it off
    assert gc.isenabled()
