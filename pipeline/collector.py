"""CPython's cyclic garbage collector in the long-running pipeline processes (worker, sink).

Reference counting frees nearly everything the pipeline allocates; the cyclic collector exists for
the reference cycles it cannot free, and it pays for that by scanning container objects that
survive. With CPython's default thresholds (700, 10, 10) a busy process paid for it heavily:

* a worker driving 1,000 LLM-paced streams (``bench.drive --mode worker``, uvloop, 150,000
  lines) ran 14 full collections of ~120 ms each, over every stream's state and everything the
  imports built: 2.3 s of collection in 9.4 s of CPU (24%), and each full collection stalled the
  event loop for its whole length;
* the sink's batches allocate thousands of envelopes, rows and tuples that all survive their
  first collections (:func:`collector_paused`).

:func:`settle` is called once a process has imported and built what it lives with: that heap is
moved out of the collector's sight (``gc.freeze``) and collections are made rarer
(:data:`THRESHOLDS`). Same worker run: 0.36 s of collection, 62 → 50 µs of CPU per line, line
latency p50 10.5 → 4.6 ms. Cycles are still collected, later: a young object is scanned after
5,000 allocations instead of 700, and a full collection follows 100 middle ones instead of 10
(at 1,000 streams, about once a minute). Source: https://docs.python.org/3/library/gc.html
(``gc.freeze``, ``gc.set_threshold``).
"""

from __future__ import annotations

import atexit
import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

FULL_EVERY_S: Final = 30.0
"""Longest time objects frozen after a pause (:func:`collector_paused`) wait for a collection."""
THRESHOLDS: Final = (5000, 20, 100)
"""``gc.set_threshold`` of the pipeline's processes: allocations before a young collection,
young collections before a middle one, middle ones before a full one (the collector still
skips a full one while the objects promoted since the last are under a quarter of the heap)."""


def settle() -> None:
    """Collects once, freezes what is left and sets :data:`THRESHOLDS` (module docstring).

    Call it in the process's entry point after start-up: objects made before are not scanned
    again. A frozen object is still freed by reference counting when its last reference goes;
    only a reference cycle among frozen objects is never collected (a start-up heap has none
    left after the collection; in the sink :func:`collector_paused` thaws everything now and
    then).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pauses the cyclic collector for the block; what the block allocated is frozen, not scanned.

    A sink batch allocates thousands of envelopes, rows and tuples that are still alive when
    the block ends (the caller holds the batch). Scanning them during the block cost a third of
    decoding time at 5,000 records per batch (bench ``sink-ingest``); re-enabling the collector
    at the end only moved the scan there: the first allocation after it collected every one of
    them (py-spy of the sink at 1,000 paced streams: 10% of its samples, in ``__exit__`` of the
    writer's ``with``). So the block ends with ``gc.freeze``: its objects go where no automatic
    collection looks, and are still freed by reference counting when the batch is dropped
    (decoding and writing make no reference cycles). Cycles other code made meanwhile wait
    for the next full collection, which thaws everything first, at most every
    :data:`FULL_EVERY_S` (:func:`_freeze_or_collect`).

    ``gc`` is process-wide: the sink's event loop and its writer thread may pause it at the
    same time; it is on again once the first pauser (the one that found it on) leaves.
    Sources: https://docs.python.org/3/library/gc.html (``gc.freeze``: "move them to a
    permanent generation and ignore them in all the future collections").
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _freeze_or_collect()
            gc.enable()


_last_full = time.monotonic()
_full_lock = threading.Lock()
# Thawed at exit, so the exit's own collection frees what is still frozen (nanobind extensions
# such as DuckDB's report "leaked instances" of objects left uncollected).
atexit.register(gc.unfreeze)


def _freeze_or_collect() -> None:
    """Freezes every tracked object; first thaws and collects all, once per FULL_EVERY_S."""
    global _last_full
    with _full_lock:
        now = time.monotonic()
        if now - _last_full >= FULL_EVERY_S:
            _last_full = now
            gc.unfreeze()
            gc.collect()
        gc.freeze()
