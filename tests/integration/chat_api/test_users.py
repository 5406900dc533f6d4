"""Users over HTTP.

Ephemeral TTL, persisted users, the external user limit, declared attributes, internal users
(configured or added by the admin command), and a restart.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx

from chat_api.settings import InternalUser
from models.chat import ToolCall
from models.tools import sql_input, sql_result
from tests.integration.chat_api.chat_support import MARCH, session, stream_lines

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer, ServerStarter

EXPIRY_DEADLINE_S = 30.0


def _chat_id(lines: list[dict[str, Any]]) -> str:
    chat_id: str = lines[0]["state"]["chatId"]
    return chat_id


def _sql(lines: list[dict[str, Any]]) -> tuple[str, float]:
    """Returns: the SQL tool's query and the first row's last value."""
    for line in lines:
        call = line.get("toolCall") or {}
        if call.get("name") == "svcSqlApi" and "result" in call:
            tool_call = ToolCall.model_validate(call)
            given, result = sql_input(tool_call), sql_result(tool_call)
            assert given is not None and result is not None and result.data
            return given.sql or "", float(result.data[0][-1])
    raise AssertionError("no SQL tool result")


async def _post(
    client: httpx.AsyncClient, server: RunningServer, body: dict[str, Any]
) -> httpx.Response:
    return await client.post(server.chat_url(), json=body, headers=server.headers)


async def test_an_ephemeral_user_and_its_threads_expire_after_the_ttl(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    short = {**session("brief"), "ephemeralTtlSeconds": 1}
    lines = await stream_lines(client, server, {"input": MARCH, "sessionSettings": short})
    chat_id = _chat_id(lines)
    continued = {"input": MARCH, "chatId": chat_id, "sessionSettings": session("brief")}
    deadline = time.monotonic() + EXPIRY_DEADLINE_S
    while (response := await _post(client, server, continued)).status_code == 200:
        assert time.monotonic() < deadline, "the ephemeral user did not expire"
        await asyncio.sleep(0.2)
    assert response.status_code == 404
    assert "chat thread not found" in response.json()["error"]
    again = await stream_lines(client, server, {"input": MARCH, "sessionSettings": short})
    assert _chat_id(again) != chat_id


async def test_is_ephemeral_false_persists_the_user_past_the_ttl(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    kept = {**session("keeper"), "ephemeralTtlSeconds": 1, "isEphemeral": False}
    lines = await stream_lines(client, server, {"input": MARCH, "sessionSettings": kept})
    await asyncio.sleep(1.5)  # past the TTL the user would have had
    server.app.state.service.users.purge_expired()
    body = {"input": MARCH, "chatId": _chat_id(lines), "sessionSettings": session("keeper")}
    again = await stream_lines(client, server, body)
    assert _chat_id(again) == _chat_id(lines)


async def test_the_external_user_limit_refuses_the_next_user_with_a_403(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    with start_server(max_external_users=2) as api:
        for name in ("u1", "u2", "u1"):
            await stream_lines(client, api, {"input": MARCH, "sessionSettings": session(name)})
        refused = await _post(client, api, {"input": MARCH, "sessionSettings": session("u3")})
        assert refused.status_code == 403
        assert "external user limit reached" in refused.json()["error"]
        by_session = await client.post(api.session_url, json=session("u4"), headers=api.headers)
        assert by_session.status_code == 403
        assert api.app.state.service.users.count_external() == 2


async def test_an_undeclared_attribute_is_a_400_naming_it(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": session("dora", dest="ORD")}
    response = await _post(client, server, body)
    assert response.status_code == 400
    assert "not declared for this account: dest" in response.json()["error"]
    made = await client.post(
        server.session_url, json=session("dora", dest="ORD"), headers=server.headers
    )
    assert made.status_code == 400


async def test_an_unknown_internal_user_is_a_400(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": MARCH, "sessionSettings": {"internalId": "nobody@example.com"}}
    response = await _post(client, server, body)
    assert response.status_code == 400
    assert "no internal user 'nobody@example.com'" in response.json()["error"]


async def test_a_configured_internal_user_brings_its_own_attributes(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    ann = InternalUser(email="ann@example.com", attributes={"origin": "JFK"})
    with start_server(internal_users=(ann,)) as api:
        body = {"input": MARCH, "sessionSettings": {"internalId": "ann@example.com"}}
        sql, count = _sql(await stream_lines(client, api, body))
        everyone = await stream_lines(client, api, {"input": MARCH, "sessionSettings": session()})
        assert count < _sql(everyone)[1]
        assert "JFK" not in sql  # the row filter is the policy's, not the question's


async def test_an_internal_user_added_by_the_admin_command_can_chat(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    with start_server() as api:
        env = {**os.environ, "CHATSCRIBE_API_DATABASE_URL": api.settings.api_database_url}
        command = [
            sys.executable,
            "-m",
            "pipeline.cli.app",
            "api",
            "users",
            "add",
            "bea@example.com",
        ]
        added = await asyncio.create_subprocess_exec(
            *command, "--attribute", "origin=LGA", env=env, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await added.communicate()
        assert added.returncode == 0, stderr.decode()
        body = {"input": MARCH, "sessionSettings": {"internalId": "bea@example.com"}}
        lines = await stream_lines(client, api, body)
        assert _chat_id(lines)


async def test_a_restarted_server_continues_a_thread_of_a_persisted_user(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    persisted = {**session("rita"), "isEphemeral": False}
    first_body = {"input": "Average arrival delay by carrier", "sessionSettings": persisted}
    with start_server() as api:
        first = await stream_lines(client, api, first_body)
    with start_server() as restarted:
        follow_up = {"input": "and only from JFK?", "chatId": _chat_id(first)}
        second = await stream_lines(
            client, restarted, {**follow_up, "sessionSettings": session("rita")}
        )
    assert _chat_id(second) == _chat_id(first)
    assert "'JFK'" in _sql(second)[0]
    assert [m["role"] for m in second[-2]["state"]["messages"]] == ["user", "assistant"] * 2
