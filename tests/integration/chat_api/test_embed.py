"""The embed page in real headless Chromium.

Charts drawn by vega-embed from each result's ``vegaSpec`` and rows, opened with a session id (never
the API key); a reused, expired or foreign session is refused.

Chromium comes from Debian's packages (``ops/chromium.sh install``, run by ``make test``); a
missing browser fails these tests, it never skips them. ``--dump-dom`` with a virtual time
budget prints the document once the page's scripts (and the charts' promises) have settled.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.browser_support import BROWSER_TIMEOUT_S, CHROMIUM_FLAGS, chromium_path
from tests.integration.chat_api.chat_support import MARCH, session, stream_lines

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer, ServerStarter

HOSTILE = "<img src=x onerror=document.title='owned'> how many flights?"
VIRTUAL_TIME_BUDGET_MS = 30_000
_FIGURE = re.compile(r'<figure class="chart"[^>]*>(.*?)</figure>', re.DOTALL)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser's path; fails (not skips) when ``ops/chromium.sh install`` was not run."""
    return chromium_path()


async def dump_dom(chromium: str, url: str, profile: Path) -> str:
    """Returns: the document Chromium holds once the page settled (``--dump-dom``)."""
    # a new, empty profile folder per run (Chromium creates it)
    process = await asyncio.create_subprocess_exec(
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
        "--dump-dom",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), BROWSER_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode(errors="replace")[-2000:]
    return stdout.decode()


async def _thread_with_charts(client: httpx.AsyncClient, server: RunningServer, user: str) -> str:
    settings = session(user)
    first = await stream_lines(
        client, server, {"input": "Average arrival delay by carrier", "sessionSettings": settings}
    )
    chat_id: str = first[0]["state"]["chatId"]
    await stream_lines(
        client, server, {"input": MARCH, "chatId": chat_id, "sessionSettings": settings}
    )
    return chat_id


async def _session_id(client: httpx.AsyncClient, server: RunningServer, user: str) -> str:
    response = await client.post(server.session_url, json=session(user), headers=server.headers)
    assert response.status_code == 200, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


def _embed_url(server: RunningServer, chat_id: str, session_id: str) -> str:
    return f"{server.base_url}/embed/chat/{chat_id}?session={session_id}"


def _status(dom: str) -> str:
    found = re.search(r'<body[^>]*data-status="([^"]+)"', dom)
    assert found is not None, dom[:2000]
    return found.group(1)


async def test_the_embed_page_draws_each_chart_then_refuses_the_reused_session(
    server: RunningServer, client: httpx.AsyncClient, chromium: str, tmp_path: Path
) -> None:
    chat_id = await _thread_with_charts(client, server, "emma")
    hostile = {"input": HOSTILE, "chatId": chat_id, "sessionSettings": session("emma")}
    await stream_lines(client, server, hostile)
    url = _embed_url(server, chat_id, await _session_id(client, server, "emma"))
    dom = await dump_dom(chromium, url, tmp_path / "first")
    assert _status(dom) == "rendered", dom[-3000:]
    figures = _FIGURE.findall(dom)
    assert len(figures) == 2
    bars, number = figures
    assert "<svg" in bars
    assert 'class="mark-rect' in bars  # one bar per carrier, drawn from the result rows
    assert "<svg" in number
    assert 'class="mark-text' in number  # a single number is drawn as text
    assert "Average arrival delay by carrier" in dom
    assert MARCH in dom
    assert "<img" not in dom  # message text is text, never markup
    assert "&lt;img src=x onerror=" in dom
    assert server.api_key not in dom
    reused = await dump_dom(chromium, url, tmp_path / "again")
    assert _status(reused) == "refused"
    assert "embed session already used" in reused
    assert "<svg" not in reused
    assert (await client.get(url)).status_code == 403


async def test_an_expired_session_is_refused(
    start_server: ServerStarter, client: httpx.AsyncClient, chromium: str, tmp_path: Path
) -> None:
    with start_server(session_ttl_s=1) as api:
        chat_id = await _thread_with_charts(client, api, "finn")
        url = _embed_url(api, chat_id, await _session_id(client, api, "finn"))
        await asyncio.sleep(1.5)  # past the session's lifetime
        dom = await dump_dom(chromium, url, tmp_path / "expired")
    assert _status(dom) == "refused"
    assert "embed session expired" in dom


async def test_a_revoked_or_foreign_session_is_refused(
    server: RunningServer, client: httpx.AsyncClient, chromium: str, tmp_path: Path
) -> None:
    chat_id = await _thread_with_charts(client, server, "gina")
    revoked = await _session_id(client, server, "gina")
    revoke_url = server.base_url + "/api/v1/embed/session/revoke"
    body: dict[str, Any] = {"sessionId": revoked}
    assert (await client.post(revoke_url, json=body, headers=server.headers)).status_code == 204
    assert (await client.post(revoke_url, json=body)).status_code == 401
    dom = await dump_dom(chromium, _embed_url(server, chat_id, revoked), tmp_path / "revoked")
    assert "embed session revoked" in dom
    foreign = _embed_url(server, chat_id, await _session_id(client, server, "hugo"))
    response = await client.get(foreign)
    assert response.status_code == 404
    assert "chat thread not found" in response.text
    missing = await client.get(f"{server.base_url}/embed/chat/{chat_id}")
    assert missing.status_code == 403
    unknown = {"sessionId": "never-issued"}
    assert (await client.post(revoke_url, json=unknown, headers=server.headers)).status_code == 404
