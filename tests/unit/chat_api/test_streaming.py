"""Running a turn: subscribers, the end callback before the last line, abort, error lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from chat_api import agent
from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.errors import ChatApiError
from chat_api.http.app import create_app
from chat_api.http.streaming import TurnRun, stored_message
from chat_api.planner.vocabulary import load_vocabulary
from chat_api.semantic.model import SemanticModel
from chat_api.settings import ChatApiSettings
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse
from models import wire

MARCH = "How many flights were there in March?"


@pytest.fixture(scope="module")
def toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


class Recorder:
    """An ``on_end`` that notes how many lines the first subscriber had when it ran."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.seen_at_end: int | None = None
        self.published_at_end: int | None = None
        self.received: list[dict[str, Any]] = []

    async def __call__(self, run: TurnRun) -> None:
        self.seen_at_end = len(self.received)
        self.published_at_end = run.published
        if self.fail:
            raise RuntimeError("database is gone")


def _run(toolbox: Toolbox, recorder: Recorder, **kwargs: Any) -> TurnRun:
    request = TurnRequest(chat_id="c", question=MARCH, user=UserContext(), memory_id="m")
    return TurnRun(
        Turn(request, toolbox=toolbox), question=MARCH, message_id=None, on_end=recorder, **kwargs
    )


async def _collect(run: TurnRun, recorder: Recorder) -> list[dict[str, Any]]:
    async for text in run.subscribe():
        recorder.received.append(json.loads(text))
    return recorder.received


async def test_the_end_callback_runs_before_the_last_line_is_published(toolbox: Toolbox) -> None:
    recorder = Recorder()
    run = _run(toolbox, recorder)
    run.start()
    lines = await _collect(run, recorder)
    assert lines[0]["id"] == wire.ID_CUTOFF
    assert lines[-1]["id"] == wire.ID_USAGE
    assert recorder.published_at_end == len(lines) - 1  # all but __usage__
    assert recorder.seen_at_end is not None
    assert recorder.seen_at_end < len(lines)
    assert run.outcome == "completed"
    assert [m.kind for m in run.messages] == ["tool", "tool", "answer"]


async def test_a_late_subscriber_gets_every_line_from_the_first(toolbox: Toolbox) -> None:
    recorder = Recorder()
    run = _run(toolbox, recorder)
    run.start()
    first = await _collect(run, recorder)
    late = [json.loads(text) async for text in run.subscribe()]
    assert late == first


async def test_an_abort_during_the_pause_ends_with_aborted_then_usage(toolbox: Toolbox) -> None:
    recorder = Recorder()
    run = _run(toolbox, recorder, line_delay_ms=5_000)
    run.start()
    async for text in run.subscribe():
        recorder.received.append(json.loads(text))
        if len(recorder.received) == 2:
            assert run.abort() is True
            assert run.abort() is False
    lines = recorder.received
    assert [line["id"] for line in lines[2:]] == [wire.ID_ABORTED, wire.ID_USAGE]
    assert [line["sort"] for line in lines] == [0, 1, 2, 3]
    assert run.outcome == "aborted"
    assert run.messages == []


async def test_a_failure_after_the_first_line_is_an_error_line(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_search(*args: Any) -> dict[str, Any]:
        raise ChatApiError("metadata search is down")

    monkeypatch.setattr(agent, "search_members", failing_search)
    recorder = Recorder()
    run = _run(toolbox, recorder)
    run.start()
    lines = await _collect(run, recorder)
    assert lines[0]["id"] == wire.ID_CUTOFF
    assert lines[-1] == {"error": "metadata search is down"}
    assert not any(line.get("graphPath") == ["final"] for line in lines)
    assert run.outcome == "failed"


async def test_an_unexpected_failure_is_an_internal_error_line(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crashing_search(*args: Any) -> dict[str, Any]:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(agent, "search_members", crashing_search)
    recorder = Recorder()
    run = _run(toolbox, recorder)
    run.start()
    assert (await _collect(run, recorder))[-1] == {"error": "internal error"}


async def test_a_turn_that_cannot_be_stored_ends_with_an_error_line(toolbox: Toolbox) -> None:
    recorder = Recorder(fail=True)
    run = _run(toolbox, recorder)
    run.start()
    lines = await _collect(run, recorder)
    assert lines[-1] == {"error": "the turn could not be stored: RuntimeError"}


def test_only_complete_tool_calls_and_final_answers_are_stored() -> None:
    call = {"name": "svcSqlApi", "input": "{}"}
    assert stored_message({"id": "t", "toolCall": call, "isInProcess": True}) is None
    done = stored_message({"id": "t", "toolCall": {**call, "result": "{}"}, "isInProcess": False})
    assert done is not None
    assert done.kind == "tool"
    delta = {"id": "d", "role": "assistant", "content": "x", "isDelta": True, "isInProcess": True}
    assert stored_message(delta) is None
    final = {"id": "f", "role": "assistant", "content": "A", "graphPath": ["final"]}
    answer = stored_message({**final, "isInProcess": False})
    assert answer is not None
    assert answer.content == "A"


async def test_an_unexpected_exception_before_streaming_is_a_json_500(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = ChatApiSettings(
        api_keys=(SecretStr("k"),), api_database_url=f"sqlite:///{tmp_path}/state.sqlite3"
    )
    app = create_app(settings, toolbox=toolbox)

    def broken(*args: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(app.state.service.threads, "create", broken)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        url = wire.CHAT_PATH_TEMPLATE.format(
            cloud_region="local", account_name="demo", agent_id="1"
        )
        body = {"input": MARCH, "sessionSettings": {"externalId": "alice"}}
        response = await client.post(url, json=body, headers={"Authorization": "Api-Key k"})
    assert response.status_code == 500
    assert response.json() == {"error": "internal error", "status": 500}
