"""parse_payload: payloads without nested JSON strings skip the walk and come out the same."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.chat import ToolCall
from pipeline.transcript.tool_calls import MAX_NESTING, parse_payload, unnest


def _call(result: str) -> ToolCall:
    return ToolCall.model_validate({"name": "svcSqlApi", "result": result})


def _walked(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return {k: unnest(v, MAX_NESTING) for k, v in value.items()}


NESTED = [
    ('{"vegaSpec": "{\\"mark\\": \\"bar\\"}"}', {"vegaSpec": {"mark": "bar"}}),
    ('{"rows": "[1, 2]"}', {"rows": [1, 2]}),
    ('{"a": "  {\\"b\\": 1}"}', {"a": {"b": 1}}),
    ('{"a": "\\n\\t[3]"}', {"a": [3]}),
    ('{"a": "\\u0020{\\"b\\": []}"}', {"a": {"b": []}}),
    ('{"a": "\u00a0[4]"}', {"a": "\u00a0[4]"}),  # JSON's own whitespace is only " \t\n\r"
    ('{"a": "\\u001c[5]"}', {"a": "\x1c[5]"}),
    ('{"a": ["x", {"b": "[\\"[6]\\"]"}]}', {"a": ["x", {"b": [[6]]}]}),
]


@pytest.mark.parametrize(("text", "expected"), NESTED)
def test_strings_holding_json_are_still_parsed(text: str, expected: dict[str, Any]) -> None:
    assert parse_payload(_call(text), "result") == (expected, None)


@pytest.mark.parametrize(
    "text",
    [
        '{"data": [[1, "x"], [2, null]], "schema": [{"name": "n"}], "totalRows": 2}',
        '{"note": "a {brace} and [bracket] later", "q": "say \\"hi\\""}',
        '{"a": "\\\\{not json"}',
        '{"a": "{not json either"}',
    ],
)
def test_payloads_without_json_strings_come_out_as_the_walk_gives(text: str) -> None:
    assert parse_payload(_call(text), "result") == (_walked(text), None)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [123456789012345678901234567890, "{\\"b\\": 1}"]}',  # beyond 64 bits
        '{"a": ["\\ud800", "[2]"]}',  # a lone surrogate
        '{"a": [Infinity, NaN, "[3]"], "n": 18446744073709551616}',
    ],
)
def test_members_orjson_cannot_write_are_searched_as_json_dumps_writes_them(text: str) -> None:
    value, error = parse_payload(_call(text), "result")
    assert error is None and repr(value) == repr(_walked(text))


def test_not_an_object_and_absent_parts_keep_their_answers() -> None:
    value, error = parse_payload(_call("[1]"), "result")
    assert value is None and error is not None and "not an object" in error
    assert parse_payload(_call("{}"), "input") == (None, None)


WHITESPACE = st.sampled_from(["", " ", "\n", "\t", "\u00a0", "\u2028", "\x1c", "\r\n "])
STRINGS = st.one_of(
    st.text(max_size=6),
    st.builds(lambda ws, inner: ws + json.dumps(inner), WHITESPACE, st.lists(st.integers())),
    st.builds(lambda ws: ws + '{"k": "[1]"}', WHITESPACE),
    st.sampled_from(["{", "[", "{]", "\\{", '"{']),
)
VALUES = st.recursive(
    st.none() | st.integers() | STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), VALUES, max_size=4), st.booleans())
def test_parse_payload_equals_the_walk_on_any_object(value: dict[str, Any], ascii: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii)
    assert parse_payload(_call(text), "result") == (_walked(text), None)
