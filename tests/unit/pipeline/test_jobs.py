from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from models.records import ChatJob, Headers, JobEvent, LineEnvelope
from pipeline.chat.client import ChatClient
from pipeline.errors import PermanentError, TransientError
from pipeline.worker.attempts import PriorAttempts
from pipeline.worker.job_runner import JobControl, JobRunner, RetryPolicy

URL = "http://chat.test/api/v1/public/r/a/agents/1/chat/stream-chat-state"
FAST_RETRY = RetryPolicy(attempts=4, initial_s=0.001, max_s=0.005)
CUTOFF = b'{"id":"__cutoff__","state":{"chatId":"c1"}}\n'
Handler = Callable[[httpx.Request], Any]


class RecordingOutput:
    """An Output that keeps what it was given; can fail on a given line number."""

    def __init__(self, *, fail_line: int | None = None, error: Exception | None = None) -> None:
        self.lines: list[LineEnvelope] = []
        self.events: list[JobEvent] = []
        self.deliveries = 0
        self._fail_line = fail_line
        self._error = error

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        envelope = LineEnvelope.from_record(b"recorded", raw, headers)
        if envelope.line_no == self._fail_line and self._error is not None:
            raise self._error
        self.lines.append(envelope)

    async def send_event(self, event: JobEvent) -> None:
        self.events.append(event)

    async def delivered(self) -> None:
        self.deliveries += 1

    @property
    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


class OutputBrokeError(TransientError):
    pass


class LineTooBigError(PermanentError):
    pass


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


def _runner(handler: Handler, **kwargs: Any) -> JobRunner:
    client = ChatClient(api_key="k", transport=httpx.MockTransport(handler))
    return JobRunner(client, job_deadline_s=30, worker_id="w1", retry=FAST_RETRY, **kwargs)


async def _body(*parts: bytes, delay_s: float = 0.0) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
        await asyncio.sleep(delay_s)


def _counting(responses: list[httpx.Response]) -> tuple[Handler, list[str]]:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return responses[min(len(calls), len(responses)) - 1]

    return handler, calls


async def test_run_produces_started_lines_first_line_and_completed_in_order() -> None:
    handler, _ = _counting([httpx.Response(200, content=_body(CUTOFF, b'{"content":"a"}\n'))])
    output = RecordingOutput()
    terminal = await _runner(handler).run(_job(), output)

    assert output.kinds == ["started", "first_line", "completed"]
    assert [(x.line_no, x.chat_id) for x in output.lines] == [(1, "c1"), (2, "c1")]
    assert (terminal.line_count, terminal.http_status, terminal.chat_id) == (2, 200, "c1")
    assert output.deliveries == 3  # started (before the call), the lines, the terminal event
    assert output.events[0].job is not None


async def test_run_retries_5xx_then_streams() -> None:
    handler, calls = _counting(
        [httpx.Response(503), httpx.Response(502), httpx.Response(200, content=CUTOFF)]
    )
    terminal = await _runner(handler).run(_job(), RecordingOutput())
    assert terminal.kind == "completed"
    assert len(calls) == 3


async def test_run_does_not_retry_4xx() -> None:
    handler, calls = _counting([httpx.Response(404, json={"error": "no agent"})])
    terminal = await _runner(handler).run(_job(), RecordingOutput())
    assert (terminal.kind, terminal.http_status, terminal.error_type) == (
        "failed",
        404,
        "ChatNotFoundError",
    )
    assert len(calls) == 1


async def test_run_gives_up_on_connect_errors_after_four_attempts() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    terminal = await _runner(handler).run(_job(), RecordingOutput())
    assert (terminal.kind, terminal.error_type, terminal.line_count) == (
        "failed",
        "ChatConnectError",
        0,
    )
    assert len(calls) == 4


async def test_run_job_continues_a_broken_stream_by_fetching_the_threads_state() -> None:
    bodies: list[dict[str, Any]] = []

    async def broken() -> AsyncIterator[bytes]:
        yield CUTOFF + b'{"content":"par'
        raise httpx.ReadError("reset")

    state = (
        b'{"id":"__cutoff__","state":{"chatId":"c1","isStreaming":false}}\n'
        b'{"id":"__state__","state":{"chatId":"c1","messages":['
        b'{"role":"user","content":"How many?"},{"role":"assistant","content":"42"}]}}\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            return httpx.Response(200, content=broken())
        return httpx.Response(200, content=state)

    output = RecordingOutput()
    terminal = await _runner(handler).run_job(_job(), output)

    assert terminal is not None and (terminal.kind, terminal.attempt) == ("completed", 2)
    assert "input" in bodies[0] and "chatId" not in bodies[0]
    assert bodies[1] == {"chatId": "c1", "sessionSettings": {"externalId": "u1"}}
    assert [(e.attempt, e.kind, e.error_type) for e in output.events] == [
        (1, "started", None),
        (1, "first_line", None),
        (1, "failed", "StreamBrokenError"),
        (2, "started", None),
        (2, "first_line", None),
        (2, "completed", None),
    ]
    assert [(x.attempt, x.line_no) for x in output.lines] == [(1, 1), (1, 2), (2, 1), (2, 2)]


async def test_run_job_takeover_without_a_chat_id_asks_again_as_the_next_attempt() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, content=CUTOFF)

    output = RecordingOutput()
    prior = PriorAttempts(attempt=1, open=True)
    terminal = await _runner(handler).run_job(_job(), output, prior=prior)

    assert terminal is not None and (terminal.kind, terminal.attempt) == ("completed", 2)
    assert bodies == [{"input": "How many?", "sessionSettings": {"externalId": "u1"}}]
    assert {x.attempt for x in output.lines} == {2}


async def test_run_job_state_fetch_waits_until_the_thread_stopped_streaming() -> None:
    running = b'{"id":"__cutoff__","state":{"chatId":"c1","isStreaming":true}}\n'
    done = (
        b'{"id":"__cutoff__","state":{"chatId":"c1","isStreaming":false}}\n'
        b'{"id":"__state__","state":{"chatId":"c1","messages":[{"role":"user"},'
        b'{"role":"assistant","content":"42"}]}}\n'
    )
    responses = [httpx.Response(200, content=body) for body in (running, running, done)]
    handler, calls = _counting(responses)
    output = RecordingOutput()
    prior = PriorAttempts(attempt=1, open=True, chat_id="c1")
    runner = _runner(handler, state_poll_s=0.01)
    terminal = await runner.run_job(_job(), output, prior=prior)

    assert terminal is not None and terminal.kind == "completed"
    assert len(calls) == 3
    assert [x.raw for x in output.lines] == done.splitlines()


async def test_run_job_state_without_an_answer_fails_as_interrupted() -> None:
    state = b'{"id":"__state__","state":{"chatId":"c1","messages":[{"role":"user"}]}}\n'
    handler, _ = _counting([httpx.Response(200, content=CUTOFF + state)])
    prior = PriorAttempts(attempt=1, open=True, chat_id="c1")
    terminal = await _runner(handler).run_job(_job(), RecordingOutput(), prior=prior)

    assert terminal is not None
    assert (terminal.kind, terminal.attempt, terminal.error_type) == (
        "failed",
        2,
        "TurnInterrupted",
    )


async def test_run_job_past_max_attempts_fails_without_calling() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no call expected")

    output = RecordingOutput()
    prior = PriorAttempts(attempt=3, open=True, chat_id="c1")
    terminal = await _runner(handler, max_attempts=3).run_job(_job(), output, prior=prior)

    assert terminal is not None
    assert (terminal.kind, terminal.attempt, terminal.error_type) == (
        "failed",
        4,
        "AttemptsExhausted",
    )
    assert output.kinds == ["failed"]


async def test_run_job_of_a_finished_job_does_nothing() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no call expected")

    output = RecordingOutput()
    prior = PriorAttempts(attempt=1, open=False, chat_id="c1")
    assert await _runner(handler).run_job(_job(), output, prior=prior) is None
    assert output.events == []


async def test_run_broken_stream_after_first_line_fails_without_retry() -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield CUTOFF + b'{"content":"par'
        raise httpx.ReadError("reset")

    handler, calls = _counting([httpx.Response(200, content=broken())])
    output = RecordingOutput()
    terminal = await _runner(handler).run(_job(), output)
    assert (terminal.kind, terminal.error_type, terminal.http_status) == (
        "failed",
        "StreamBrokenError",
        200,
    )
    assert [x.terminated for x in output.lines] == [True, False]
    assert terminal.line_count == 2
    assert len(calls) == 1


async def test_run_closes_a_stream_that_ignores_the_abort_after_the_grace() -> None:
    aborts: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/abort"):
            aborts.append(json.loads(request.content))
            return httpx.Response(204)
        ticks = [b'{"content":"tick"}\n'] * 1000
        return httpx.Response(200, content=_body(CUTOFF, *ticks, delay_s=0.01))

    terminal = await _runner(handler, abort_grace_s=0.2).run(
        _job(deadline_s=0.1), RecordingOutput()
    )
    assert terminal.kind == "aborted"
    assert terminal.error == "deadline exceeded; stream closed by the worker"
    assert terminal.error_type == "StreamClosedByWorker"
    assert aborts == [{"chatId": "c1", "sessionSettings": {"externalId": "u1"}}]


async def test_run_aborts_as_soon_as_the_chat_id_arrives_after_the_deadline() -> None:
    aborted = asyncio.Event()

    async def late_cutoff() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.15)
        yield CUTOFF
        await asyncio.wait_for(aborted.wait(), timeout=5)
        yield b'{"id":"__aborted__","code":"chat_aborted"}\n'

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/abort"):
            aborted.set()
            return httpx.Response(204)
        return httpx.Response(200, content=late_cutoff())

    terminal = await _runner(handler).run(_job(deadline_s=0.05), RecordingOutput())
    assert (terminal.kind, terminal.error, terminal.line_count) == (
        "aborted",
        "deadline exceeded",
        2,
    )


def _abortable() -> Handler:
    """A chat that streams the chat id, then waits for its abort call and ends ``__aborted__``."""
    aborted = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        yield CUTOFF
        await asyncio.wait_for(aborted.wait(), timeout=5)
        yield b'{"id":"__aborted__","code":"chat_aborted"}\n'

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/abort"):
            aborted.set()
            return httpx.Response(204)
        return httpx.Response(200, content=endless())

    return handler


async def test_run_cancellation_through_control_aborts_the_chat() -> None:
    control = JobControl()
    run = _runner(_abortable()).run(_job(), RecordingOutput(), control=control)
    task = asyncio.create_task(run)
    await asyncio.sleep(0.05)
    control.request_abort("cancelled: operator")
    terminal = await asyncio.wait_for(task, timeout=5)
    assert (terminal.kind, terminal.error) == ("aborted", "cancelled: operator")


async def test_run_requested_before_the_stream_opened_aborts_once_the_chat_id_is_known() -> None:
    control = JobControl()
    control.request_abort("cancelled: operator")  # before the attempt listens
    terminal = await asyncio.wait_for(
        _runner(_abortable()).run(_job(), RecordingOutput(), control=control), timeout=5
    )
    assert (terminal.kind, terminal.error, terminal.line_count) == (
        "aborted",
        "cancelled: operator",
        2,
    )


async def test_run_streams_without_a_task_of_its_own_until_an_abort_is_requested() -> None:
    tasks_seen: list[int] = []

    async def watched() -> AsyncIterator[bytes]:
        for part in (CUTOFF, b'{"id":"m1","content":"hi"}\n'):
            tasks_seen.append(len(asyncio.all_tasks()))
            yield part

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=watched())

    before = len(asyncio.all_tasks())
    terminal = await _runner(handler).run(_job(), RecordingOutput())
    assert terminal.kind == "completed"
    assert tasks_seen == [before, before]  # the deadline is a timer, not a watchdog task


def test_control_tells_its_listener_the_first_reason_once() -> None:
    control, told = JobControl(), list[str]()
    control.on_abort(told.append)
    control.request_abort("deadline exceeded")
    control.request_abort("cancelled: operator")
    control.on_abort(None)
    assert (told, control.reason) == (["deadline exceeded"], "deadline exceeded")
    late: list[str] = []
    control.on_abort(late.append)  # a listener after the request is told at once
    assert late == ["deadline exceeded"]


async def test_run_line_the_output_can_never_hold_fails_the_job() -> None:
    handler, _ = _counting([httpx.Response(200, content=CUTOFF + b"{}\n{}\n")])
    output = RecordingOutput(fail_line=2, error=LineTooBigError("too big"))
    terminal = await _runner(handler).run(_job(), output)
    assert (terminal.kind, terminal.error_type, terminal.line_count) == (
        "failed",
        "LineTooBigError",
        1,
    )


async def test_run_output_that_cannot_deliver_raises_to_the_caller() -> None:
    handler, _ = _counting([httpx.Response(200, content=CUTOFF + b"{}\n")])
    output = RecordingOutput(fail_line=2, error=OutputBrokeError("broker gone"))
    with pytest.raises(OutputBrokeError):
        await _runner(handler).run(_job(), output)
    assert output.kinds == ["started", "first_line"]


async def test_run_sends_the_jobs_own_api_key() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, content=CUTOFF)

    output = RecordingOutput()
    await _runner(handler).run(_job(api_key="own"), output)
    assert seen == ["Api-Key own"]
    assert all(e.job is None or e.job.api_key is None for e in output.events)


async def test_skip_records_an_aborted_job_without_calling_the_api() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no call expected")

    output = RecordingOutput()
    terminal = await _runner(handler).skip(_job(), output, reason="cancelled before start")
    assert output.kinds == ["aborted"]
    assert (terminal.line_count, terminal.error) == (0, "cancelled before start")
