"""The collector settings of the pipeline's processes (pipeline.collector)."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from pipeline import collector


class _Node:
    other: object = None


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
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    del first, second
    assert gc.collect() >= 2


@pytest.mark.usefixtures("restored")
def test_what_a_pause_allocated_is_frozen_not_scanned_and_still_freed_by_refcount() -> None:
    gc.enable()
    with collector.collector_paused():
        batch = [{"line": n} for n in range(5000)]
        probe = weakref.ref(_Node())  # freed at once: no reference left
    assert gc.get_freeze_count() >= len(batch)
    assert gc.get_count()[0] < 100  # nothing left for the next young collection to scan
    assert probe() is None
    watched = _Node()
    alive = weakref.ref(watched)
    del watched
    assert alive() is None


@pytest.mark.usefixtures("restored")
def test_a_cycle_frozen_by_a_pause_is_collected_by_the_next_full_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collector, "_last_full", time.monotonic())
    with collector.collector_paused():
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        cycle = weakref.ref(first)
        del first, second
    gc.collect()
    assert cycle() is not None  # frozen: automatic and explicit collections skip it
    monkeypatch.setattr(collector, "_last_full", time.monotonic() - collector.FULL_EVERY_S)
    with collector.collector_paused():
        pass
    assert cycle() is None


@pytest.mark.usefixtures("restored")
def test_a_pause_ends_with_the_collector_on_only_if_it_was_on() -> None:
    gc.enable()
    with collector.collector_paused():
        assert not gc.isenabled()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pauser found it off
    assert gc.isenabled()
