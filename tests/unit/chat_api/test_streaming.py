"""Serving a turn: abort between lines, errors after the stream started, 500s as JSON."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from chat_api import agent
from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.app import create_app
from chat_api.errors import ChatApiError
from chat_api.policies import UserContext
from chat_api.semantic import SemanticModel
from chat_api.settings import ChatApiSettings
from chat_api.streaming import turn_stream
from chat_api.vocabulary import load_vocabulary
from chat_api.warehouse import Warehouse
from models import wire

MARCH = "How many flights were there in March?"


@pytest.fixture(scope="module")
def toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


def _turn(toolbox: Toolbox) -> Turn:
    request = TurnRequest(chat_id="c", question=MARCH, user=UserContext(), memory_id="m")
    return Turn(request, toolbox=toolbox)


async def _collect(turn: Turn, event: asyncio.Event, **kwargs: Any) -> list[dict[str, Any]]:
    return [json.loads(text) async for text in turn_stream(turn, event, **kwargs)]


async def test_a_stream_runs_to_usage_when_not_aborted(toolbox: Toolbox) -> None:
    lines = await _collect(_turn(toolbox), asyncio.Event())
    assert lines[0]["id"] == wire.ID_CUTOFF
    assert lines[-1]["id"] == wire.ID_USAGE


async def test_an_abort_during_the_pause_ends_the_stream(toolbox: Toolbox) -> None:
    event = asyncio.Event()
    lines: list[dict[str, Any]] = []
    async for text in turn_stream(_turn(toolbox), event, line_delay_ms=5_000):
        lines.append(json.loads(text))
        if len(lines) == 2:
            event.set()
    assert [line["id"] for line in lines[2:]] == [wire.ID_ABORTED, wire.ID_USAGE]
    assert [line["sort"] for line in lines] == [0, 1, 2, 3]


async def test_a_failure_after_the_first_line_is_an_error_line(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_search(*args: Any) -> dict[str, Any]:
        raise ChatApiError("metadata search is down")

    monkeypatch.setattr(agent, "search_members", failing_search)
    lines = await _collect(_turn(toolbox), asyncio.Event())
    assert lines[0]["id"] == wire.ID_CUTOFF
    assert lines[-1] == {"error": "metadata search is down"}
    assert not any(line.get("graphPath") == ["final"] for line in lines)


async def test_an_unexpected_failure_is_an_internal_error_line(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crashing_search(*args: Any) -> dict[str, Any]:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(agent, "search_members", crashing_search)
    lines = await _collect(_turn(toolbox), asyncio.Event())
    assert lines[-1] == {"error": "internal error"}


async def test_an_unexpected_exception_before_streaming_is_a_json_500(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(ChatApiSettings(api_keys=(SecretStr("k"),)), toolbox=toolbox)

    def broken(owner: str) -> Any:
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
