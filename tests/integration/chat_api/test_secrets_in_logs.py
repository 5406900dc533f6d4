"""No secret of a running Chat API reaches its log: ``chatscribe api serve`` as a process.

The process logs as deployed (``api serve``: uvicorn's access log at ``info``, to its output,
kept in a file). An embed session id is a bearer secret while it is valid; links carrying it
(one with a trailing slash, a 404 or redirect; one to a thread that does not exist) must leave
no trace of it, nor of the API key, in any log line.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from models import wire
from tests.integration.chat_api.chat_support import session
from tests.stack_support import ServiceProcess, free_port, start_cli, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def api_key() -> str:
    return f"key-{secrets.token_hex(12)}"


@pytest.fixture
def chat_api(
    api_key: str, tmp_path: Path, database_path: Path
) -> Iterator[tuple[str, ServiceProcess]]:
    """``chatscribe api serve`` on a free port, its output in ``tmp_path/chat-api.log``."""
    port = free_port()
    env = {
        **os.environ,
        "CHATSCRIBE_API_KEYS": api_key,
        "CHATSCRIBE_DATABASE_PATH": str(database_path),
        "CHATSCRIBE_API_DATABASE_URL": f"sqlite:///{tmp_path / 'state.sqlite3'}",
        "PYTHONUNBUFFERED": "1",
    }
    args = ["api", "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = start_cli("chat-api", args, env, tmp_path)
    try:
        wait_healthy(process, port)
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.stop()


def test_an_embed_session_id_and_the_api_key_never_reach_the_server_log(
    chat_api: tuple[str, ServiceProcess], api_key: str
) -> None:
    base, process = chat_api
    headers = {"Authorization": f"Api-Key {api_key}"}
    made = httpx.post(base + wire.GENERATE_SESSION_PATH, json=session("ann"), headers=headers)
    assert made.status_code == 200, made.text
    session_id = made.json()["sessionId"]
    slashed = httpx.get(f"{base}/embed/chat/c-none/?session={session_id}", timeout=30)
    assert slashed.status_code in (307, 404)
    missing = httpx.get(f"{base}/embed/chat/c-none?session={session_id}", timeout=30)
    assert missing.status_code in (403, 404)
    httpx.get(f"{base}/embed/chat/c-none?session={session_id}&x={api_key}", timeout=30)
    process.stop()
    log = process.log(chars=1_000_000)
    assert "/embed/chat/c-none/?session=***" in log  # the access lines are there, masked
    assert session_id not in log
    assert api_key not in log
