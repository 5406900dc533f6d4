"""Issue 12 over HTTP against a real uvicorn: what an attacker and a real client found.

Input cap (2), malformed bodies and content types (3), one identity per request (4), empty
attribute values (5), weather scoped like flights (6), thread probing (7), expired ephemeral
users (8). Keys, reply size, metadata and stream fidelity are in
``tests/unit/chat_api/test_api_hardening.py``; the SQL guard in ``test_hostile_sql.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from chat_api.settings import DEFAULT_MAX_INPUT_CHARS
from models import wire
from tests.integration.chat_api.chat_support import MARCH, session, stream_lines

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer, ServerStarter

EXPIRY_DEADLINE_S = 30.0


async def _post(
    client: httpx.AsyncClient, url: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(url, content=content, headers=headers)


def _refused(response: httpx.Response, status: int, *needles: str) -> None:
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["status"] == status
    for needle in needles:
        assert needle in payload["error"], payload


# -- 2. the input cap ------------------------------------------------------------------------


async def test_an_input_over_the_cap_is_refused_naming_the_limit(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = {"input": "zq " * DEFAULT_MAX_INPUT_CHARS, "sessionSettings": session("ida")}
    response = await _post(client, server.chat_url(), body, server.headers)
    _refused(response, 413, "input", str(DEFAULT_MAX_INPUT_CHARS))
    at_cap = {"input": "x" * DEFAULT_MAX_INPUT_CHARS, "sessionSettings": session("ida")}
    lines = await stream_lines(client, server, at_cap)
    assert lines[-1]["id"] == "__usage__"


async def test_the_cap_is_a_setting(start_server: ServerStarter, client: httpx.AsyncClient) -> None:
    with start_server(max_input_chars=20) as api:
        body = {"input": "x" * 21, "sessionSettings": session("ida")}
        _refused(await _post(client, api.chat_url(), body, api.headers), 413, "20 characters")


# -- 3. malformed bodies ---------------------------------------------------------------------

DEEP = b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HUGE_NUMBER = b'{"input": "hi", "sessionSettings": {"externalId": "a"}, "x": ' + b"9" * 5000 + b"}"
HUGE_TTL = json.dumps(
    {"input": MARCH, "sessionSettings": {"externalId": "ttl", "ephemeralTtlSeconds": 10**400}}
).encode()
FLOAT_TTL = (
    b'{"input": "hi", "sessionSettings": {"externalId": "ttl", "ephemeralTtlSeconds": 1e400}}'
)
NAN = b'{"input": NaN, "sessionSettings": {"externalId": "a"}}'


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (DEEP, "nested deeper than"),
        (b"[" * 100_000, "nested deeper than"),
        (HUGE_NUMBER, "number"),
        (HUGE_TTL, "ephemeralTtlSeconds"),
        (FLOAT_TTL, "number"),
        (NAN, "NaN"),
    ],
    ids=["nested", "nested-unclosed", "4300-digits", "ttl-10^400", "ttl-1e400", "nan"],
)
@pytest.mark.parametrize("endpoint", ["chat", "abort", "session", "revoke"])
async def test_a_malformed_body_is_a_4xx_naming_the_problem(
    server: RunningServer, client: httpx.AsyncClient, body: bytes, needle: str, endpoint: str
) -> None:
    url = {
        "chat": server.chat_url(),
        "abort": server.abort_url(),
        "session": server.session_url,
        "revoke": server.base_url + "/api/v1/embed/session/revoke",
    }[endpoint]
    response = await _post(client, url, body, server.headers)
    assert 400 <= response.status_code < 500, response.text
    if endpoint == "chat" or needle != "ephemeralTtlSeconds":
        assert needle in response.json()["error"], response.text


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
    ],
)
async def test_a_body_that_is_not_declared_json_is_415(
    server: RunningServer, client: httpx.AsyncClient, content_type: str
) -> None:
    body = json.dumps({"input": MARCH, "sessionSettings": session()}).encode()
    headers = {**server.headers, "Content-Type": content_type}
    response = await client.post(server.chat_url(), content=body, headers=headers)
    _refused(response, 415, "Content-Type", "application/json")
    for url in (server.abort_url(), server.session_url):
        _refused(await client.post(url, content=b"{}", headers=headers), 415)


async def test_json_with_a_charset_is_accepted(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    body = json.dumps({"input": MARCH, "sessionSettings": session()}).encode()
    headers = {**server.headers, "Content-Type": "application/json; charset=utf-8"}
    async with client.stream("POST", server.chat_url(), content=body, headers=headers) as r:
        assert r.status_code == 200


# -- 4. one identity -------------------------------------------------------------------------

BOTH = {"externalId": "eve", "internalId": "ann@example.com"}


async def test_external_and_internal_id_together_are_a_400_everywhere(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    chat = await _post(
        client, server.chat_url(), {"input": MARCH, "sessionSettings": BOTH}, server.headers
    )
    _refused(chat, 400, "externalId", "internalId")
    lines = await stream_lines(client, server, {"input": MARCH, "sessionSettings": session("eve")})
    abort_body = {"chatId": lines[0]["state"]["chatId"], "sessionSettings": BOTH}
    _refused(
        await _post(client, server.abort_url(), abort_body, server.headers),
        400,
        "externalId",
        "internalId",
    )
    _refused(
        await _post(client, server.session_url, BOTH, server.headers),
        400,
        "externalId",
        "internalId",
    )


async def test_unknown_groups_are_a_400_and_declared_ones_are_taken(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    with start_server(user_groups=("analysts",)) as api:
        unknown = {**session("gus"), "groups": ["analysts", "admins"]}
        response = await _post(
            client, api.chat_url(), {"input": MARCH, "sessionSettings": unknown}, api.headers
        )
        _refused(response, 400, "groups", "admins")
        _refused(await _post(client, api.session_url, unknown, api.headers), 400, "admins")
        known = {**session("gus"), "groups": ["analysts"]}
        lines = await stream_lines(client, api, {"input": MARCH, "sessionSettings": known})
        assert lines[-1]["id"] == "__usage__"


@pytest.mark.parametrize("value", [5, True, 1.5, None])
async def test_attribute_values_are_strings(
    server: RunningServer, client: httpx.AsyncClient, value: Any
) -> None:
    settings = {"externalId": "val", "userAttributes": [{"name": "origin", "value": value}]}
    response = await _post(
        client, server.chat_url(), {"input": MARCH, "sessionSettings": settings}, server.headers
    )
    _refused(response, 400, "userAttributes")


# -- 5. empty attribute values ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["", " "])
async def test_an_empty_attribute_value_is_a_400(
    server: RunningServer, client: httpx.AsyncClient, value: str
) -> None:
    settings = {"externalId": "empty", "userAttributes": [{"name": "origin", "value": value}]}
    for url, body in (
        (server.chat_url(), {"input": MARCH, "sessionSettings": settings}),
        (server.session_url, settings),
    ):
        _refused(await _post(client, url, body, server.headers), 400, "userAttributes.origin")


# -- 6. weather is scoped like flights -------------------------------------------------------


async def test_a_jfk_user_reads_only_jfk_weather(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    for airport in ("LGA", "EWR"):
        body = {
            "input": f"Average wind speed at {airport}",
            "sessionSettings": session("jfkwx", origin="JFK"),
        }
        lines = await stream_lines(client, server, body)
        (final,) = [line for line in lines if line.get("graphPath") == [wire.GRAPH_FINAL]]
        assert "not visible to you" in final["content"]  # said, not a figure (issue 24)
        assert lines[-1]["usage"]["sqlQueries"] == 0


# -- 7. thread probing -----------------------------------------------------------------------


async def test_another_users_running_thread_is_the_same_404_as_an_unknown_one(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    url, headers = slow_server.chat_url(), slow_server.headers
    body = {"input": MARCH, "sessionSettings": session("owner")}
    async with client.stream("POST", url, json=body, headers=headers) as resp:
        chat_id = json.loads(await anext(resp.aiter_lines()))["state"]["chatId"]
        probe = {"input": MARCH, "sessionSettings": session("prober")}
        running = await _post(client, url, {**probe, "chatId": chat_id}, headers)
        unknown = await _post(client, url, {**probe, "chatId": chat_id[::-1] + "x"}, headers)
        state = await _post(
            client, url, {"chatId": chat_id, "sessionSettings": session("prober")}, headers
        )
        await client.post(slow_server.abort_url(), json={"chatId": chat_id}, headers=headers)
    assert running.status_code == unknown.status_code == state.status_code == 404
    assert running.json()["error"].replace(chat_id, "?") == unknown.json()["error"].replace(
        chat_id[::-1] + "x", "?"
    )


async def test_a_resent_message_id_of_another_user_is_not_joined(
    slow_server: RunningServer, client: httpx.AsyncClient
) -> None:
    url, headers = slow_server.chat_url(), slow_server.headers
    message_id = f"{int(time.time() * 1000)}-message"
    body = {"input": MARCH, "messageId": message_id, "sessionSettings": session("owner2")}
    async with client.stream("POST", url, json=body, headers=headers) as resp:
        chat_id = json.loads(await anext(resp.aiter_lines()))["state"]["chatId"]
        probe = {**body, "chatId": chat_id, "sessionSettings": session("prober2")}
        response = await _post(client, url, probe, headers)
        await client.post(slow_server.abort_url(), json={"chatId": chat_id}, headers=headers)
    assert response.status_code == 404


# -- 8. expired ephemeral users --------------------------------------------------------------


async def test_an_expired_user_is_gone_everywhere(
    start_server: ServerStarter, client: httpx.AsyncClient
) -> None:
    with start_server() as api:
        short = {**session("brief"), "ephemeralTtlSeconds": 1}
        lines = await stream_lines(client, api, {"input": MARCH, "sessionSettings": short})
        chat_id = lines[0]["state"]["chatId"]
        made = await _post(client, api.session_url, {"externalId": "brief"}, api.headers)
        session_id = made.json()["sessionId"]
        deadline = time.monotonic() + EXPIRY_DEADLINE_S
        await asyncio.sleep(1.2)
        assert time.monotonic() < deadline
        page = await client.get(f"{api.base_url}/embed/chat/{chat_id}?session={session_id}")
        assert page.status_code in (401, 404), page.status_code
        abort = await _post(
            client,
            api.abort_url(),
            {"chatId": chat_id, "sessionSettings": {"externalId": "brief"}},
            api.headers,
        )
        assert abort.status_code == 404
        service = api.app.state.service
        assert service.threads.get(chat_id) is None
