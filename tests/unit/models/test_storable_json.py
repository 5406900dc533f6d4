"""storable_json: the fast path (a value returned as it is) against the walk, hostile inputs."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.archive import (
    REPLACEMENT_CHARACTER,
    _cleaned_json,
    _needs_cleaning,
    storable,
    storable_json,
    storable_text,
)

R = REPLACEMENT_CHARACTER
S = storable_text("\ud800")
"""A lone surrogate as text keeps a replacement character per byte of its UTF-8 form."""


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``[1] == (1,)`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(
            type(k) is type(k2) and _same(a[k], b[k2]) for k, k2 in zip(a, b, strict=True)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


HOSTILE: list[tuple[Any, Any]] = [
    ({"a": "x\x00y"}, {"a": f"x{R}y"}),
    ({"k\x00": 1}, {f"k{R}": 1}),
    ({"a": ["\ud800", "ok"]}, {"a": [S, "ok"]}),
    ({"\udfff": {"b": "\ud83d"}}, {storable_text("\udfff"): {"b": storable_text("\ud83d")}}),
    ({"a": [1.5, math.nan, math.inf, -math.inf]}, {"a": [1.5, None, None, None]}),
    ({"deep": [[[{"x": math.nan}]]]}, {"deep": [[[{"x": None}]]]}),
    ({"t": (1, 2)}, {"t": [1, 2]}),
    ((1, "a"), [1, "a"]),
    ({1: "a", 2.5: "b"}, {"1": "a", "2.5": "b"}),
    ({True: 1, None: 2}, {"True": 1, "None": 2}),
    ({"when": datetime(2026, 1, 2, tzinfo=UTC)}, {"when": datetime(2026, 1, 2, tzinfo=UTC)}),
    ({"a": "x\x00", "b": (3,), "c": math.nan}, {"a": f"x{R}", "b": [3], "c": None}),
]
"""(input, what storable_json must return)."""

CLEAN: list[Any] = [
    {},
    [],
    {"a": "NaN", "b": "Infinity", "c": "-Infinity"},
    {"emoji": "\U0001f600 café \u2028", "n": [0, -0.0, 1e308, 2**70, True, False, None]},
    {"nested": [{"rows": [[1, "x"], [2, None]]}], "empty": {"": ""}},
    ["plain", {"list": [1, 2, 3]}],
]


@pytest.mark.parametrize(("value", "expected"), HOSTILE)
def test_hostile_values_take_the_walk_and_are_cleaned(value: Any, expected: Any) -> None:
    assert _needs_cleaning(value)
    got = storable_json(value)
    assert _same(got, expected)
    assert _same(got, _cleaned_json(value))


@pytest.mark.parametrize("value", CLEAN)
def test_clean_values_are_returned_as_they_are(value: Any) -> None:
    assert not _needs_cleaning(value)
    assert storable_json(value) is value
    assert _same(_cleaned_json(value), value)


def test_literal_escape_text_is_a_false_alarm_that_still_comes_out_equal() -> None:
    value = {"text": "a literal \\u0000 is six characters, not NUL"}
    assert _needs_cleaning(value)
    assert _same(storable_json(value), value)


def test_strings_and_scalars_keep_their_own_rules() -> None:
    assert storable_json("a\x00\ud800") == f"a{R}{S}"
    assert S.count(R) == len(S) > 0
    assert storable_json(math.nan) is None
    assert storable_json(7) == 7
    assert storable(2**40) is None
    assert storable(["a\x00"]) == [f"a{R}"]


def test_a_cycle_fails_as_the_walk_does() -> None:
    value: list[Any] = []
    value.append(value)
    with pytest.raises(RecursionError):
        storable_json(value)


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None, min_codepoint=0), max_size=8)
    | st.sampled_from(["\x00", "\ud800", "\udc00x", "NaN", "\\u0000", "Infinity"])
)
KEYS = (
    st.text(alphabet=st.characters(min_codepoint=0), max_size=4)
    | st.sampled_from(["\x00", "\udfff", "a\x00"])
    | st.integers()
    | st.booleans()
    | st.none()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS, inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_fast_path_and_walk_agree_on_any_value(value: Any) -> None:
    got = storable_json(value)
    walked = _cleaned_json(value)
    assert _same(got, walked)
    if isinstance(got, dict | list):
        json.dumps(got, allow_nan=False).encode("utf-8")
        assert "\\u0000" not in json.dumps(got, ensure_ascii=False).replace("\\\\", "")


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON, st.booleans())
@settings(max_examples=400, deadline=None)
def test_a_line_storable_as_parsed_needs_no_cleaning(value: Any, nest: bool) -> None:
    """What :func:`storable_as_parsed` passes.

    Parsed (and its nested JSON strings parsed), is what :func:`storable_json` would return
    unchanged: the fast path loses nothing.
    """
    from models.archive import storable_as_parsed

    inner = json.dumps(value, ensure_ascii=False)
    text = json.dumps({"result": inner} if nest else {"value": value}, ensure_ascii=False)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: not a line the sink could have received
    if storable_as_parsed(raw):
        parsed = json.loads(raw)
        assert _same(storable_json(parsed), parsed)
        if nest:
            assert _same(storable_json(json.loads(parsed["result"])), json.loads(parsed["result"]))
