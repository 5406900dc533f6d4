"""A 10 MiB ``svcSqlApi`` result travels worker → Kafka → sink → PostgreSQL without loss.

Record limits are raised consistently (``settings.max_record_bytes`` = 32 MiB for the producer's
``max_request_size`` and the consumer's ``max_partition_fetch_bytes``; ``message.max.bytes`` in
``ops/kafka/server.properties.in``), so the line travels as one record, bytes unchanged. The
Chat API here is a scripted Starlette app under uvicorn; the worker is a real process
(:mod:`worker_support`), the sink the real :class:`pipeline.sink.loop.Sink`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from models import wire
from models.records import ChatJob
from pipeline.archive.engine import create_engine, upgrade
from pipeline.kafka.clients import ensure_topics
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings
from pipeline.sink.loop import Sink
from tests.integration.pipeline.worker_support import (
    CHAT_PATH,
    WorkerProcess,
    free_port,
    start_worker,
    worker_settings,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RESULT_BYTES = 10 * 1024 * 1024
TOOLS_PATH = [wire.GRAPH_AGENT, wire.GRAPH_TOOLS]
SQL = "SELECT tailnum, carrier, dep_delay FROM flights_view"
WAIT_S = 150.0


def _line(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _big_result() -> tuple[dict[str, Any], int]:
    """Returns: an ``svcSqlApi`` result of at least ``RESULT_BYTES`` and its row count."""
    row = ["N12345", "UA", 17]
    rows = RESULT_BYTES // len(json.dumps(row)) + 1
    return {
        "sqlQuery": SQL,
        "queryTitle": "Every flight",
        "schema": [
            {"name": "tailnum", "column_type": "String"},
            {"name": "carrier", "column_type": "String"},
            {"name": "dep_delay", "column_type": "Int64"},
        ],
        "data": [row] * rows,
        "totalRows": rows,
        "uuid": "big-result",
    }, rows


def transcript(chat_id: str) -> list[bytes]:
    """The lines the scripted Chat API streams: a tool call whose result is over 10 MiB."""
    result, _ = _big_result()
    call = {"name": wire.TOOL_SQL, "input": json.dumps({"sqlQuery": SQL})}
    return [
        _line(id=wire.ID_CUTOFF, role="assistant", state={"chatId": chat_id, "isStreaming": True}),
        _line(id="u1", role="user", content="List every flight"),
        _line(id="t1", role="assistant", graphPath=TOOLS_PATH, isInProcess=True, toolCall=call),
        _line(
            id="t1",
            role="assistant",
            graphPath=TOOLS_PATH,
            isInProcess=False,
            toolCall={**call, "result": json.dumps(result)},
        ),
        _line(id="f1", role="assistant", content="Here they are.", graphPath=[wire.GRAPH_FINAL]),
    ]


def _app(sent: dict[str, list[bytes]]) -> Starlette:
    async def chat(request: Request) -> Response:
        body = await request.json()
        chat_id = f"chat-{uuid.uuid4().hex[:10]}"
        lines = transcript(chat_id)
        sent[body["input"]] = lines

        async def stream() -> AsyncIterator[bytes]:
            for line in lines:
                yield line + b"\n"

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    return Starlette(routes=[Route(CHAT_PATH, chat, methods=["POST"])])


@pytest.fixture(scope="module")
def chat_server() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    sent: dict[str, list[bytes]] = {}
    port = free_port()
    config = uvicorn.Config(_app(sent), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "chat server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}{CHAT_PATH}", sent
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    name = f"big{uuid.uuid4().hex[:10]}"
    settings = worker_settings(
        kafka_bootstrap,
        name,
        database_url=database_url,
        database_schema=pg_schema,
        sink_group=f"{name}-sink",
        job_deadline_s=120.0,
    )
    upgrade(settings)
    asyncio.run(ensure_topics(settings, wire.ALL_TOPICS))
    return settings


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    running = start_worker(settings, tmp_path / "worker.log")
    yield running
    assert running.stop() == 0, running.log()[-4000:]


def _one(engine: sa.Engine, query: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(query), params).one_or_none()


async def test_ten_mib_sql_result_is_archived_byte_for_byte_with_its_tool_rows(
    settings: Settings, worker: WorkerProcess, chat_server: tuple[str, dict[str, list[bytes]]]
) -> None:
    chat_url, sent = chat_server
    question = f"List every flight {uuid.uuid4().hex[:6]}"
    job = ChatJob(
        job_id=str(uuid.uuid4()),
        run_id="big-run",
        question=question,
        session_settings={"externalId": "analyst-1"},
        chat_url=chat_url,
    )
    await submit_jobs(settings, [job])
    engine = create_engine(settings)
    sink = Sink(settings)
    await sink.start()
    task = asyncio.create_task(sink.run())
    try:
        deadline = time.monotonic() + WAIT_S
        done = "SELECT status FROM jobs WHERE job_id = :j AND normalised_attempt = last_attempt"
        while await asyncio.to_thread(_one, engine, done, j=job.job_id) is None:
            assert worker.process.poll() is None, worker.log()[-4000:]
            assert time.monotonic() < deadline, f"job not archived:\n{worker.log()[-4000:]}"
            await asyncio.sleep(0.5)
        big_sent = sent[question][3]
        stored = _one(
            engine,
            "SELECT raw, length(raw) AS n, parse_error FROM stream_lines"
            " WHERE job_id = :j AND line_no = 4",
            j=job.job_id,
        )
        call = _one(
            engine,
            "SELECT name, kind, complete, jsonb_array_length(result->'data') AS rows"
            " FROM tool_calls WHERE job_id = :j AND message_id = 't1'",
            j=job.job_id,
        )
        query = _one(
            engine,
            "SELECT sql_query, total_rows, returned_rows FROM sql_queries WHERE job_id = :j",
            j=job.job_id,
        )
        status = _one(engine, "SELECT status, line_count FROM jobs WHERE job_id = :j", j=job.job_id)
    finally:
        sink.request_stop()
        await task
        await sink.stop()
        engine.dispose()
    _, rows = _big_result()
    assert len(big_sent) > RESULT_BYTES
    print(f"10 MiB result: line bytes sent={len(big_sent)} stored={stored.n} rows={rows}")
    assert stored.n == len(big_sent) and stored.parse_error is None
    assert hashlib.sha256(bytes(stored.raw)).digest() == hashlib.sha256(big_sent).digest()
    assert (call.name, call.kind, call.complete, call.rows) == (wire.TOOL_SQL, "sql", True, rows)
    assert (query.sql_query, query.total_rows, query.returned_rows) == (SQL, rows, rows)
    assert (status.status, status.line_count) == ("completed", len(sent[question]))
