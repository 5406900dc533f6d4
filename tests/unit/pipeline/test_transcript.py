from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from models import wire
from models.records import LineEnvelope
from pipeline.transcript.normalise import Transcript, normalise

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _lines(*raws: bytes, job_id: str = "j1", attempt: int = 1) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(job_id=job_id, attempt=attempt, line_no=n, raw=raw, received_at=AT)
        for n, raw in enumerate(raws, start=1)
    ]


def _run(*raws: bytes) -> Transcript:
    return normalise(_lines(*raws))


def _message(transcript: Transcript, message_id: str) -> Any:
    return next(m for m in transcript.messages if m.message_id == message_id)


def _payload(payload: dict[str, Any] | str) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload)


SQL_INPUT = {
    "sqlQuery": "SELECT carrier, MEASURE(count) FROM flights GROUP BY 1",
    "queryTitle": "Flights by carrier",
    "description": "Counts flights",
    "userRequest": "How many flights per carrier?",
    "memoryId": "mem-1",
    "vegaSpec": json.dumps({"mark": "bar"}),
}
SQL_RESULT = {
    **{k: v for k, v in SQL_INPUT.items() if k != "memoryId"},
    "schema": [{"name": "carrier", "column_type": "String"}, {"name": "n", "column_type": "Int64"}],
    "data": [["UA", "245"], ["AA", "120"]],
    "totalRows": 16,
    "uuid": "result-1",
}


def _tool_pair(message_id: str, name: str, given: Any, got: Any) -> tuple[bytes, bytes]:
    path = ["svc_data_analyst_agent", "tools"]
    first = {"name": name, "input": _payload(given)}
    second = {**first, "result": _payload(got)}
    return (
        _raw(id=message_id, role="assistant", graphPath=path, isInProcess=True, toolCall=first),
        _raw(id=message_id, role="assistant", graphPath=path, isInProcess=False, toolCall=second),
    )


def test_deltas_append_content_and_thinking_into_one_message() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", thinking="Let me ", isDelta=True, isInProcess=True),
        _raw(id="m1", role="assistant", thinking="think.", isDelta=True, isInProcess=True),
        _raw(id="m1", role="assistant", content="Hello ", isDelta=True, isInProcess=True),
        _raw(id="m1", role="assistant", content="world", isDelta=True, isInProcess=False),
    )
    (message,) = transcript.messages
    assert (message.content, message.thinking) == ("Hello world", "Let me think.")
    assert message.is_delta_merged and message.is_in_process is False
    assert (message.first_line, message.last_line) == (1, 4)


def test_line_with_is_delta_false_replaces_the_content() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", content="draft one", isDelta=True),
        _raw(id="m1", role="assistant", content="The final text.", isDelta=False),
    )
    assert _message(transcript, "m1").content == "The final text."


def test_lines_are_merged_in_line_order_whatever_the_input_order() -> None:
    lines = _lines(
        _raw(id="m1", role="assistant", content="a", isDelta=True),
        _raw(id="m1", role="assistant", content="b", isDelta=True),
    )
    assert normalise(list(reversed(lines))).messages[0].content == "ab"


def test_tool_call_sent_twice_under_one_id_is_one_complete_call() -> None:
    first, second = _tool_pair("t1", wire.TOOL_META, {"searchQuery": "flights"}, {"cubes": []})
    transcript = _run(first, second)
    (call,) = transcript.tool_calls
    assert (call.name, call.kind, call.complete) == ("svcMeta", "meta", True)
    assert call.input == {"searchQuery": "flights"}
    assert call.result == {"cubes": []}
    assert call.payload_error is None and call.error is None
    assert len(transcript.messages) == 1 and transcript.messages[0].tool_name == "svcMeta"
    assert transcript.sql_queries == ()


def test_tool_call_without_result_is_incomplete() -> None:
    first, _ = _tool_pair("t1", wire.TOOL_META, {"searchQuery": "x"}, {})
    (call,) = _run(first).tool_calls
    assert not call.complete and call.result is None and call.result_raw is None


def test_sql_tool_call_gives_a_sql_query_row_with_nested_json_parsed() -> None:
    transcript = _run(*_tool_pair("t2", wire.TOOL_SQL, SQL_INPUT, SQL_RESULT))
    (call,) = transcript.tool_calls
    assert call.kind == "sql"
    assert call.input is not None and call.input["vegaSpec"] == {"mark": "bar"}
    assert call.input_raw == json.dumps(SQL_INPUT)
    (query,) = transcript.sql_queries
    assert query.sql_query == SQL_INPUT["sqlQuery"]
    assert (query.query_title, query.memory_id, query.result_uuid) == (
        "Flights by carrier",
        "mem-1",
        "result-1",
    )
    assert query.result_schema == SQL_RESULT["schema"]
    assert (query.total_rows, query.returned_rows) == (16, 2)
    assert query.rows == [["UA", "245"], ["AA", "120"]]
    assert query.vega_spec == {"mark": "bar"} and query.error is None


@pytest.mark.parametrize(
    ("name", "kind"), [("cubeMeta", "meta"), ("cubeSqlApi", "sql"), ("cubeSqlApiWithChart", "sql")]
)
def test_hosted_tool_names_are_classified_and_kept_as_received(name: str, kind: str) -> None:
    transcript = _run(*_tool_pair("t1", name, {"searchQuery": "x"}, {"cubes": []}))
    assert (transcript.tool_calls[0].name, transcript.tool_calls[0].kind) == (name, kind)


def test_unknown_tool_with_sql_payload_counts_as_sql() -> None:
    transcript = _run(*_tool_pair("t1", "runQuery", {"sqlQuery": "SELECT 1"}, {"data": [[1]]}))
    assert transcript.tool_calls[0].kind == "sql"
    assert transcript.sql_queries[0].sql_query == "SELECT 1"


def test_older_sql_payload_maps_query_and_keeps_object_rows() -> None:
    rows = [{"carrier": "UA", "n": 245}]
    got = {"data": rows, "annotation": {"n": {"title": "Count"}}}
    transcript = _run(*_tool_pair("t1", "sqlApi", {"query": "SELECT 2"}, got))
    (query,) = transcript.sql_queries
    assert (query.sql_query, query.rows, query.returned_rows) == ("SELECT 2", rows, 1)
    assert transcript.tool_calls[0].result == got


def test_failed_tool_keeps_the_result_error() -> None:
    error = {"message": "column not found", "code": 400}
    transcript = _run(*_tool_pair("t1", wire.TOOL_SQL, SQL_INPUT, {"error": error}))
    assert transcript.tool_calls[0].error == error
    assert json.loads(transcript.sql_queries[0].error or "") == error


def test_tool_payload_that_is_not_json_is_kept_raw_with_the_reason() -> None:
    transcript = _run(*_tool_pair("t1", "weird", "not json {", "[1, 2]"))
    (call,) = transcript.tool_calls
    assert (call.input, call.result) == (None, None)
    assert (call.input_raw, call.result_raw) == ("not json {", "[1, 2]")
    assert call.payload_error is not None
    assert "input is not JSON" in call.payload_error
    assert "result is JSON list" in call.payload_error
    assert call.kind == "other"


def test_final_answer_is_the_last_final_assistant_message() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", content="first", graphPath=["final"]),
        _raw(id="m2", role="assistant", content="Answer: 42", graphPath=["final", "node"]),
        _raw(id="m3", role="assistant", content="working", graphPath=["svc_data_analyst_agent"]),
    )
    answer = transcript.answer
    assert (answer.source, answer.content, answer.message_id, answer.line_no) == (
        "final",
        "Answer: 42",
        "m2",
        2,
    )
    assert [m.is_final for m in transcript.messages] == [True, True, False]


@pytest.mark.parametrize(
    "line",
    [
        _raw(id="m1", role="assistant", content="deep", graphPath=["final", "x", "y"]),
        _raw(id="m1", role="user", content="question", graphPath=["final"]),
    ],
)
def test_messages_outside_the_final_answer_rule_are_not_final(line: bytes) -> None:
    transcript = _run(line)
    assert not transcript.messages[0].is_final
    assert transcript.answer.source != "final"


def test_without_final_message_the_last_complete_assistant_content_is_a_fallback() -> None:
    transcript = _run(
        _raw(id="m0", role="user", content="How many?"),
        _raw(id="m1", role="assistant", content="There are 42.", isInProcess=False),
        _raw(id="m2", role="assistant", content="Still typ", isDelta=True, isInProcess=True),
        _raw(id=wire.ID_USAGE, usage={"totalTokens": 3}),
    )
    answer = transcript.answer
    assert (answer.source, answer.content, answer.message_id) == ("fallback", "There are 42.", "m1")


def test_without_any_assistant_content_the_answer_source_is_none() -> None:
    transcript = _run(
        _raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "c1"}),
        _raw(id="m0", role="user", content="How many?"),
    )
    answer = transcript.answer
    assert (answer.source, answer.content, answer.message_id, answer.line_no) == (
        "none",
        None,
        None,
        None,
    )
    assert answer.chat_id == "c1"


def test_chat_id_comes_from_the_cutoff_line_and_sentinels_stay_messages() -> None:
    transcript = _run(
        _raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "chat-9"}),
        _raw(id=wire.ID_USAGE, usage={"llmCalls": 1}),
    )
    assert transcript.chat_id == "chat-9"
    cutoff, usage = transcript.messages
    assert cutoff.extra == {"state": {"chatId": "chat-9"}}
    assert usage.extra == {"usage": {"llmCalls": 1}}


def test_unknown_fields_are_preserved_in_extra() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", content="x", isStructuredResponse=True, newThing=[1]),
        _raw(id="m1", role="assistant", content="y", isDelta=True, later={"a": 1}),
    )
    assert transcript.messages[0].extra == {
        "isStructuredResponse": True,
        "newThing": [1],
        "later": {"a": 1},
    }


def test_error_lines_are_collected_and_form_no_message() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", content="partial"),
        _raw(error="tool exploded"),
        _raw(error={"code": 5}),
    )
    assert transcript.errors == ("tool exploded", '{"code": 5}')
    assert transcript.answer.stream_errors == ("tool exploded", '{"code": 5}')
    assert [m.message_id for m in transcript.messages] == ["m1"]


def test_malformed_lines_do_not_break_normalisation() -> None:
    transcript = _run(
        _raw(id="m1", role="assistant", content="Hello", isDelta=True),
        b'{"id": "m1", "content": ',
        b"\xff\xfe not utf-8",
        b"",
        _raw(id="m1", role="assistant", content=" there", isDelta=True, graphPath=["final"]),
    )
    assert [n for n, _ in transcript.parse_errors] == [2, 3, 4]
    assert transcript.answer.content == "Hello there"


def test_rows_carry_the_key_and_map_onto_the_tables() -> None:
    transcript = _run(*_tool_pair("t2", wire.TOOL_SQL, SQL_INPUT, SQL_RESULT))
    message = transcript.messages[0].to_row()
    assert (message["job_id"], message["attempt"], message["message_id"]) == ("j1", 1, "t2")
    assert message["graph_path"] == ["svc_data_analyst_agent", "tools"]
    assert transcript.answer.to_row()["stream_errors"] == []
    assert set(transcript.sql_queries[0].to_row()) >= {"sql_query", "rows", "vega_spec"}


def test_empty_attempt_needs_its_key() -> None:
    assert normalise([], job_id="j1", attempt=2).answer.source == "none"
    with pytest.raises(ValueError, match="exactly one"):
        normalise([])


def test_lines_of_two_attempts_are_refused() -> None:
    lines = _lines(_raw(id="a")) + _lines(_raw(id="b"), attempt=2)
    with pytest.raises(ValueError, match="exactly one"):
        normalise(lines)


def _state_fetch(messages: list[Any], *, usage_last: bool = True) -> list[bytes]:
    """A state fetch's stream as our Chat API sends it (chat_api.http.streaming.state_lines)."""
    state = {"chatId": "c9", "isStreaming": False}
    lines = [
        _raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state=state),
        _raw(id=wire.ID_STATE, sort=1, state={**state, "messages": messages}),
    ]
    if usage_last:
        lines.append(_raw(id=wire.ID_USAGE, sort=2, usage={"llmCalls": 0}))
    return lines


def test_state_fetch_answer_comes_from_the_thread_state() -> None:
    messages = [
        {"id": "q1", "role": "user", "content": "How many flights in March?"},
        {"id": "a1", "role": "assistant", "content": "28,834 flights."},
        {"id": "q2", "role": "user", "content": "And in April?"},
        {"id": "a2", "role": "assistant", "content": "28,330 flights."},
    ]
    answer = _run(*_state_fetch(messages)).answer
    assert (answer.source, answer.content, answer.message_id) == ("state", "28,330 flights.", "a2")
    assert answer.line_no == 2 and answer.chat_id == "c9"


def test_state_answer_of_an_earlier_question_does_not_count() -> None:
    messages = [
        {"id": "q1", "role": "user", "content": "How many flights in March?"},
        {"id": "a1", "role": "assistant", "content": "28,834 flights."},
        {"id": "q2", "role": "user", "content": "And in April?"},
    ]
    assert _run(*_state_fetch(messages)).answer.source == "none"


def test_state_answer_reads_hosted_agent_framework_messages() -> None:
    messages = [
        {"type": "human", "content": "Top carrier?", "id": "h1"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "sql"}], "id": "ai-tool"},
        {"type": "tool", "content": '[["UA", 58665]]', "id": "t1"},
        {"type": "ai", "content": [{"type": "text", "text": "UA, "}, "58,665 flights."]},
    ]
    answer = _run(*_state_fetch(messages)).answer
    assert (answer.source, answer.content) == ("state", "UA, 58,665 flights.")
    assert answer.message_id == wire.ID_STATE  # the state's message has no id


def test_final_line_wins_over_the_state_and_the_state_over_a_fallback() -> None:
    final = _raw(id="m1", role="assistant", graphPath=["final"], content="From the final line")
    interim = _raw(id="m0", role="assistant", content="Looking it up", isInProcess=False)
    messages = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "From state"}]
    with_final = _run(interim, final, *_state_fetch(messages)).answer
    assert (with_final.source, with_final.content) == ("final", "From the final line")
    without_final = _run(interim, *_state_fetch(messages)).answer
    assert (without_final.source, without_final.content) == ("state", "From state")
    no_state_answer = _run(interim, *_state_fetch([{"role": "user", "content": "Q"}])).answer
    assert (no_state_answer.source, no_state_answer.content) == ("fallback", "Looking it up")
