"""Branches of the data model over HTTP: ``activeBranchName`` and ``isDefaultBranch``.

Interface, "1. Chat", request body: queries run against the named branch; ``isDefaultBranch``
defaults to true without ``activeBranchName`` and false with it, and must be true for the main
branch. The ``dev`` branch (``chat_api/data_model/dev``) counts departed flights only and adds
``flights.cancelled_count``; the numbers are checked against hand-written DuckDB SQL.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from models import wire
from models.chat import StreamMessage
from models.tools import sql_result

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

MARCH = "How many flights were there in March?"


def _body(question: str | None = MARCH, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"sessionSettings": {"externalId": f"branch-{uuid.uuid4().hex[:10]}"}}
    if question is not None:
        body["input"] = question
    return {**body, **fields}


async def _lines(
    client: httpx.AsyncClient, server: RunningServer, body: dict[str, Any]
) -> list[StreamMessage]:
    async with client.stream("POST", server.chat_url(), json=body, headers=server.headers) as r:
        assert r.status_code == 200, await r.aread()
        return [StreamMessage.model_validate(json.loads(line)) async for line in r.aiter_lines()]


def _tool_result(lines: list[StreamMessage], name: str) -> dict[str, Any]:
    for message in lines:
        call = message.tool_call
        if call is not None and call.name == name and call.result is not None:
            parsed: dict[str, Any] = json.loads(call.result)
            return parsed
    raise AssertionError(f"no complete {name} call")


def _count(lines: list[StreamMessage]) -> int:
    for message in lines:
        if message.tool_call is not None and message.tool_call.name == wire.TOOL_SQL:
            result = sql_result(message.tool_call)
            if result is not None and result.data is not None:
                return int(float(result.data[0][-1]))
    raise AssertionError("no SQL result")


def _hand_count(server: RunningServer, where: str) -> int:
    warehouse = server.app.state.service.toolbox.warehouse
    ((count,),) = warehouse.query_raw(f"SELECT count(*) FROM flights WHERE {where}")
    return int(count)


async def test_without_a_branch_queries_run_against_main(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    lines = await _lines(client, server, _body())
    assert _count(lines) == _hand_count(server, "month = 3") == 28_834


async def test_the_dev_branch_runs_its_own_model(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    lines = await _lines(client, server, _body(activeBranchName="dev"))
    departed = _hand_count(server, "month = 3 AND dep_time IS NOT NULL")
    assert _count(lines) == departed
    assert departed < _hand_count(server, "month = 3")


async def test_each_branch_lists_its_own_members(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    """Both branches count cancelled flights; only main has the departed count and rate.

    Main counts them since issue 11; only main has the departed count and the cancellation rate.
    """
    question = "How many cancelled flights were there?"

    def members(lines: list[StreamMessage]) -> set[str]:
        found = _tool_result(lines, wire.TOOL_META)
        return {m["name"] for cube in found["cubes"] for m in cube["members"]}

    dev = await _lines(client, server, _body(question, activeBranchName="dev"))
    main = await _lines(client, server, _body(question))
    assert "flights.cancelled_count" in members(dev)
    assert "flights.departed_count" in members(main)
    assert "flights.departed_count" not in members(dev)


async def test_main_named_with_is_default_branch_true_is_main(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = _body(activeBranchName="main", isDefaultBranch=True)
    assert _count(await _lines(client, server, body)) == _hand_count(server, "month = 3")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"activeBranchName": "main"}, "isDefaultBranch: must be true"),
        ({"activeBranchName": "main", "isDefaultBranch": False}, "isDefaultBranch: must be true"),
        ({"activeBranchName": "dev", "isDefaultBranch": True}, "'dev' is not the default branch"),
        ({"isDefaultBranch": False}, "isDefaultBranch: false needs activeBranchName"),
        ({"activeBranchName": "feature-x"}, "unknown branch 'feature-x'; branches: dev, main"),
        ({"activeBranchName": "../main"}, "unknown branch '../main'"),
        ({"activeBranchName": "Main", "isDefaultBranch": True}, "unknown branch 'Main'"),
    ],
)
async def test_branch_rules_refuse_with_400_naming_the_field(
    server: RunningServer, client: httpx.AsyncClient, fields: dict[str, Any], message: str
) -> None:
    response = await client.post(server.chat_url(), json=_body(**fields), headers=server.headers)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]


async def test_a_thread_state_request_checks_the_branch_too(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    first = await _lines(client, server, _body())
    chat_id = first[0].state["chatId"] if first[0].state else None
    body = _body(None, chatId=chat_id, activeBranchName="nope")
    response = await client.post(server.chat_url(), json=body, headers=server.headers)
    assert response.status_code == 400
    assert "unknown branch 'nope'" in response.json()["error"]


async def test_a_dev_branch_model_is_loaded_once_and_kept(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    branches = server.app.state.service.branches
    await _lines(client, server, _body(activeBranchName="dev"))
    toolbox = branches.toolbox_for("dev", is_default_branch=False)
    await _lines(client, server, _body(activeBranchName="dev"))
    assert branches.toolbox_for("dev", is_default_branch=False) is toolbox
    assert branches.loaded() == ["dev", "main"]
    assert toolbox.warehouse is server.app.state.service.toolbox.warehouse
