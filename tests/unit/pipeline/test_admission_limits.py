"""The adaptive concurrency controller, the headroom gauge and admission keys (pure)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from models.records import ChatJob
from pipeline.settings import Settings
from pipeline.worker.admission import Admission, lease_keys, target_key
from pipeline.worker.limits import AimdLimit, Headroom

URL = "http://Chat.Example:8080/api/v1/public/r/a/agents/7/chat/stream-chat-state"


def _fill(limit: AimdLimit) -> list[int]:
    epochs = []
    while (epoch := limit.try_acquire()) is not None:
        epochs.append(epoch)
    return epochs


def _rounds(limit: AimdLimit, *, capacity: int, rounds: int) -> list[int]:
    """Runs ``rounds`` rounds against an agent serving ``capacity`` calls at once.

    Each round every call the limit admits is accepted (and gives its first line) or, beyond
    ``capacity``, throttled; then all end. Returns: the calls served per round.
    """
    served = []
    for _ in range(rounds):
        epochs = _fill(limit)
        for index, epoch in enumerate(epochs):
            if index < capacity:
                limit.on_accepted()
                limit.on_first_line(epoch, 0.1)
            else:
                limit.on_throttled(epoch)
        served.append(min(len(epochs), capacity))
        for index in range(len(epochs)):
            limit.release(served=index < capacity)
    return served


def test_limit_admits_up_to_its_floor_and_frees_on_release() -> None:
    limit = AimdLimit(initial=3.7)
    assert _fill(limit) == [0, 0, 0]
    limit.release()
    assert limit.try_acquire() == 0
    assert limit.try_acquire() is None


def test_slow_start_doubles_per_round_until_the_first_throttle() -> None:
    limit = AimdLimit(initial=4)
    for _ in range(4):
        limit.on_accepted()
    assert limit.limit == 8
    for _ in range(8):
        limit.on_accepted()
    assert limit.limit == 16


def test_throttle_decreases_once_per_epoch_then_increase_is_additive() -> None:
    limit = AimdLimit(initial=50)
    epochs = _fill(limit)
    assert limit.on_throttled(epochs[0]) is True
    assert limit.limit == pytest.approx(45.0)
    # the rest of the burst answering the same overshoot costs nothing more
    assert [limit.on_throttled(e) for e in epochs[1:10]] == [False] * 9
    assert limit.limit == pytest.approx(45.0)
    assert limit.slow_start is False
    # one round (45 accepted calls) adds about one stream
    for _ in range(45):
        limit.on_accepted()
    assert 45.9 < limit.limit < 46.1


def test_a_new_epoch_throttled_decreases_again_down_to_the_minimum() -> None:
    limit = AimdLimit(initial=2, minimum=1)
    for _ in range(20):
        limit.on_throttled(limit.epoch)
    assert limit.limit == 1
    assert limit.allowed == 1
    assert limit.decreases == 20


def test_rising_first_line_latency_decreases_the_limit() -> None:
    limit = AimdLimit(initial=40, min_rise_s=0.5)
    for _ in range(10):
        assert limit.on_first_line(limit.epoch, 1.0) is False
    grown = limit.limit
    decreased = [limit.on_first_line(limit.epoch, 4.0) for _ in range(10)]
    assert any(decreased)
    assert limit.limit < grown


def test_small_latency_noise_does_not_decrease() -> None:
    limit = AimdLimit(initial=40, min_rise_s=0.5)
    for latency in [0.005, 0.02, 0.004, 0.03, 0.05, 0.01] * 5:
        assert limit.on_first_line(limit.epoch, latency) is False
    assert limit.decreases == 0


def test_limit_reaches_the_agent_s_limit_and_stays_near_it() -> None:
    """A simulated agent taking 50 streams: AIMD rounds keep the limit within 10% below it."""
    limit = AimdLimit(initial=8)
    capacity = 50
    served = sum(_rounds(limit, capacity=capacity, rounds=200))
    assert served / 200 >= 0.9 * capacity
    assert 0.85 * capacity <= limit.limit <= 1.1 * capacity


def test_a_throttle_never_drops_the_limit_below_the_calls_being_served() -> None:
    limit = AimdLimit(initial=60)
    epochs = _fill(limit)
    for _ in range(50):  # the agent took 50 of the 60 calls
        limit.on_accepted()
    limit.limit = 60.0  # as it was before those 50 grew it
    assert limit.on_throttled(epochs[55]) is True
    assert limit.limit == 54.0  # 60 x 0.9 is above the 50 served
    assert limit.on_throttled(limit.epoch) is True
    assert limit.limit == 50.0  # 54 x 0.9 would be 48.6: 50 are proven
    for _ in range(50):
        limit.release(served=True)
    assert (limit.serving, limit.in_flight) == (0, 10)
    assert limit.on_throttled(limit.epoch) is True
    assert limit.limit == 45.0  # nothing served now: the plain decrease


def test_a_latency_rise_decreases_below_the_calls_being_served() -> None:
    limit = AimdLimit(initial=20, min_rise_s=0.0)
    _fill(limit)
    for _ in range(20):
        limit.on_accepted()
    limit.limit = 20.0  # as it was before those 20 grew it
    limit.on_first_line(limit.epoch, 0.1)
    assert limit.on_first_line(limit.epoch, 5.0) is True
    assert limit.limit == 18.0  # below the 20 served: the agent is slowing down


def test_with_calls_served_counted_a_run_holds_the_agent_s_concurrency_limit() -> None:
    """A simulated agent taking 50 streams: after the first rounds the limit stays at 50-51."""
    limit = AimdLimit(initial=16)
    capacity = 50
    served = _rounds(limit, capacity=capacity, rounds=100)
    assert min(served[5:]) == capacity
    assert capacity <= limit.limit < capacity + 2


def test_headroom_closes_on_loop_lag_or_cpu_and_reopens() -> None:
    headroom = Headroom(max_lag_s=0.1, max_cpu=0.9, smoothing=0.5)
    headroom.sample(lag_s=0.001, cpu_s=0.1, wall_s=0.25)
    assert headroom.ok
    for _ in range(4):
        headroom.sample(lag_s=0.5, cpu_s=0.1, wall_s=0.25)
    assert not headroom.ok
    for _ in range(8):
        headroom.sample(lag_s=0.0, cpu_s=0.1, wall_s=0.25)
    assert headroom.ok
    for _ in range(6):
        headroom.sample(lag_s=0.0, cpu_s=0.25, wall_s=0.25)
    assert not headroom.ok and headroom.cpu > 0.9


def test_target_is_host_and_agent_path() -> None:
    assert target_key(URL) == "chat.example:8080/api/v1/public/r/a/agents/7/chat/stream-chat-state"
    other = URL.replace("agents/7", "agents/8")
    assert target_key(other) != target_key(URL)


def _job(**fields: Any) -> ChatJob:
    values = {
        "job_id": "j1",
        "run_id": "r1",
        "question": "q",
        "session_settings": {"externalId": "u"},
        "chat_url": URL,
        **fields,
    }
    return ChatJob.model_validate(values)


def test_lease_keys_follow_the_job_s_limits() -> None:
    assert lease_keys(_job()) == []
    job = _job(
        limits={"max_concurrency": 5, "requests_per_minute": 100},
        target_limits={"max_concurrency": 50},
    )
    target = target_key(URL)
    assert lease_keys(job) == [
        ("run:r1:streams", 5, False),
        ("run:r1:minute", 100, True),
        (f"target:{target}:streams", 50, False),
    ]
    # limits travel in the chat.requests value
    assert ChatJob.from_value(job.to_value()) == job


async def test_admission_prepares_a_spare_half_and_streams_up_to_the_limit() -> None:
    settings = Settings(worker_concurrency=5, target_initial_concurrency=2)
    admission = Admission(settings)
    tickets = [await admission.acquire(_job()) for _ in range(4)]  # 2 allowed + 2 spare
    fifth = asyncio.create_task(admission.acquire(_job()))
    await asyncio.sleep(0.05)
    assert not fifth.done()  # the target has its prepared jobs
    for ticket in tickets[:2]:
        await ticket.admitted()
    third_stream = asyncio.create_task(tickets[2].admitted())
    await asyncio.sleep(0.05)
    assert not third_stream.done()  # two streams at once
    other = await admission.acquire(_job(chat_url=URL.replace("agents/7", "agents/9")))
    assert admission.in_flight == 5
    tickets[0].stream_ended()  # the slot is free before the job ends
    await asyncio.wait_for(third_stream, 1)
    assert not fifth.done()  # ... but the job's place is not
    tickets[0].release()
    last = await asyncio.wait_for(fifth, 1)
    for ticket in [*tickets[1:], other, last]:
        ticket.release()
    await asyncio.sleep(0)
    assert admission.in_flight == 0
    limit = admission.limit_of(URL)
    assert (limit.in_flight, limit.prepared) == (0, 0)
    await admission.stop()


async def test_headroom_ceiling_holds_jobs_of_every_target() -> None:
    admission = Admission(Settings(worker_concurrency=2, target_initial_concurrency=8))
    first = await admission.acquire(_job())
    await admission.acquire(_job(chat_url=URL.replace("agents/7", "agents/8")))
    assert not admission.has_headroom()
    third = asyncio.create_task(admission.acquire(_job(chat_url=URL.replace("7", "6"))))
    await asyncio.sleep(0.05)
    assert not third.done()
    first.release()
    await asyncio.wait_for(third, 1)
    await admission.stop()


async def test_a_blocked_event_loop_closes_the_headroom() -> None:
    admission = Admission(Settings(worker_max_loop_lag_ms=50))
    await admission.start()
    try:
        first = await admission.acquire(_job())  # one job is always allowed
        for _ in range(6):
            time.sleep(0.3)  # noqa: ASYNC251 - the point: a loop that does not come back
            await asyncio.sleep(0.01)  # the sampler's timer fires, late
        assert admission._headroom.lag_s > 0.05
        assert not admission.has_headroom()
        blocked = asyncio.create_task(admission.acquire(_job()))
        await asyncio.sleep(0.05)
        assert not blocked.done()
        await asyncio.wait_for(blocked, 5)  # the loop runs on time again: headroom reopens
        assert admission.has_headroom() or admission.in_flight == 2
        first.release()
    finally:
        await admission.stop()


class FlakyStore:
    """A lease store (pure stand-in) that is unreachable for its first ``down`` calls."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0

    def try_acquire(self, key: str, *, limit: int) -> Any:
        from pipeline.archive.leases import Lease
        from pipeline.errors import ArchiveUnavailableError

        self.calls += 1
        if self.calls <= self.down:
            raise ArchiveUnavailableError("connection refused")
        return Lease(key, 1, self.calls)

    def release(self, lease: Any) -> None:
        return None

    def close(self) -> None:
        return None


async def test_jobs_with_limits_wait_out_an_unreachable_database(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FlakyStore(down=4)
    settings = Settings(leases_poll_s=0.01)
    admission = Admission(settings, store_factory=lambda: store)  # type: ignore[arg-type,return-value]
    job = _job(limits={"max_concurrency": 2})
    ticket = await asyncio.wait_for(admission.acquire(job), 5)
    assert store.calls == 5
    assert [lease.key for lease in ticket.leases or []] == ["run:r1:streams"]
    warnings = [r.getMessage() for r in caplog.records if "leases" in r.getMessage()]
    assert len(warnings) == 2  # one when the outage starts, one when it ends
    ticket.release()
    await admission.stop()


async def test_a_first_line_late_because_the_worker_runs_late_does_not_shrink_the_limit() -> None:
    admission = Admission(Settings(target_initial_concurrency=8))
    limit = admission.limit_of(URL)
    ticket = await admission.acquire(_job())
    await ticket.admitted()
    ticket.first_line(0.1)  # the baseline
    admission._headroom.sample(lag_s=1.0, cpu_s=1.0, wall_s=1.0)  # this process is behind
    assert not admission.runs_on_time()
    for _ in range(20):
        ticket.first_line(5.0)
    assert (limit.limit, limit.decreases) == (8.0, 0)
    for _ in range(20):  # smoothed back under the limits, but the latest sample is hot
        admission._headroom.sample(lag_s=0.0, cpu_s=0.1, wall_s=1.0)
    admission._headroom.sample(lag_s=0.0, cpu_s=0.99, wall_s=1.0)
    assert admission._headroom.ok and not admission.runs_on_time()
    ticket.first_line(5.0)
    assert limit.decreases == 0
    admission._headroom.sample(lag_s=0.0, cpu_s=0.1, wall_s=1.0)  # on time: the agent's
    assert admission.runs_on_time()
    for _ in range(20):
        ticket.first_line(5.0)
    assert limit.decreases >= 1 and limit.limit < 8.0
    ticket.release()
    await admission.stop()
