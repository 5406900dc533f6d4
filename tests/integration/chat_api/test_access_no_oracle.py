"""Issue 24, point 8 over HTTP: no existence oracle in the whole stream of a JFK user.

The served default reader (``auto``: the legacy planner on the embedded flights data), in
development mode: thinking, tool calls and the final answer about a destination flown to only
from hidden origins are those about a never-served airport, modulo the name.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import httpx

from models import wire
from tests.integration.chat_api.chat_support import session, stream_lines

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

HIDDEN_ONLY = "TUL"
"""Tulsa Intl: flown to only from EWR (checked below with hand SQL)."""
NEVER_SERVED = "ITH"
"""Ithaca Tompkins Rgnl: in the airports table, flown to by no flight."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _shown(lines: list[dict[str, Any]], name: str) -> str:
    """What the stream shows, ids and uuids left out, ``name`` written as ``<X>``."""
    kept = [
        {k: v for k, v in line.items() if k not in ("id", "state")}
        for line in lines
        if line["id"] != wire.ID_STATE
    ]
    text = _UUID.sub("<uuid>", json.dumps(kept))
    return re.sub(rf"\b{name}\b", "<X>", text, flags=re.IGNORECASE)


async def test_a_hidden_only_destination_streams_like_a_never_served_one(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    warehouse = server.app.state.service.toolbox.warehouse
    served = warehouse.query_raw(
        f"SELECT DISTINCT origin FROM flights WHERE dest = '{HIDDEN_ONLY}'"
    )
    assert served == [("EWR",)]
    assert warehouse.query_raw(f"SELECT count(*) FROM flights WHERE dest = '{NEVER_SERVED}'") == [
        (0,)
    ]
    streams = {
        code: await stream_lines(
            client,
            server,
            {
                "input": f"How many flights went to {code}?",
                "sessionSettings": session("jo", origin="JFK"),
            },
        )
        for code in (HIDDEN_ONLY, NEVER_SERVED)
    }
    assert _shown(streams[HIDDEN_ONLY], HIDDEN_ONLY) == _shown(streams[NEVER_SERVED], NEVER_SERVED)
    final = streams[HIDDEN_ONLY][-3]
    assert final["graphPath"] == [wire.GRAPH_FINAL]
    assert "access is limited" in final["content"]


async def test_weather_at_a_hidden_origin_streams_that_access_is_limited(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    lines = await stream_lines(
        client,
        server,
        {
            "input": "What was the average temperature at LGA?",
            "sessionSettings": session("jo", origin="JFK"),
        },
    )
    final = lines[-3]
    assert final["graphPath"] == [wire.GRAPH_FINAL]
    assert "access is limited" in final["content"] and "not visible to you" in final["content"]
    assert lines[-1]["usage"]["sqlQueries"] == 0
