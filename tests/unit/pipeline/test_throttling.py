"""Throttling: Retry-After parsing, 429/503 mapping, retries that burn no attempt, the deadline."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from models.records import ChatJob, Headers, JobEvent, LineEnvelope
from pipeline.chat.client import ChatClient, error_for_status, parse_retry_after
from pipeline.errors import ChatServerError, ChatThrottledError
from pipeline.worker.job_runner import JobControl, JobRunner, RetryPolicy

URL = "http://chat.test/api/v1/public/r/a/agents/1/chat/stream-chat-state"
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
FAST = RetryPolicy(attempts=2, initial_s=0.001, max_s=0.005, throttle_floor_s=0.001)
BODY = b'{"id":"__cutoff__","state":{"chatId":"c1"}}\n{"id":"m1","content":"hi","final":true}\n'


class Output:
    def __init__(self) -> None:
        self.lines: list[LineEnvelope] = []
        self.events: list[JobEvent] = []

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        self.lines.append(LineEnvelope.from_record(b"recorded", raw, headers))

    async def send_event(self, event: JobEvent) -> None:
        self.events.append(event)

    async def delivered(self) -> None:
        return None


class Observer:
    def __init__(self) -> None:
        self.throttles: list[float | None] = []
        self.latencies: list[float] = []
        self.ended = 0
        self.admissions = 0
        self.accepts = 0

    def throttled(self, retry_after_s: float | None) -> None:
        self.throttles.append(retry_after_s)

    def accepted(self) -> None:
        self.accepts += 1

    def first_line(self, latency_s: float) -> None:
        self.latencies.append(latency_s)

    def stream_ended(self) -> None:
        self.ended += 1

    async def admitted(self) -> None:
        self.admissions += 1


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


def _runner(statuses: list[tuple[int, dict[str, str]]], *, deadline_s: float = 30) -> JobRunner:
    """A runner whose agent answers ``statuses`` in turn, then 200 with :data:`BODY`."""
    queue = list(statuses)

    def handler(request: httpx.Request) -> httpx.Response:
        if queue:
            status, headers = queue.pop(0)
            return httpx.Response(status, headers=headers, json={"error": "slow down"})
        return httpx.Response(200, content=BODY)

    client = ChatClient(api_key="k", transport=httpx.MockTransport(handler))
    return JobRunner(client, job_deadline_s=deadline_s, worker_id="w1", retry=FAST)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("1.5", 1.5),
        (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
        ("Tue, 24 Nov 2026 12:00:45 GMT", 45.0),
        ("Tuesday, 24-Nov-26 12:00:10 GMT", 10.0),  # RFC 850, obsolete but allowed
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(value: str, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "nan", "inf", "12 Smarch 2026", "1e400"])
def test_retry_after_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_429_and_503_with_retry_after_are_throttling_carrying_the_wait() -> None:
    too_many = error_for_status(429, "slow", url=URL, retry_after="7")
    unavailable = error_for_status(503, "busy", url=URL, retry_after="3")
    no_header = error_for_status(429, "slow", url=URL)
    assert isinstance(too_many, ChatThrottledError) and too_many.retry_after_s == 7.0
    assert isinstance(unavailable, ChatThrottledError) and unavailable.retry_after_s == 3.0
    assert isinstance(no_header, ChatThrottledError) and no_header.retry_after_s is None
    plain_503 = error_for_status(503, "down", url=URL)
    assert isinstance(plain_503, ChatServerError)
    assert not isinstance(plain_503, ChatThrottledError)


async def test_client_raises_throttling_with_the_response_header() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "2"}, json={"error": "rate limit"})

    async with ChatClient(api_key="k", transport=httpx.MockTransport(handler)) as client:
        stream = client.stream_chat(URL, _request())
        with pytest.raises(ChatThrottledError) as caught:
            await anext(stream)
    assert caught.value.retry_after_s == 2.0
    assert caught.value.status_code == 429
    assert "rate limit" in caught.value.message


def _request() -> Any:
    from pipeline.worker.job_control import chat_request

    return chat_request(_job())


async def test_throttled_answers_burn_no_attempt_and_are_counted() -> None:
    # 2 attempts allowed; 5 throttled answers (more than the attempts) are waited out.
    throttles = [(429, {"Retry-After": "0.01"})] * 4 + [(503, {"Retry-After": "0"})]
    runner = _runner(throttles)
    output, observer = Output(), Observer()
    terminal = await runner.run(_job(), output, control=JobControl(observer=observer))
    assert terminal.kind == "completed"
    assert terminal.throttled == 5
    assert observer.throttles == [0.01, 0.01, 0.01, 0.01, 0.0]
    assert len(observer.latencies) == 1
    assert observer.accepts == 1  # the 200, not the five 429s
    assert observer.ended == 1
    assert observer.admissions == 6  # a stream slot before each call, the throttled ones too


async def test_failures_still_burn_attempts_between_throttles() -> None:
    answers = [(429, {"Retry-After": "0"}), (500, {}), (429, {"Retry-After": "0"}), (500, {})]
    terminal = await _runner(answers).run(_job(), Output())
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatServerError"
    assert terminal.throttled == 2


async def test_throttling_past_the_deadline_fails_at_once() -> None:
    runner = _runner([(429, {"Retry-After": "0.05"}), (429, {"Retry-After": "3600"})])
    started = time.monotonic()
    terminal = await runner.run(_job(deadline_s=5), Output())
    assert time.monotonic() - started < 2  # did not sleep an hour, nor until the deadline
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatThrottledError"
    assert terminal.http_status == 429
    assert terminal.throttled == 2


async def test_terminal_event_without_throttling_has_no_count() -> None:
    terminal = await _runner([]).run(_job(), Output())
    assert terminal.kind == "completed"
    assert terminal.throttled is None
    assert "throttled" not in terminal.to_value().decode()


class SlowSlotObserver(Observer):
    async def admitted(self) -> None:
        self.admissions += 1
        await asyncio.sleep(0.3)  # waiting for a stream slot is not the agent's latency


async def test_first_line_latency_excludes_the_wait_for_a_stream_slot() -> None:
    observer = SlowSlotObserver()
    terminal = await _runner([]).run(_job(), Output(), control=JobControl(observer=observer))
    assert terminal.kind == "completed"
    assert observer.latencies and observer.latencies[0] < 0.2


class SlowKafkaOutput(Output):
    async def send_line(self, raw: bytes, headers: Headers) -> None:
        await asyncio.sleep(0.3)  # a busy producer holding the line is not the agent's latency
        await super().send_line(raw, headers)


async def test_first_line_latency_excludes_the_wait_for_kafka_to_take_the_line() -> None:
    observer = Observer()
    output = SlowKafkaOutput()
    terminal = await _runner([]).run(_job(), output, control=JobControl(observer=observer))
    assert terminal.kind == "completed" and len(output.lines) == 2
    assert observer.latencies and observer.latencies[0] < 0.2


class CountingPolicy(RetryPolicy):
    """A policy that counts the tenacity controllers it builds."""

    built: list[int]

    def retrying(
        self, control: JobControl | None = None, *, deadline_at: float | None = None
    ) -> Any:
        self.built.append(1)
        return super().retrying(control, deadline_at=deadline_at)


def counting(attempts: int) -> CountingPolicy:
    policy = CountingPolicy(attempts=attempts, initial_s=0.001, max_s=0.005)
    object.__setattr__(policy, "built", [])
    return policy


class Calls:
    """A call that fails with the given errors in turn, then answers ``"ok"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.made = 0

    async def __call__(self) -> str:
        self.made += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_policy_call_builds_no_controller_when_the_first_call_succeeds() -> None:
    policy, call = counting(4), Calls()
    assert await policy.call(call) == "ok"
    assert (call.made, policy.built) == (1, [])


async def test_policy_call_counts_the_first_failure_as_the_controllers_first_attempt() -> None:
    failing = Calls(*(ChatServerError("down", status_code=502, url=URL) for _ in range(9)))
    policy = counting(3)
    with pytest.raises(ChatServerError):
        await policy.call(failing)
    assert failing.made == 3  # three calls in all, as a controller around every call makes
    assert policy.built == [1]


async def test_policy_call_tells_a_throttled_first_call_to_the_control_and_calls_again() -> None:
    throttled = ChatThrottledError("slow down", status_code=429, url=URL, retry_after_s=0.0)
    control, call = JobControl(), Calls(throttled)
    assert await counting(1).call(call, control=control) == "ok"
    assert (call.made, control.throttled) == (2, 1)  # and no failure attempt burnt (attempts=1)


async def test_policy_call_raises_a_permanent_error_at_once() -> None:
    policy, call = counting(4), Calls(ValueError("not transient"))
    with pytest.raises(ValueError, match="not transient"):
        await policy.call(call)
    assert (call.made, policy.built) == (1, [])


def test_throttle_wait_has_a_floor_that_grows_whatever_retry_after_says() -> None:
    policy = RetryPolicy(throttle_floor_s=1.0)
    waits = [policy.throttle_wait_s(n, 0.0) for n in (1, 2, 3, 6, 12)]
    assert 1.0 <= waits[0] <= 2.0  # the floor plus up to one floor of jitter
    assert 2.0 <= waits[1] <= 3.0
    assert 4.0 <= waits[2] <= 5.0
    assert 30.0 <= waits[3] <= 31.0 and 30.0 <= waits[4] <= 31.0  # the growth stops
    assert policy.throttle_wait_s(1, 120.0) == 120.0  # a longer Retry-After still wins
    assert policy.throttle_wait_s(1, None) >= 1.0


class CountingAgent:
    """An agent that answers 429 with ``Retry-After: 0`` to every call, and counts them."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return httpx.Response(429, headers={"Retry-After": "0"}, json={"error": "slow down"})


async def test_an_agent_throttling_forever_gets_max_throttles_calls_then_the_job_fails() -> None:
    agent = CountingAgent()
    client = ChatClient(api_key="k", transport=httpx.MockTransport(agent))
    policy = RetryPolicy(attempts=2, initial_s=0.001, throttle_floor_s=0.001, max_throttles=5)
    runner = JobRunner(client, job_deadline_s=60, worker_id="w1", retry=policy)
    observer = Observer()
    terminal = await runner.run(_job(), Output(), control=JobControl(observer=observer))
    assert agent.calls == 5
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatThrottleLimitError"
    assert terminal.http_status == 429
    assert terminal.throttled == 5 and len(observer.throttles) == 5
    assert terminal.error is not None and "gave up after 5 throttled answers" in terminal.error


def test_the_default_policy_caps_throttled_answers_and_waits_at_least_a_second() -> None:
    policy = RetryPolicy()
    assert policy.max_throttles == 30
    assert policy.throttle_floor_s == 1.0
