"""Follow-up questions over HTTP: a chatId continues its thread with the previous query.

Interface, "1. Chat": a request with ``chatId`` continues that thread. Each follow-up here
("and only from JFK?", "what about LGA?", "now by month", "only for United", "and the
maximum?") must keep the previous question's measures, breakdowns and conditions unless it
changes them; every SQL result is compared with hand-written DuckDB SQL on the server's data.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from models import wire
from models.chat import StreamMessage
from models.tools import sql_result

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

BY_CARRIER = (
    "SELECT a.name, {agg}(f.arr_delay) FROM flights f LEFT JOIN airlines a USING (carrier) "
    "WHERE {where} GROUP BY 1 ORDER BY 2 DESC"
)
BY_MONTH = "SELECT month, {agg}(arr_delay) FROM flights WHERE {where} GROUP BY 1 ORDER BY 1"

THREAD = [
    ("Average arrival delay by carrier", BY_CARRIER, "avg", "TRUE"),
    ("and only from JFK?", BY_CARRIER, "avg", "f.origin = 'JFK'"),
    ("what about LGA?", BY_CARRIER, "avg", "f.origin = 'LGA'"),
    ("now by month", BY_MONTH, "avg", "origin = 'LGA'"),
    ("only for United", BY_MONTH, "avg", "origin = 'LGA' AND carrier = 'UA'"),
    ("and the maximum?", BY_MONTH, "max", "origin = 'LGA' AND carrier = 'UA'"),
]


async def _turn(
    client: httpx.AsyncClient, server: RunningServer, body: dict[str, Any]
) -> tuple[str, list[list[Any]]]:
    """Posts one question; returns the thread's chatId and the SQL tool's rows."""
    async with client.stream("POST", server.chat_url(), json=body, headers=server.headers) as r:
        assert r.status_code == 200, await r.aread()
        lines = [StreamMessage.model_validate(json.loads(line)) async for line in r.aiter_lines()]
    assert lines[0].id == wire.ID_CUTOFF and lines[0].state is not None
    rows: list[list[Any]] | None = None
    for message in lines:
        call = message.tool_call
        if call is not None and call.name == wire.TOOL_SQL and call.result is not None:
            result = sql_result(call)
            assert result is not None and result.error is None, call.result
            rows = [list(row) for row in result.data or []]
    assert rows is not None, "no SQL result"
    return str(lines[0].state["chatId"]), rows


def _same(actual: list[list[Any]], expected: list[tuple[Any, ...]]) -> bool:
    if len(actual) != len(expected):
        return False
    for got, want in zip(actual, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            if isinstance(b, float):
                if not math.isclose(float(a), b, rel_tol=1e-9):
                    return False
            elif str(a) != str(b):
                return False
    return True


async def test_a_thread_of_follow_ups_keeps_and_changes_the_previous_query(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    warehouse = server.app.state.service.toolbox.warehouse
    session = {"externalId": f"followups-{uuid.uuid4().hex[:10]}"}
    chat_id: str | None = None
    for question, template, agg, where in THREAD:
        body: dict[str, Any] = {"input": question, "sessionSettings": session}
        if chat_id is not None:
            body["chatId"] = chat_id
        returned_id, rows = await _turn(client, server, body)
        assert chat_id in (None, returned_id)
        chat_id = returned_id
        expected = warehouse.query_raw(template.format(agg=agg, where=where))
        assert _same(rows, [tuple(row) for row in expected]), (question, rows[:3])


async def test_a_follow_up_on_a_new_thread_has_nothing_to_continue(
    server: RunningServer, client: httpx.AsyncClient
) -> None:
    session = {"externalId": f"followups-{uuid.uuid4().hex[:10]}"}
    body = {"input": "and only from JFK?", "sessionSettings": session}
    async with client.stream("POST", server.chat_url(), json=body, headers=server.headers) as r:
        assert r.status_code == 200
        lines = [StreamMessage.model_validate(json.loads(line)) async for line in r.aiter_lines()]
    sql_calls = [m for m in lines if m.tool_call is not None and m.tool_call.name == wire.TOOL_SQL]
    assert sql_calls == []
    final = [m for m in lines if m.graph_path == (wire.GRAPH_FINAL,)]
    assert final and "measure" in (final[-1].content or "")
