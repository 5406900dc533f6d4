"""Support for the worker tests: a scripted NDJSON Chat API, a worker process, a topic reader.

* :func:`serve_scripted_chat`: a tiny Starlette app under real uvicorn on a free loopback port
  (streaming behaviour needs a real server). The job's question picks the script; text after a
  ``:`` only makes the question unique (per-question call counters).
* :func:`start_worker`: ``run_worker`` in a subprocess (faust installs signal handlers, which need
  a main thread), configured by ``CHATSCRIBE_*`` variables, stopped with SIGTERM.
* :class:`TopicReader`: records of ``chat.lines``, ``chat.job-events`` and
  ``chat.requests.dlq`` by key, filled by a plain aiokafka consumer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from aiokafka import ConsumerRecord
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from models import wire
from models.records import ChatJob, JobEvent
from pipeline.kafka.clients import create_consumer, create_producer
from pipeline.settings import Settings
from pipeline.worker.attempts import ERROR_TYPE_SUPERSEDED
from tests.stack_support import LOOPBACK_ANY_PORT, TOPIC_PREFIXES

API_KEY = "worker-test-key"
CHAT_PATH = wire.CHAT_PATH_TEMPLATE.format(cloud_region="t", account_name="acme", agent_id="7")
BIG_LINE_BYTES = 3 * 1024 * 1024
SLOW_LINE_DELAY_S = 0.1
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 30.0
RUN_WORKER = (
    "from pipeline.settings import Settings; from pipeline.worker.app import run_worker; "
    "run_worker(Settings())"
)


def _cutoff(chat_id: str) -> bytes:
    return json.dumps(
        {
            "id": wire.ID_CUTOFF,
            "role": "assistant",
            "sort": 0,
            "state": {"chatId": chat_id, "isStreaming": True},
        }
    ).encode()


def _line(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


USAGE = _line(id=wire.ID_USAGE, usage={"llmCalls": 1, "totalTokens": 42})


def normal_lines(chat_id: str) -> list[bytes]:
    """The lines of the ``normal`` script, including a malformed and an invalid UTF-8 line."""
    return [
        _cutoff(chat_id),
        _line(id="m1", role="user", content="How many flights?", sort=1),
        _line(id="m2", role="assistant", content="Let me", isDelta=True, isInProcess=True),
        b'{"id":"m2","role":"assistant","content":" check\xff\xfe","isDelta":true}',
        b'{"id": "broken", "content": ',
        b"",
        _line(id="m3", role="assistant", content="42 flights.", graphPath=["final"]) + b"\r",
        USAGE,
    ]


HUGE_LINE_BYTES = 20 * 1024 * 1024


def malformed_lines(chat_id: str) -> list[bytes]:
    r"""The ``malformed`` script: each kind of bad line the issue names, then a truncated tail.

    Order: cutoff, invalid JSON, invalid UTF-8, unknown fields, unknown sentinel, a 20 MiB line,
    a normal final answer, ``__usage__``, and a last line without ``\n`` (truncated JSON).
    """
    return [
        _cutoff(chat_id),
        b'{"id": "m1", "role": "assistant", "content": "unclosed',
        b'{"id":"m2","role":"assistant","content":"caf\xe9 \xc3\x28"}',
        _line(id="m3", role="assistant", content="x", isStructuredResponse=True, extra={"a": 1}),
        _line(id="__mystery__", type="unknown-sentinel", code="what_is_this"),
        _line(id="m4", role="assistant", content="y" * HUGE_LINE_BYTES),
        _line(id="m5", role="assistant", content="done", graphPath=["final"]),
        USAGE,
        b'{"id":"m6","content":"cut mid-wa',
    ]


FLOOD_LINES = 60_000
"""Lines of the ``flood`` script: a hostile agent's answer that never stops on its own."""

SCRIPTS = (
    "throttle-forever",
    "flood",
    "normal",
    "error-line",
    "http-500",
    "http-400",
    "flaky",
    "slow",
    "big",
    "unterminated",
    "aborted",
    "malformed",
    "break",
)


@dataclass
class ScriptedChat:
    """State of the scripted Chat API: calls seen and chats to abort."""

    base_url: str = ""
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    authorizations: list[str] = field(default_factory=list)
    aborts: list[dict[str, Any]] = field(default_factory=list)
    abort_events: dict[str, threading.Event] = field(default_factory=dict)
    state_fetches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chat_url(self) -> str:
        return self.base_url + CHAT_PATH


def script_app(state: ScriptedChat) -> Starlette:
    async def chat(request: Request) -> Response:
        body = await request.json()
        if "input" not in body:  # a takeover fetches the thread's state (interface, "1. Chat")
            state.state_fetches.append(body)
            return StreamingResponse(_snapshot(body["chatId"]), media_type="application/json")
        question: str = body["input"]
        state.calls[question] += 1
        state.authorizations.append(request.headers.get("authorization", ""))
        script = question.split(":", 1)[0]
        chat_id = f"chat-{uuid.uuid4().hex[:12]}"
        if script == "http-500":
            return JSONResponse({"error": "agent crashed"}, status_code=500)
        if script == "http-400":
            return JSONResponse({"error": "sessionSettings: bad externalId"}, status_code=400)
        if script == "flaky" and state.calls[question] <= 2:
            return JSONResponse({"error": "warming up"}, status_code=503)
        if script == "throttle-forever":  # a hostile agent: "come back at once", for ever
            headers = {"Retry-After": "0"}
            return JSONResponse({"error": "slow down"}, status_code=429, headers=headers)
        state.abort_events[chat_id] = threading.Event()
        return StreamingResponse(_stream(state, script, chat_id), media_type="application/json")

    async def abort(request: Request) -> Response:
        body = await request.json()
        state.aborts.append(body)
        event = state.abort_events.get(body.get("chatId", ""))
        if event is None:
            return JSONResponse({"error": "chat not found"}, status_code=404)
        event.set()
        return Response(status_code=204)

    routes = [
        Route(CHAT_PATH, chat, methods=["POST"]),
        Route(CHAT_PATH + "/abort", abort, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _error_line_chunks(chat_id: str) -> list[bytes]:
    lines = [_cutoff(chat_id), _line(content="a"), _line(error="tool exploded"), _line(content="b")]
    return [raw + b"\n" for raw in [*lines, USAGE]]


def _malformed_chunks(chat_id: str) -> list[bytes]:
    lines = malformed_lines(chat_id)
    return [raw + b"\n" for raw in lines[:-1]] + [lines[-1]]


def _big_chunks(chat_id: str) -> list[bytes]:
    return [_cutoff(chat_id) + b"\n" + _line(content="x" * BIG_LINE_BYTES) + b"\n" + USAGE + b"\n"]


def _aborted_chunks(chat_id: str) -> list[bytes]:
    abort = _line(id=wire.ID_ABORTED, type="abort", code="chat_aborted")
    return [_cutoff(chat_id) + b"\n" + abort + b"\n"]


_FIXED_SCRIPTS: dict[str, Callable[[str], list[bytes]]] = {
    "error-line": _error_line_chunks,
    "malformed": _malformed_chunks,
    "big": _big_chunks,
    "unterminated": lambda chat_id: [_cutoff(chat_id) + b"\n" + b'{"content":"cut'],
    "aborted": _aborted_chunks,
}
"""Scripts whose body is a fixed list of chunks, by name."""


async def _stream(state: ScriptedChat, script: str, chat_id: str) -> AsyncIterator[bytes]:
    if script in ("normal", "flaky"):
        for raw in normal_lines(chat_id):
            yield raw + b"\n"
            await asyncio.sleep(0)
    elif script in _FIXED_SCRIPTS:
        for chunk in _FIXED_SCRIPTS[script](chat_id):
            yield chunk
    elif script == "break":
        yield _cutoff(chat_id) + b"\n" + _line(content="half") + b"\n"
        raise RuntimeError("injected: the stream breaks mid-way")
    elif script == "slow":
        async for raw in _slow(state, chat_id):
            yield raw
    elif script == "flood":
        yield _cutoff(chat_id) + b"\n"
        delta = _line(id="m1", role="assistant", content="x", isDelta=True) + b"\n"
        for _ in range(FLOOD_LINES // 1000):
            yield delta * 1000
            await asyncio.sleep(0)


def snapshot_lines(chat_id: str) -> list[bytes]:
    """A thread's state: its question and an answer (what a takeover records)."""
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "recovered"}]
    state = {"chatId": chat_id, "isStreaming": False}
    return [
        _line(id=wire.ID_CUTOFF, role="assistant", sort=0, state=state),
        _line(id=wire.ID_STATE, sort=1, state={**state, "messages": messages}),
        USAGE,
    ]


async def _snapshot(chat_id: str) -> AsyncIterator[bytes]:
    for raw in snapshot_lines(chat_id):
        yield raw + b"\n"


async def _slow(state: ScriptedChat, chat_id: str) -> AsyncIterator[bytes]:
    """One line every SLOW_LINE_DELAY_S for a minute, or until aborted."""
    yield _cutoff(chat_id) + b"\n"
    aborted = state.abort_events[chat_id]
    for n in range(int(60 / SLOW_LINE_DELAY_S)):
        if aborted.is_set():
            yield _line(id=wire.ID_ABORTED, type="abort", code="chat_aborted") + b"\n"
            yield USAGE + b"\n"
            return
        yield _line(id="m1", role="assistant", content=f"tick {n}", isDelta=True) + b"\n"
        await asyncio.sleep(SLOW_LINE_DELAY_S)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class WorkerProcess:
    settings: Settings
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait(self, timeout_s: float) -> int:
        """Waits for the process to exit by itself; returns the exit code."""
        return self.process.wait(timeout=timeout_s)

    def stop(self) -> int:
        """SIGTERM, then wait; returns the exit code (SIGKILL after STOP_TIMEOUT_S)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


GUARD_SETTINGS = (
    "chat_url_allow",
    "api_key_urls",
    "worker_max_throttled",
    "worker_max_attempt_lines",
    "worker_max_attempt_bytes",
    "job_deadline_max_s",
)
"""Settings of the worker's outbound guard that :func:`start_worker` hands over."""


def start_worker(settings: Settings, log_path: Path, *, code: str | None = None) -> WorkerProcess:
    """Starts ``run_worker(Settings())`` (or ``code``) in a subprocess configured by env vars."""
    env = {
        **os.environ,
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_WORKER_GROUP": settings.worker_group,
        "CHATSCRIBE_API_KEY": settings.api_key.get_secret_value(),
        "CHATSCRIBE_WORKER_CONCURRENCY": str(settings.worker_concurrency),
        "CHATSCRIBE_JOB_DEADLINE_S": str(settings.job_deadline_s),
        "CHATSCRIBE_WORKER_SESSION_TIMEOUT_S": str(settings.worker_session_timeout_s),
        "PYTHONUNBUFFERED": "1",
    }
    for name in GUARD_SETTINGS:
        value = getattr(settings, name, None)
        if value is not None:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            env[f"CHATSCRIBE_{name.upper()}"] = text
    if settings.metrics_port is not None:
        env["CHATSCRIBE_METRICS_PORT"] = str(settings.metrics_port)
    code = code or RUN_WORKER
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[3],
    )
    return WorkerProcess(settings, process, log_path)


def unique_prefix() -> str:
    """Returns: a fresh name for topics and consumer groups (``w`` + 12 hex digits)."""
    return f"w{uuid.uuid4().hex[:12]}"


def worker_settings(kafka_bootstrap: str, name: str, **overrides: Any) -> Settings:
    """Settings with a unique topic prefix and worker group for ``name``."""
    TOPIC_PREFIXES.add(f"{name}.")
    values: dict[str, Any] = {
        "kafka_bootstrap": kafka_bootstrap,
        "topic_prefix": f"{name}.",
        "worker_group": f"{name}-worker",
        "api_key": API_KEY,
        "worker_concurrency": 4,
        "chat_url_allow": LOOPBACK_ANY_PORT,
        "api_key_urls": LOOPBACK_ANY_PORT,
        **overrides,
    }
    return Settings(**values)


ALL_TOPICS = (
    wire.TOPIC_REQUESTS,
    wire.TOPIC_CANCELLATIONS,
    wire.TOPIC_LINES,
    wire.TOPIC_JOB_EVENTS,
    wire.TOPIC_REQUESTS_DLQ,
)
OUTPUT_TOPICS = (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_REQUESTS_DLQ)


@dataclass
class TopicReader:
    """Records of the worker's output topics by topic and key, in arrival order."""

    settings: Settings
    records: dict[str, dict[str, list[ConsumerRecord[bytes, bytes]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )

    def of(self, topic: str, key: str) -> list[ConsumerRecord[bytes, bytes]]:
        return self.records[self.settings.topic(topic)][key]

    def events(self, job_id: str) -> list[JobEvent]:
        return [JobEvent.from_value(r.value or b"") for r in self.of(wire.TOPIC_JOB_EVENTS, job_id)]

    def terminals(self, job_id: str) -> list[JobEvent]:
        return [e for e in self.events(job_id) if e.is_terminal]

    def terminal(self, job_id: str) -> JobEvent | None:
        """The job's first terminal event.

        Leaving out the one a takeover records for an attempt whose worker was lost
        (``AttemptSuperseded``).
        """
        ended = [e for e in self.terminals(job_id) if e.error_type != ERROR_TYPE_SUPERSEDED]
        return next(iter(ended), None)

    async def wait_for(self, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            assert time.monotonic() < deadline, "timed out waiting for records"
            await asyncio.sleep(0.05)

    async def wait_terminal(self, job_id: str, timeout_s: float = 60.0) -> JobEvent:
        """Waits for the job's terminal event and then for its ``line_count`` lines."""
        await self.wait_for(lambda: self.terminal(job_id) is not None, timeout_s)
        terminal = self.terminal(job_id)
        assert terminal is not None
        count = terminal.line_count or 0
        await self.wait_for(lambda: len(self.of(wire.TOPIC_LINES, job_id)) >= count, 10.0)
        return terminal


@asynccontextmanager
async def reading(settings: Settings) -> AsyncIterator[TopicReader]:
    """A :class:`TopicReader` filled from the beginning of the output topics while open."""
    reader = TopicReader(settings)
    topics = [settings.topic(t) for t in OUTPUT_TOPICS]
    consumer = create_consumer(settings, *topics, group_id=None)
    await consumer.start()

    async def pump() -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    key = (record.key or b"").decode(errors="replace")
                    reader.records[tp.topic][key].append(record)

    task = asyncio.create_task(pump())
    try:
        yield reader
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await consumer.stop()


Submit = Callable[..., Awaitable[ChatJob]]


@asynccontextmanager
async def submitting(settings: Settings, chat_url: str) -> AsyncIterator[Submit]:
    """``await submit(question, **job_fields)`` sends a job to ``chat.requests``; returns it."""
    producer = create_producer(settings)
    await producer.start()

    async def submit(question: str, **fields: Any) -> ChatJob:
        job = ChatJob.model_validate(
            {
                "job_id": str(uuid.uuid4()),
                "run_id": "run-1",
                "question": question,
                "session_settings": {"externalId": "analyst-1"},
                "chat_url": chat_url,
                **fields,
            }
        )
        topic = settings.topic(wire.TOPIC_REQUESTS)
        await producer.send_and_wait(topic, job.to_value(), key=job.job_id.encode())
        return job

    try:
        yield submit
    finally:
        await producer.stop()


async def send_record(settings: Settings, topic: str, key: str, value: bytes) -> None:
    """Sends one record to ``topic`` (prefix applied)."""
    producer = create_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(topic), value, key=key.encode())
    finally:
        await producer.stop()


@contextmanager
def serve_scripted_chat() -> Iterator[ScriptedChat]:
    """Runs the scripted Chat API under uvicorn in a background thread while open."""
    state = ScriptedChat()
    port = free_port()
    config = uvicorn.Config(
        script_app(state),
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="scripted-chat", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "scripted Chat API did not start"
        time.sleep(0.02)
    state.base_url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
