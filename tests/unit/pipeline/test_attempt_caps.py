"""Per-attempt caps on one response (lines, bytes) and the ceiling on a job's deadline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from models.records import ChatJob, Headers, JobEvent
from pipeline.chat.client import ChatClient
from pipeline.settings import Settings
from pipeline.worker.job_runner import JobRunner, RetryPolicy

URL = "http://chat.test/api/v1/public/r/a/agents/1/chat/stream-chat-state"
FAST = RetryPolicy(attempts=1, initial_s=0.001, max_s=0.005, throttle_floor_s=0.001)
CUTOFF = b'{"id":"__cutoff__","state":{"chatId":"c1","isStreaming":true}}\n'


class Output:
    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.events: list[JobEvent] = []

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        self.lines.append(raw)

    async def send_event(self, event: JobEvent) -> None:
        self.events.append(event)

    async def delivered(self) -> None:
        return None


def _job(**fields: Any) -> ChatJob:
    values = {
        "job_id": "j1",
        "run_id": "r1",
        "question": "How many?",
        "session_settings": {"externalId": "u1"},
        "chat_url": URL,
        **fields,
    }
    return ChatJob.model_validate(values)


def _flood(lines: int, *, content: str = "x") -> bytes:
    delta = json.dumps({"id": "m1", "content": content, "isDelta": True}).encode() + b"\n"
    return CUTOFF + delta * (lines - 1)


def _runner(body: bytes, **caps: Any) -> JobRunner:
    client = ChatClient(
        api_key="k", transport=httpx.MockTransport(lambda _: httpx.Response(200, content=body))
    )
    return JobRunner(client, job_deadline_s=30, worker_id="w1", retry=FAST, **caps)


async def test_a_response_past_the_line_cap_fails_and_keeps_the_lines_before_it() -> None:
    output = Output()
    terminal = await _runner(_flood(60_000), max_attempt_lines=1_000).run(_job(), output)
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatResponseTooLargeError"
    assert terminal.error is not None and "1000 lines" in terminal.error
    assert terminal.line_count == 1_000 and len(output.lines) == 1_000
    assert output.lines[0] == CUTOFF.rstrip(b"\n")


async def test_a_response_past_the_byte_cap_fails_and_keeps_the_lines_before_it() -> None:
    output = Output()
    body = _flood(100, content="y" * 1_000)  # ~1 KB a line
    terminal = await _runner(body, max_attempt_bytes=20_000).run(_job(), output)
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatResponseTooLargeError"
    assert terminal.error is not None and "20000 bytes" in terminal.error
    assert 0 < len(output.lines) < 100
    assert sum(len(line) + 1 for line in output.lines) <= 20_000


async def test_a_response_within_the_caps_completes() -> None:
    body = _flood(10) + b'{"id":"m2","content":"done","graphPath":["final"]}\n'
    terminal = await _runner(body, max_attempt_lines=11).run(_job(), Output())
    assert terminal.kind == "completed" and terminal.line_count == 11


class EndlessBody(httpx.AsyncByteStream):
    """A stream that sends its cutoff, then a delta every 10 ms until closed."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield CUTOFF
        while True:
            await asyncio.sleep(0.01)
            yield b'{"id":"m1","content":"tick","isDelta":true}\n'


async def test_a_jobs_deadline_is_cut_to_the_workers_ceiling() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/abort"):
            return httpx.Response(204)
        return httpx.Response(200, stream=EndlessBody())

    client = ChatClient(api_key="k", transport=httpx.MockTransport(handler))
    runner = JobRunner(
        client,
        job_deadline_s=30,
        worker_id="w1",
        retry=FAST,
        abort_grace_s=0.2,
        job_deadline_max_s=0.3,
    )
    terminal = await asyncio.wait_for(runner.run(_job(deadline_s=1e9), Output()), timeout=20)
    assert terminal.kind == "aborted"
    assert terminal.error is not None and "deadline exceeded" in terminal.error


def test_the_workers_default_caps() -> None:
    settings = Settings()
    assert settings.worker_max_attempt_lines == 20_000
    assert settings.worker_max_attempt_bytes == 64 * 1024 * 1024
    assert settings.job_deadline_max_s == 3600.0
