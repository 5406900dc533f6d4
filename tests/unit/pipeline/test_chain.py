from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models.records import LineEnvelope
from pipeline.archive.chain import GENESIS, extend, line_key, link, raw_sha256
from pipeline.archive.replay import StoredLine, by_sort

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _line(n: int, raw: bytes = b"{}", job: str = "j") -> LineEnvelope:
    return LineEnvelope.from_raw(
        job_id=job, attempt=1, line_no=n, raw=raw, received_at=T0 + timedelta(seconds=n)
    )


def test_extend_chains_contiguous_lines_and_stops_at_a_gap() -> None:
    heads: dict[tuple[str, int], tuple[int, bytes]] = {}
    first = extend([_line(2), _line(1), _line(4)], heads)
    assert sorted(first) == [("j", 1, 1), ("j", 1, 2)]
    assert heads[("j", 1)][0] == 2
    second = extend([_line(3), _line(3)], heads)
    assert list(second) == [("j", 1, 3)]
    expected = link(
        first[("j", 1, 2)], line_key("j", 1, 3, T0 + timedelta(seconds=3), True), raw_sha256(b"{}")
    )
    assert second[("j", 1, 3)] == expected


def test_chain_depends_on_bytes_time_and_order() -> None:
    key = line_key("j", 1, 1, T0, True)
    base = link(GENESIS, key, raw_sha256(b"a"))
    assert base != link(GENESIS, key, raw_sha256(b"b"))
    assert base != link(
        GENESIS, line_key("j", 1, 1, T0 + timedelta(microseconds=1), True), raw_sha256(b"a")
    )
    assert base != link(GENESIS, line_key("j", 1, 1, T0, False), raw_sha256(b"a"))


def test_replay_sorted_puts_lines_without_sort_behind_the_highest_sort_reached() -> None:
    def stored(n: int, sort: float | None) -> StoredLine:
        return StoredLine(n, T0, str(n).encode(), True, sort, None)

    lines = [stored(1, 0), stored(2, 3), stored(3, 1), stored(4, None), stored(5, 2)]
    assert [line.line_no for line in by_sort(lines)] == [1, 3, 5, 2, 4]
    assert stored(1, 0).wire_bytes() == b"1\n"
