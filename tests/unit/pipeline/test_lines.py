from __future__ import annotations

import pytest

from pipeline.chat.lines import NdjsonSplitter, RawLine


def _split(chunks: list[bytes]) -> list[RawLine]:
    splitter = NdjsonSplitter()
    out = [line for chunk in chunks for line in splitter.feed(chunk)]
    tail = splitter.finish()
    return [*out, tail] if tail is not None else out


def _raws(lines: list[RawLine]) -> list[bytes]:
    return [line.raw for line in lines]


STREAM = b'{"id":"__cutoff__"}\n{"content":"h\xc3\xa9"}\r\n\n{"id":"__usage__"}\n'
EXPECTED = [b'{"id":"__cutoff__"}', b'{"content":"h\xc3\xa9"}\r', b"", b'{"id":"__usage__"}']


def test_splitter_yields_each_line_of_one_chunk() -> None:
    assert _split([STREAM]) == [RawLine(raw) for raw in EXPECTED]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_splitter_lines_split_across_chunk_boundaries_come_out_whole(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert _split(chunks) == [RawLine(raw) for raw in EXPECTED]


def test_splitter_every_split_point_gives_the_same_lines() -> None:
    for cut in range(len(STREAM) + 1):
        assert _raws(_split([STREAM[:cut], STREAM[cut:]])) == EXPECTED


def test_splitter_keeps_carriage_returns() -> None:
    assert _raws(_split([b"a\r\nb\r\n"])) == [b"a\r", b"b\r"]


def test_splitter_keeps_empty_lines() -> None:
    assert _raws(_split([b"\n\n", b"x\n\n"])) == [b"", b"", b"x", b""]


def test_splitter_passes_invalid_utf8_untouched() -> None:
    raw = b'{"content":"\xff\xfe\xc3"}'
    assert _split([raw[:13], raw[13:] + b"\n"]) == [RawLine(raw)]


def test_splitter_finish_returns_unterminated_tail() -> None:
    splitter = NdjsonSplitter()
    assert splitter.feed(b'{"a":1}\n{"b":') == [RawLine(b'{"a":1}')]
    assert splitter.pending_bytes == 5
    assert splitter.finish() == RawLine(b'{"b":', terminated=False)
    assert splitter.finish() is None


def test_splitter_finish_after_newline_returns_none() -> None:
    splitter = NdjsonSplitter()
    splitter.feed(b"x\n")
    assert splitter.finish() is None


def test_splitter_empty_stream_and_empty_chunks_yield_nothing() -> None:
    splitter = NdjsonSplitter()
    assert splitter.feed(b"") == []
    assert splitter.finish() is None


def test_splitter_reassembles_a_20_mib_line_from_small_chunks() -> None:
    big = b'{"content":"' + b"x" * (20 * 1024 * 1024) + b'"}'
    stream = b"first\n" + big + b"\nlast"
    chunk = 64 * 1024
    lines = _split([stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    assert [len(line.raw) for line in lines] == [5, len(big), 4]
    assert lines[1].raw == big
    assert lines[2] == RawLine(b"last", terminated=False)


def test_splitter_repr_shows_counters() -> None:
    splitter = NdjsonSplitter()
    splitter.feed(b"a\nb")
    assert repr(splitter) == "<NdjsonSplitter bytes_fed=3 lines_out=1 pending_bytes=1>"
