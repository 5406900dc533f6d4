"""The embed page's pure parts: turns from stored messages, charts with inline rows, escaping."""

from __future__ import annotations

import json

from chat_api.http.embed import chart_of, script_json, thread_turns
from chat_api.state.threads import StoredMessage


def _sql_call(**result: object) -> dict[str, str]:
    return {"name": "svcSqlApi", "input": "{}", "result": json.dumps(result)}


SPEC = {"$schema": "v5", "title": "Flights by origin", "data": {"name": "result"}, "mark": "bar"}


def test_a_chart_gets_the_rows_as_values_with_numbers_parsed() -> None:
    call = _sql_call(
        vegaSpec=json.dumps(SPEC),
        schema=[{"name": "origin", "column_type": "String"}, {"name": "n", "column_type": "Int64"}],
        data=[["JFK", "111279"], ["LGA", 104662]],
    )
    chart = chart_of(call)
    assert chart is not None
    assert chart["title"] == "Flights by origin"
    assert chart["values"] == [{"origin": "JFK", "n": 111279.0}, {"origin": "LGA", "n": 104662}]
    assert chart["spec"]["data"] == {"values": chart["values"]}
    assert chart["spec"]["mark"] == "bar"


def test_no_chart_for_other_tools_failed_queries_or_missing_specs() -> None:
    assert chart_of({"name": "svcMeta", "result": "{}"}) is None
    assert chart_of(_sql_call(error="denied", code="access_denied")) is None
    assert chart_of(_sql_call(schema=[], data=[])) is None
    assert chart_of({"name": "svcSqlApi", "result": "not json"}) is None


def test_turns_group_questions_charts_and_answers() -> None:
    chart = _sql_call(
        vegaSpec=json.dumps(SPEC), schema=[{"name": "n", "column_type": "Int64"}], data=[[1]]
    )
    messages = [
        StoredMessage("u1", "user", "user", content="first?"),
        StoredMessage("t1", "assistant", "tool", tool_call={"name": "svcMeta", "result": "{}"}),
        StoredMessage("t2", "assistant", "tool", tool_call=chart),
        StoredMessage("a1", "assistant", "answer", content="one"),
        StoredMessage("u2", "user", "user", content="aborted?"),
    ]
    turns = thread_turns(messages)
    assert [t["question"] for t in turns] == ["first?", "aborted?"]
    assert [t["answer"] for t in turns] == ["one", None]
    assert [len(t["charts"]) for t in turns] == [1, 0]


def test_script_json_cannot_close_the_script_element() -> None:
    text = script_json({"question": "</script><script>alert(1)</script> & more"})
    assert "</script>" not in text
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"question": "</script><script>alert(1)</script> & more"}
