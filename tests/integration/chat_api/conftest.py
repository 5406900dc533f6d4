"""Our Chat API under a real uvicorn on a free loopback port, in a background thread.

``httpx.ASGITransport`` buffers whole bodies, so streaming, pacing and abort are tested against
the real server (house style, "Tests"). Servers share one toolbox (model, vocabulary,
warehouse), each has its own SQLite state file: ``server`` streams at full speed,
``slow_server`` waits ``SLOW_LINE_DELAY_MS`` between lines so a test can act mid-stream, and
``start_server`` starts one with other settings (a short TTL, a small user limit) or over the
state file of an earlier one (a restart).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from pydantic import SecretStr
from starlette.applications import Starlette

from chat_api.agent import Toolbox
from chat_api.http.app import create_app, load_toolbox
from chat_api.settings import ChatApiSettings
from models import wire

API_KEY = "test-key"
SLOW_LINE_DELAY_MS = 200
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RunningServer:
    """A Chat API listening on ``base_url``."""

    base_url: str
    settings: ChatApiSettings
    app: Starlette
    api_key: str = API_KEY

    @property
    def headers(self) -> dict[str, str]:
        """Returns: the ``Authorization: Api-Key <key>`` header of a valid key."""
        return {"Authorization": f"Api-Key {self.api_key}"}

    @property
    def session_url(self) -> str:
        """Returns: the generate-session URL."""
        return self.base_url + wire.GENERATE_SESSION_PATH

    def chat_url(self, **overrides: str) -> str:
        """Returns: the chat URL; ``cloud_region``/``account_name``/``agent_id`` override."""
        params = {
            "cloud_region": self.settings.cloud_region,
            "account_name": self.settings.account_name,
            "agent_id": self.settings.agent_id,
            **overrides,
        }
        return self.base_url + wire.CHAT_PATH_TEMPLATE.format(**params)

    def abort_url(self, **overrides: str) -> str:
        """Returns: the abort URL (the chat URL plus ``/abort``)."""
        return self.chat_url(**overrides) + wire.ABORT_SUFFIX


def _serve_in_thread(app: Starlette) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert thread.is_alive(), "uvicorn exited during start-up"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        sock.close()


@pytest.fixture(scope="session")
def database_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DuckDB file of this test session (built by the toolbox, about two seconds)."""
    return tmp_path_factory.mktemp("chat_api") / "nycflights13.duckdb"


@pytest.fixture(scope="session")
def toolbox(database_path: Path) -> Toolbox:
    """The agent's resources, loaded once and shared by the servers."""
    return load_toolbox(ChatApiSettings(database_path=database_path))


def _start(toolbox: Toolbox, database_path: Path, **fields: Any) -> Iterator[RunningServer]:
    fields.setdefault("api_keys", (SecretStr("other-key"), SecretStr(API_KEY)))
    settings = ChatApiSettings(database_path=database_path, **fields)
    app = create_app(settings, toolbox=toolbox)
    for base_url in _serve_in_thread(app):
        yield RunningServer(base_url=base_url, settings=settings, app=app)


def state_url(folder: Path, name: str = "state") -> str:
    """Returns: a SQLite URL for the state database ``<folder>/<name>.sqlite3``."""
    return f"sqlite:///{folder / name}.sqlite3"


@pytest.fixture(scope="session")
def server(
    toolbox: Toolbox, database_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A Chat API streaming at full speed."""
    url = state_url(tmp_path_factory.mktemp("state"))
    yield from _start(toolbox, database_path, api_database_url=url)


@pytest.fixture(scope="session")
def slow_server(
    toolbox: Toolbox, database_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A Chat API pausing ``SLOW_LINE_DELAY_MS`` between lines."""
    url = state_url(tmp_path_factory.mktemp("state"))
    yield from _start(
        toolbox, database_path, api_database_url=url, line_delay_ms=SLOW_LINE_DELAY_MS
    )


ServerStarter = Callable[..., AbstractContextManager[RunningServer]]


@pytest.fixture
def start_server(toolbox: Toolbox, database_path: Path, tmp_path: Path) -> ServerStarter:
    """Starts servers with extra settings; they stop when the block ends.

    ``with start_server(max_external_users=2) as api: ...``; without ``api_database_url`` the
    state file is ``<tmp_path>/state.sqlite3``, shared by the servers of one test, so stopping
    one and starting another is a restart over the same state.
    """

    @contextmanager
    def start(**fields: Any) -> Iterator[RunningServer]:
        fields.setdefault("api_database_url", state_url(tmp_path))
        yield from _start(toolbox, database_path, **fields)

    return start


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client with a generous read timeout."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        yield http
