"""The worker's per-line hot path (issue 13). Pure: no I/O.

Byte checks instead of a parse per delta, lazy parsing of stream lines, and the sink's lingering
fetch.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from httpcore._synchronization import AsyncLock, current_async_library

from models.records import _parse_line_slowly, parse_line
from pipeline.chat.client import StreamLine, may_matter
from pipeline.sink.prefetch import LINGER_UNTIL_RECORDS, _linger
from pipeline.worker.attempts import AttemptState

NOW = datetime(2026, 11, 24, tzinfo=UTC)
DELTA = b'{"id":"m1","role":"assistant","content":" on time","isDelta":true,"sort":3}'
LINES_THAT_MATTER = [
    b'{"id":"__cutoff__","role":"assistant","state":{"chatId":"c1","isStreaming":true}}',
    b'{"error":"rate limited"}',
    b'{"id":"__aborted__","code":"chat_aborted"}',
    b'{"id":"__suspended__"}',
    b'{"id":"f","role":"assistant","content":"42","graphPath":["final"],"sort":9}',
    b'{"id":"__state__","state":{"chatId":"c1","isStreaming":false,"messages":[]}}',
]


@pytest.mark.parametrize("raw", LINES_THAT_MATTER)
def test_every_line_that_changes_the_attempt_state_is_flagged(raw: bytes) -> None:
    assert may_matter(raw)


def test_a_delta_is_not_flagged_and_observing_it_changes_nothing() -> None:
    assert not may_matter(DELTA)
    state = AttemptState()
    before = vars(state).copy()
    state.observe(parse_line(DELTA)[0])
    assert vars(state) == before


def _recorded_lines() -> list[bytes]:
    from bench.transcripts import load_transcripts

    hosted = Path(__file__).resolve().parents[2] / "data" / "hosted"
    lines = [raw for t in load_transcripts() for raw in t.lines]
    for path in sorted(hosted.glob("*.ndjson")):
        lines += path.read_bytes().split(b"\n")
    return lines


def test_unflagged_recorded_lines_change_no_attempt_state() -> None:
    lines = _recorded_lines()
    assert len(lines) > 500
    for raw in lines:
        if may_matter(raw):
            continue
        state = AttemptState()
        before = vars(state).copy()
        state.observe(parse_line(raw)[0])
        assert vars(state) == before, raw[:200]


def test_stream_line_parses_once_and_only_when_asked() -> None:
    line = StreamLine(1, LINES_THAT_MATTER[0], True, NOW)
    assert line._parsed is None
    assert line.message is not None and line.message.chat_id == "c1"
    assert line.message is line.message and line.parse_error is None
    broken = StreamLine(2, b"{not json", False, NOW)
    assert broken.message is None and broken.parse_error is not None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id":"x","content":NaN}',
        b'{"id":"x","content":"\\ud800"}',
        b'{"id":"x","sort":123456789012345678901234567890}',
        b"\xff\xfe{}",
        b"",
        b"   ",
        b"[1,2]",
        b'{"id":"x","sort":"not a number"}',
        DELTA,
    ],
)
def test_parse_line_gives_what_the_standard_library_path_gives(raw: bytes) -> None:
    fast, slow = parse_line(raw), _parse_line_slowly(raw)
    assert fast[1] == slow[1]
    dump = json.dumps
    assert (fast[0] and dump(fast[0].to_wire(), sort_keys=True)) == (
        slow[0] and dump(slow[0].to_wire(), sort_keys=True)
    )


@dataclass
class _Record:
    offset: int


class _Consumer:
    """Answers ``getmany`` from a script of answers; then nothing (after the timeout)."""

    def __init__(self, answers: list[dict[str, list[_Record]]]) -> None:
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[str, list[_Record]]:
        self.calls.append({"timeout_ms": timeout_ms, "max_records": max_records})
        if self.answers:
            return self.answers.pop(0)
        await asyncio.sleep(timeout_ms / 1000)
        return {}


def test_linger_adds_later_records_in_offset_order_without_repeats() -> None:
    batches = {"p0": [_Record(10), _Record(11)]}
    consumer = _Consumer([{"p0": [_Record(11), _Record(12)], "p1": [_Record(5)]}])
    asyncio.run(_linger(consumer, batches, linger_ms=30, max_records=5000))
    assert [r.offset for r in batches["p0"]] == [10, 11, 12]
    assert [r.offset for r in batches["p1"]] == [5]
    assert consumer.calls[0]["max_records"] == 4998


def test_linger_stops_once_the_batch_is_large_enough() -> None:
    many = [_Record(n) for n in range(LINGER_UNTIL_RECORDS)]
    batches = {"p0": [_Record(-1)]}
    consumer = _Consumer([{"p0": many}, {"p0": [_Record(10**6)]}])
    asyncio.run(_linger(consumer, batches, linger_ms=10_000, max_records=5000))
    assert len(consumer.calls) == 1 and len(batches["p0"]) == LINGER_UNTIL_RECORDS + 1


class _Finder(importlib.abc.MetaPathFinder):
    """Records every module the import system is asked to find (a cache miss)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        self.asked.append(fullname)


def test_httpcore_finds_its_async_library_without_searching_the_import_path() -> None:
    """The HTTP stack imports sniffio in every lock, event and cancellation shield (httpcore).

    Installed (pyproject.toml), the import is a ``sys.modules`` hit; missing, it searched
    ``sys.path`` on every call, 15% of the worker's samples at 100 short streams
    (``bench/history.md``, "fifth round").
    """
    finder = _Finder()

    async def setups() -> None:
        for _ in range(3):
            assert current_async_library() == "asyncio"
            AsyncLock().setup()

    sys.meta_path.insert(0, finder)
    try:
        asyncio.run(setups())
    finally:
        sys.meta_path.remove(finder)
    assert "sniffio" not in finder.asked
