"""The Chat API over HTTP against a real uvicorn: auth, errors, streams, threads, abort."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from models import wire
from models.chat import StreamMessage
from models.tools import sql_input, sql_result
from tests.integration.chat_api.chat_support import MARCH, session, stream_lines, wait_until_idle

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer


def auth(key: str) -> dict[str, str]:
    """Returns: an ``Authorization: Api-Key <key>`` header."""
    return {"Authorization": f"Api-Key {key}"}


def _messages(lines: list[dict[str, Any]]) -> list[StreamMessage]:
    return [StreamMessage.model_validate(line) for line in lines]


def _sql_calls(lines: list[dict[str, Any]]) -> list[StreamMessage]:
    return [
        m
        for m in _messages(lines)
        if m.tool_call is not None
        and m.tool_call.name == wire.TOOL_SQL
        and m.tool_call.result is not None
    ]


def _hand_count(server: RunningServer, where: str) -> int:
    """Counts flights with hand-written DuckDB SQL over the server's warehouse file."""
    warehouse = server.app.state.service.toolbox.warehouse
    ((count,),) = warehouse.query_raw(f"SELECT count(*) FROM flights WHERE {where}")
    return int(count)


def _single_value(lines: list[dict[str, Any]]) -> float:
    (call,) = _sql_calls(lines)
    assert call.tool_call is not None
    result = sql_result(call.tool_call)
    assert result is not None
    assert result.data is not None
    assert result.error is None, result.error
    assert result.total_rows == 1
    return float(result.data[0][-1])


async def test_healthz_answers_without_a_key(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    response = await client.get(server.base_url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing Authorization header"),
        (auth("wrong-key"), "invalid API key"),
        ({"Authorization": "Bearer test-key"}, "must be 'Api-Key <key>'"),
    ],
)
async def test_chat_without_a_valid_key_is_401(
    server: RunningServer, client: httpx.AsyncClient, headers: dict[str, str], message: str
) -> None:
    body = {"input": MARCH, "sessionSettings": session()}
    response = await client.post(server.chat_url(), json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["status"] == 401
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"agent_id": "2"}, "agent not found: agentId '2'"),
        ({"cloud_region": "eu"}, "cloud region not found: cloudRegion 'eu'"),
        ({"account_name": "acme"}, "account not found: accountName 'acme'"),
    ],
)
async def test_chat_for_another_agent_region_or_account_is_404(
    server: RunningServer, client: httpx.AsyncClient, override: dict[str, str], message: str
) -> None:
    body = {"input": MARCH, "sessionSettings": session()}
    response = await client.post(server.chat_url(**override), json=body, headers=server.headers)
    assert response.status_code == 404
    assert response.json() == {"error": message, "status": 404}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": MARCH}, "sessionSettings: Field required"),
        (
            {"input": MARCH, "sessionSettings": {"externalId": "Alice"}},
            "sessionSettings.externalId",
        ),
        (
            {
                "input": MARCH,
                "sessionSettings": {
                    "internalId": "ann@example.com",
                    "userAttributes": [{"name": "origin", "value": "JFK"}],
                },
            },
            "userAttributes not allowed with internalId",
        ),
        ({"input": 3, "sessionSettings": {"externalId": "a"}}, "input: Input should be"),
        (
            {"input": "lone \ud800", "sessionSettings": {"externalId": "a"}},
            "input: NUL characters and lone surrogates are not allowed",
        ),
        (
            {"input": MARCH, "sessionSettings": {"externalId": "a\u0000b"}},
            "sessionSettings.externalId: NUL characters",
        ),
    ],
)
async def test_invalid_chat_body_is_400_naming_the_field(
    server: RunningServer, client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    content = json.dumps(body)  # ASCII escapes, so a lone surrogate can be sent
    response = await client.post(server.chat_url(), content=content, headers=server.headers)
    assert response.status_code == 400
    assert response.json()["status"] == 400
    assert field in response.json()["error"]


async def test_chat_body_that_is_not_json_is_400(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    response = await client.post(server.chat_url(), content=b"{not json", headers=server.headers)
    assert response.status_code == 400
    assert response.json()["error"].startswith("body is not valid JSON")


async def test_unknown_path_is_a_json_404(server: RunningServer, client: httpx.AsyncClient) -> None:
    response = await client.get(server.base_url + "/nowhere")
    assert response.status_code == 404
    assert response.json()["status"] == 404


async def test_chat_streams_cutoff_first_usage_last_and_one_final_answer(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session()}
    async with client.stream(
        "POST", server.chat_url(), json=body, headers=server.headers
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        lines = [json.loads(line) async for line in response.aiter_lines() if line]
    messages = _messages(lines)
    assert messages[0].id == wire.ID_CUTOFF
    assert messages[0].chat_id
    assert messages[-1].id == wire.ID_USAGE
    assert messages[-1].usage == {
        "llmCalls": 0,
        "inputTokens": 0,
        "outputTokens": 0,
        "totalTokens": 0,
        "sqlQueries": 1,
        "reader": "legacy",
    }
    finals = [m for m in messages if m.is_final_answer]
    assert len(finals) == 1
    assert finals[0].content
    sorts = [m.sort for m in messages]
    assert None not in sorts
    assert sorts == sorted(s for s in sorts if s is not None)
    assert len(set(sorts)) == len(sorts)
    assert messages[-2].id == wire.ID_STATE
    assert messages[-2].chat_id == messages[0].chat_id


async def test_origin_attribute_limits_the_count_to_that_airport(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    everyone = await stream_lines(
        client, server, {"input": MARCH, "sessionSettings": session("alice")}
    )
    jfk_only = await stream_lines(
        client,
        server,
        {"input": MARCH, "sessionSettings": session("bob", origin="JFK")},
    )
    assert _single_value(everyone) == _hand_count(server, "month = 3")
    assert _single_value(jfk_only) == _hand_count(server, "month = 3 AND origin = 'JFK'")
    assert _single_value(jfk_only) < _single_value(everyone)


async def test_reusing_the_chat_id_continues_the_thread(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    first = await stream_lines(
        client,
        server,
        {"input": "Average arrival delay by carrier", "sessionSettings": session()},
    )
    chat_id = first[0]["state"]["chatId"]
    second = await stream_lines(
        client,
        server,
        {"input": "and only from JFK?", "chatId": chat_id, "sessionSettings": session()},
    )
    assert second[0]["state"]["chatId"] == chat_id
    (before,) = _sql_calls(first)
    (after,) = _sql_calls(second)
    assert before.tool_call is not None
    assert after.tool_call is not None
    before_input, after_input = sql_input(before.tool_call), sql_input(after.tool_call)
    assert before_input is not None
    assert after_input is not None
    assert "JFK" not in (before_input.sql or "")
    assert "'JFK'" in (after_input.sql or "")
    assert before_input.memory_id == after_input.memory_id
    state = second[-2]["state"]
    assert [m["role"] for m in state["messages"]] == ["user", "assistant"] * 2


async def test_chat_without_input_returns_the_thread_state(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    first = await stream_lines(client, server, {"input": MARCH, "sessionSettings": session()})
    chat_id = first[0]["state"]["chatId"]
    state = await stream_lines(client, server, {"chatId": chat_id, "sessionSettings": session()})
    assert [line["id"] for line in state] == [wire.ID_CUTOFF, wire.ID_STATE, wire.ID_USAGE]
    assert state[1]["state"]["messages"] == first[-2]["state"]["messages"]


async def test_chat_id_of_another_user_is_404(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    first = await stream_lines(
        client, server, {"input": MARCH, "sessionSettings": session("alice")}
    )
    body = {
        "input": MARCH,
        "chatId": first[0]["state"]["chatId"],
        "sessionSettings": session("mallory"),
    }
    response = await client.post(server.chat_url(), json=body, headers=server.headers)
    assert response.status_code == 404
    assert "chat thread not found" in response.json()["error"]


async def test_lines_arrive_while_the_turn_is_still_running(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session()}
    started = time.monotonic()
    arrivals: list[float] = []
    async with client.stream(
        "POST", slow_server.chat_url(), json=body, headers=slow_server.headers
    ) as resp:
        async for line in resp.aiter_lines():
            if line:
                arrivals.append(time.monotonic() - started)
    delay_s = slow_server.settings.line_delay_ms / 1000
    assert len(arrivals) > 5
    assert arrivals[0] < arrivals[-1] - 3 * delay_s
    assert arrivals[-1] >= (len(arrivals) - 1) * delay_s * 0.9


async def test_abort_mid_stream_ends_with_aborted_then_usage_and_no_final_answer(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session("carol")}
    lines: list[dict[str, Any]] = []
    async with client.stream(
        "POST", slow_server.chat_url(), json=body, headers=slow_server.headers
    ) as resp:
        async for text in resp.aiter_lines():
            if not text:
                continue
            lines.append(json.loads(text))
            if len(lines) == 3:
                abort = await client.post(
                    slow_server.abort_url(),
                    json={
                        "chatId": lines[0]["state"]["chatId"],
                        "sessionSettings": session("carol"),
                    },
                    headers=slow_server.headers,
                )
                assert abort.status_code == 204
                assert abort.content == b""
    assert [line["id"] for line in lines[-2:]] == [wire.ID_ABORTED, wire.ID_USAGE]
    assert lines[-2]["type"] == "abort"
    assert lines[-2]["code"] == "chat_aborted"
    assert not any(m.is_final_answer for m in _messages(lines))
    assert len(lines) < 10


async def test_a_second_input_while_streaming_is_409_and_the_thread_recovers(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session("dave")}
    url = slow_server.chat_url()
    async with client.stream("POST", url, json=body, headers=slow_server.headers) as resp:
        texts = resp.aiter_lines()
        first = json.loads(await anext(texts))
        chat_id = first["state"]["chatId"]
        again = await client.post(
            url, json={**body, "chatId": chat_id}, headers=slow_server.headers
        )
        assert again.status_code == 409
        assert again.json() == {"error": "Streaming for thread is in progress", "status": 409}
        abort = await client.post(
            slow_server.abort_url(),
            json={"chatId": chat_id, "sessionSettings": session("dave")},
            headers=slow_server.headers,
        )
        assert abort.status_code == 204
        rest = [json.loads(line) async for line in texts if line]
    assert rest[-2]["id"] == wire.ID_ABORTED
    # No pause: the server frees the thread before it sends a turn's last line.
    async with client.stream(
        "POST", url, json={**body, "chatId": chat_id}, headers=slow_server.headers
    ) as resumed:
        assert resumed.status_code == 200
        first_again = json.loads(await anext(resumed.aiter_lines()))
        assert first_again["state"]["chatId"] == chat_id
        await client.post(
            slow_server.abort_url(), json={"chatId": chat_id}, headers=slow_server.headers
        )


async def test_a_client_that_disconnects_does_not_stop_its_turn(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    """The turn belongs to the server: it runs to its end and is stored, then the thread is free."""
    body = {"input": MARCH, "sessionSettings": session("frank")}
    url = slow_server.chat_url()
    async with client.stream("POST", url, json=body, headers=slow_server.headers) as resp:
        chat_id = json.loads(await anext(resp.aiter_lines()))["state"]["chatId"]
    busy = await client.post(url, json={**body, "chatId": chat_id}, headers=slow_server.headers)
    assert busy.status_code == 409
    state = await wait_until_idle(client, slow_server, chat_id, session("frank"))
    assert [m["role"] for m in state["messages"]] == ["user", "assistant"]
    again = await stream_lines(client, slow_server, {**body, "chatId": chat_id})
    assert again[-1]["id"] == wire.ID_USAGE


async def test_abort_by_another_user_is_403(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    lines = await stream_lines(client, server, {"input": MARCH, "sessionSettings": session("erin")})
    body = {"chatId": lines[0]["state"]["chatId"], "sessionSettings": session("mallory")}
    response = await client.post(server.abort_url(), json=body, headers=server.headers)
    assert response.status_code == 403
    assert response.json()["status"] == 403


async def test_abort_of_a_completed_thread_is_a_204_no_op(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    lines = await stream_lines(client, server, {"input": MARCH, "sessionSettings": session("erin")})
    body = {"chatId": lines[0]["state"]["chatId"], "sessionSettings": session("erin")}
    response = await client.post(server.abort_url(), json=body, headers=server.headers)
    assert response.status_code == 204
    assert response.content == b""


async def test_abort_of_an_unknown_chat_is_404(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"chatId": "no-such-chat", "sessionSettings": session()}
    response = await client.post(server.abort_url(), json=body, headers=server.headers)
    assert response.status_code == 404
    assert response.json() == {
        "error": "chat thread not found: chatId 'no-such-chat'",
        "status": 404,
    }


async def test_abort_without_a_key_is_401(server: RunningServer, client: httpx.AsyncClient) -> None:
    response = await client.post(server.abort_url(), json={"chatId": "x"})
    assert response.status_code == 401


async def test_generate_session_returns_a_session_id(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    url = server.session_url
    body = {"externalId": "alice", "userAttributes": [{"name": "origin", "value": "JFK"}]}
    response = await client.post(url, json=body, headers=server.headers)
    assert response.status_code == 200
    session_id = response.json()["sessionId"]
    assert len(session_id) >= 32
    again = await client.post(url, json=body, headers=server.headers)
    assert again.json()["sessionId"] != session_id


async def test_generate_session_without_a_key_is_401(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    url = server.session_url
    response = await client.post(url, json={"externalId": "alice"})
    assert response.status_code == 401
    assert response.json()["status"] == 401


async def test_generate_session_with_internal_id_and_groups_is_400(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    url = server.session_url
    body = {"internalId": "ann@example.com", "groups": ["sales"]}
    response = await client.post(url, json=body, headers=server.headers)
    assert response.status_code == 400
    assert "groups not allowed with internalId" in response.json()["error"]
