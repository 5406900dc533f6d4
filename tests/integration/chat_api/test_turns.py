"""Turns over HTTP.

State without input, resubscription by messageId, 409s, abort rules, development vs production mode,
and an error line after the stream started.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from chat_api import agent
from chat_api.errors import ChatApiError
from models import wire
from tests.integration.chat_api.chat_support import (
    MARCH,
    session,
    stream_lines,
    thread_state,
    wait_until_idle,
)

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer, ServerStarter

MESSAGE_ID = "1763900000000-message"


async def _read_all(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) async for line in response.aiter_lines() if line]


async def test_a_resent_message_id_resubscribes_from_the_first_line(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "messageId": MESSAGE_ID, "sessionSettings": session("rosa")}
    url, headers = slow_server.chat_url(), slow_server.headers
    async with client.stream("POST", url, json=body, headers=headers) as first:
        texts = first.aiter_lines()
        head = [json.loads(await anext(texts)) for _ in range(3)]
        async with client.stream("POST", url, json=body, headers=headers) as second:
            assert second.status_code == 200
            again = await _read_all(second)
        rest = [json.loads(line) async for line in texts if line]
    assert head + rest == again
    assert again[0]["id"] == wire.ID_CUTOFF
    assert again[-1]["id"] == wire.ID_USAGE
    assert sum(1 for line in again if line.get("graphPath") == ["final"]) == 1


async def test_the_same_message_id_with_another_input_is_409(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "messageId": MESSAGE_ID, "sessionSettings": session("sara")}
    url, headers = slow_server.chat_url(), slow_server.headers
    async with client.stream("POST", url, json=body, headers=headers) as first:
        chat_id = json.loads(await anext(first.aiter_lines()))["state"]["chatId"]
        other = {**body, "input": "Average wind speed at LGA", "chatId": chat_id}
        refused = await client.post(url, json=other, headers=headers)
        assert refused.status_code == 409
        assert refused.json()["error"] == "Streaming for thread is in progress"
        state = await thread_state(client, slow_server, chat_id, session("sara"))
        assert state["isStreaming"] is True
        assert [m["role"] for m in state["messages"]] == ["user"]
        await client.post(
            slow_server.abort_url(), json={"chatId": chat_id}, headers=slow_server.headers
        )


async def test_the_next_input_right_after_the_last_line_is_never_409(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    """The thread is freed before a turn's last line is sent (the cause of a once-flaky 409)."""
    settings = session("quinn")
    first = await stream_lines(client, server, {"input": MARCH, "sessionSettings": settings})
    body = {"input": MARCH, "chatId": first[0]["state"]["chatId"], "sessionSettings": settings}
    for _ in range(20):
        lines = await stream_lines(client, server, body)  # asserts 200 each time
        assert lines[-1]["id"] == wire.ID_USAGE


async def test_a_message_id_resent_after_its_turn_ended_asks_nothing_again(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "messageId": MESSAGE_ID, "sessionSettings": session("tina")}
    first = await stream_lines(client, server, body)
    again = await stream_lines(client, server, body)
    assert [line["id"] for line in again] == [wire.ID_CUTOFF, wire.ID_STATE, wire.ID_USAGE]
    assert again[0]["state"]["chatId"] == first[0]["state"]["chatId"]
    assert again[1]["state"]["messages"] == first[-2]["state"]["messages"]


async def test_chat_without_input_asks_nothing(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    first = await stream_lines(client, server, {"input": MARCH, "sessionSettings": session("uma")})
    chat_id = first[0]["state"]["chatId"]
    for _ in range(2):
        state = await thread_state(client, server, chat_id, session("uma"))
        assert [m["role"] for m in state["messages"]] == ["user", "assistant"]


async def test_an_aborted_turn_leaves_its_question_and_no_answer(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session("vera")}
    url, headers = slow_server.chat_url(), slow_server.headers
    async with client.stream("POST", url, json=body, headers=headers) as response:
        texts = response.aiter_lines()
        lines: list[dict[str, Any]] = []
        while not any(line.get("isDelta") and line.get("content") for line in lines):
            lines.append(json.loads(await anext(texts)))  # until a partial answer streamed
        chat_id = lines[0]["state"]["chatId"]
        abort = await client.post(
            slow_server.abort_url(),
            json={"chatId": chat_id, "sessionSettings": session("vera")},
            headers=headers,
        )
        assert abort.status_code == 204
        assert abort.content == b""
        lines += [json.loads(text) async for text in texts if text]
    assert [line["id"] for line in lines[-2:]] == [wire.ID_ABORTED, wire.ID_USAGE]
    assert lines[-1]["usage"]["llmCalls"] == 0
    state = await wait_until_idle(client, slow_server, chat_id, session("vera"))
    assert [m["role"] for m in state["messages"]] == ["user"]


async def test_abort_of_a_thread_that_ended_long_ago_is_404(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    with start_server(abort_window_s=0) as api:
        lines = await stream_lines(client, api, {"input": MARCH, "sessionSettings": session()})
        body = {"chatId": lines[0]["state"]["chatId"], "sessionSettings": session()}
        response = await client.post(api.abort_url(), json=body, headers=api.headers)
        assert response.status_code == 404
        assert "no active or recently completed chat" in response.json()["error"]


async def test_abort_by_another_user_of_a_running_turn_is_403_and_does_not_stop_it(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session("wanda")}
    url, headers = slow_server.chat_url(), slow_server.headers
    async with client.stream("POST", url, json=body, headers=headers) as response:
        texts = response.aiter_lines()
        chat_id = json.loads(await anext(texts))["state"]["chatId"]
        refused = await client.post(
            slow_server.abort_url(),
            json={"chatId": chat_id, "sessionSettings": session("mallory")},
            headers=headers,
        )
        assert refused.status_code == 403
        rest = [json.loads(line) async for line in texts if line]
    assert rest[-1]["id"] == wire.ID_USAGE
    assert not any(line.get("id") == wire.ID_ABORTED for line in rest)


@pytest.mark.parametrize(("development_mode", "expected"), [(True, True), (False, False)])
async def test_thinking_is_streamed_in_development_mode_only(
    start_server: ServerStarter,
    client: httpx.AsyncClient,
    development_mode: bool,
    expected: bool,
) -> None:
    with start_server(development_mode=development_mode) as api:
        lines = await stream_lines(client, api, {"input": MARCH, "sessionSettings": session()})
    assert any("thinking" in line for line in lines) is expected
    assert lines[-2]["id"] == wire.ID_STATE
    assert lines[-1]["id"] == wire.ID_USAGE


async def test_a_failure_after_the_stream_started_is_an_error_line(
    server: RunningServer, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_search(*args: Any) -> dict[str, Any]:
        raise ChatApiError("metadata search is down")

    monkeypatch.setattr(agent, "search_members", failing_search)  # the server shares the module
    body = {"input": MARCH, "sessionSettings": session("xena")}
    lines = await stream_lines(client, server, body)
    assert lines[0]["id"] == wire.ID_CUTOFF
    assert lines[-1] == {"error": "metadata search is down"}
    monkeypatch.undo()
    state = await thread_state(client, server, lines[0]["state"]["chatId"], session("xena"))
    assert [m["role"] for m in state["messages"]] == ["user"]
