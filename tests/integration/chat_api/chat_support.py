"""Helpers shared by the Chat API integration tests: bodies, streams, polling."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

MARCH = "How many flights were there in March?"
IDLE_DEADLINE_S = 60.0


def session(external_id: str = "alice", **attributes: str) -> dict[str, Any]:
    """Returns: ``sessionSettings`` for an external user with ``userAttributes``."""
    settings: dict[str, Any] = {"externalId": external_id}
    if attributes:
        settings["userAttributes"] = [{"name": k, "value": v} for k, v in attributes.items()]
    return settings


async def stream_lines(
    client: httpx.AsyncClient, server: RunningServer, body: dict[str, Any]
) -> list[dict[str, Any]]:
    """Posts a chat request and returns every NDJSON line, parsed (asserts HTTP 200)."""
    async with client.stream("POST", server.chat_url(), json=body, headers=server.headers) as r:
        assert r.status_code == 200, await r.aread()
        return [json.loads(line) async for line in r.aiter_lines() if line]


async def thread_state(
    client: httpx.AsyncClient, server: RunningServer, chat_id: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """Returns: the ``state`` of the thread's ``__state__`` line (a request without input)."""
    lines = await stream_lines(client, server, {"chatId": chat_id, "sessionSettings": settings})
    assert [line["id"] for line in lines] == ["__cutoff__", "__state__", "__usage__"]
    state: dict[str, Any] = lines[1]["state"]
    return state


async def wait_until_idle(
    client: httpx.AsyncClient, server: RunningServer, chat_id: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """Polls the thread's state until no turn streams on it. Returns: that state."""
    deadline = time.monotonic() + IDLE_DEADLINE_S
    while True:
        state = await thread_state(client, server, chat_id, settings)
        if not state["isStreaming"]:
            return state
        assert time.monotonic() < deadline, f"thread {chat_id} still streaming"
        await asyncio.sleep(0.1)
