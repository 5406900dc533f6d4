"""models.json_values.loads: the standard library's values and errors, whichever parser ran."""

from __future__ import annotations

import json
import math

import pytest

from models import json_values
from models.records import parse_line

SAME_AS_STDLIB = [
    '{"a": 1, "b": [1.5, -0, 1e2, "x"], "c": {"d": null, "e": true}}',
    '{"big": 18446744073709551616, "neg": -9223372036854775809}',
    "123456789012345678901234567890",
    '{"id": "12345678901234567890", "n": 1}',
    '{"s": "\\ud800 lone surrogate"}',
    '{"x": NaN, "y": Infinity}',
    '{"dup": 1, "dup": 2}',
    "[1e400]",
]


@pytest.mark.parametrize("text", SAME_AS_STDLIB)
def test_values_equal_the_standard_librarys(text: str) -> None:
    got, want = json_values.loads(text), json.loads(text)
    assert repr(got) == repr(want)  # repr: NaN != NaN, and 1 == 1.0 would hide a rounding
    assert type(got) is type(want)


def test_an_integer_beyond_64_bits_stays_an_exact_integer() -> None:
    got = json_values.loads('{"rows": [[18446744073709551617]]}')
    assert got["rows"][0][0] == 18446744073709551617
    assert isinstance(got["rows"][0][0], int)


@pytest.mark.parametrize("text", ["", "{", '{"a": }', "[1,]", "nul"])
def test_invalid_json_raises_the_standard_librarys_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as got:
        json_values.loads(text)
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(text)
    assert str(got.value) == str(want.value)


def test_a_line_with_a_huge_integer_keeps_it_exact() -> None:
    message, error = parse_line(
        b'{"id": "m", "state": {"n": 340282366920938463463374607431768211457}}'
    )
    assert error is None and message is not None
    assert message.state is not None and message.state["n"] == 2**128 + 1


def test_a_line_with_nan_still_parses() -> None:
    message, error = parse_line(b'{"id": "m", "sort": NaN}')
    assert error is None and message is not None and message.sort is not None
    assert math.isnan(message.sort)


def test_json_nested_past_the_recursion_limit_is_a_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        json_values.loads("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"id": "m", "state": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    ],
    ids=["bare", "in-a-message"],
)
def test_a_line_nested_past_the_recursion_limit_is_kept_with_its_parse_error(raw: bytes) -> None:
    """An agent's line may be anything; parsing it must not raise in the worker or the sink."""
    message, error = parse_line(raw)
    assert message is None
    assert error == "invalid JSON: nested deeper than the parser's recursion limit"


def test_an_integer_past_pythons_digit_limit_is_a_parse_error_not_an_exception() -> None:
    raw = b'{"id": "m", "state": {"n": ' + b"9" * 5_000 + b"}}"
    message, error = parse_line(raw)
    assert message is None and error is not None and "4300" in error
    with pytest.raises(json.JSONDecodeError, match="4300"):
        json_values.loads(raw.decode())


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("value", "deeper"),
    [
        (1, False),
        ([], False),
        (json.loads(_nested(100)), False),
        (json.loads(_nested(101)), True),
        ({"rows": [[1, 2]] * 1000, "deep": json.loads("[" * 101 + "]" * 101)}, True),
        ({"rows": [[1, 2]] * 1000, "text": "[" * 500}, False),
    ],
    ids=["scalar", "empty", "at-limit", "past-limit", "deep-beside-rows", "brackets-in-a-string"],
)
def test_deeper_than_counts_containers_not_brackets(value: object, deeper: bool) -> None:
    assert json_values.deeper_than(value) is deeper


@pytest.mark.parametrize("where", ["extra", "state", "toolCall"])
def test_a_line_nested_past_max_depth_is_kept_with_its_error_before_any_model_reads_it(
    where: str,
) -> None:
    raw = f'{{"id": "m", "role": "assistant", "{where}": {_nested(300)}}}'.encode()
    message, error = parse_line(raw)
    assert message is None
    assert error == f"invalid JSON: nested deeper than {json_values.MAX_DEPTH} levels"


def test_text_nested_deeper_than_the_archive_can_write_is_a_decode_error() -> None:
    assert json_values.loads(_nested(254)) == json.loads(_nested(254))
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 254 levels"):
        json_values.loads(_nested(255))
    big = "[18446744073709551616, " + "[" * 300 + "]" * 300 + "]"  # json.dumps writes it
    assert json_values.loads(big) == json.loads(big)
