"""Limits across the worker group and a rate-limited agent, on real Kafka and PostgreSQL.

* :class:`pipeline.archive.leases.LeaseStore`: leases counted across connections (workers),
  never above the limit under a race, and gone with a connection that closes.
* Two worker processes share a run's ``max_concurrency``: the agent never sees more streams.
* 500 jobs against an agent that takes 50 streams and answers 429 with ``Retry-After`` above:
  no job fails, the 429s are absorbed (the archive's count equals the agent's), ``runs show``
  reports them, and the throughput against the limit is printed (a measurement, not asserted).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from models.records import ChatJob
from pipeline.archive.engine import create_engine
from pipeline.archive.leases import LeaseStore
from pipeline.archive.runs import run_throttling
from pipeline.settings import Settings
from pipeline.worker.admission import Admission
from tests.integration.pipeline.limited_agent_support import (
    agent_stats,
    limited_agent,
    questions_file,
    wait_balanced,
)
from tests.stack_support import ROOT, ProcessStack, isolated_settings

pytestmark = [pytest.mark.integration]

API_KEY = "limits-key"


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str) -> Iterator[Settings]:
    with isolated_settings(kafka_bootstrap, database_url, tag="lim", api_key=API_KEY) as settings:
        yield settings


@pytest.mark.timeout(60)
def test_leases_are_counted_across_connections_and_die_with_them(settings: Settings) -> None:
    first, second = LeaseStore(settings), LeaseStore(settings)
    try:
        a1 = first.try_acquire("run:r:streams", limit=3)
        a2 = first.try_acquire("run:r:streams", limit=3)
        b1 = second.try_acquire("run:r:streams", limit=3)
        assert None not in (a1, a2, b1)
        assert second.try_acquire("run:r:streams", limit=3) is None
        assert second.count("run:r:streams") == 3
        assert second.try_acquire("run:other:streams", limit=1) is not None  # keys are apart
        assert a1 is not None
        first.release(a1)
        assert second.try_acquire("run:r:streams", limit=3) is not None
        assert second.try_acquire("run:r:streams", limit=3) is None
        _terminate(settings, first.session_pid())  # first's worker is lost with its session
        _wait_for(lambda: second.count("run:r:streams") == 2)  # its lease went with it
        assert second.try_acquire("run:r:streams", limit=3) is not None
    finally:
        first.close()
        second.close()


def _terminate(settings: Settings, pid: int) -> None:
    """Ends a server process, as when the worker holding that session is lost."""
    engine = create_engine(settings)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        engine.dispose()


def _wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.timeout(60)
def test_racing_workers_never_take_more_leases_than_the_limit(settings: Settings) -> None:
    stores = [LeaseStore(settings) for _ in range(4)]
    granted: list[int] = []

    def race(store: LeaseStore) -> None:
        got = sum(store.try_acquire("target:t:streams", limit=7) is not None for _ in range(10))
        granted.append(got)

    threads = [threading.Thread(target=race, args=(store,)) for store in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(granted) == 7
        assert stores[0].count("target:t:streams") == 7
    finally:
        for store in stores:
            store.close()


def _job(number: int, **limits: object) -> ChatJob:
    return ChatJob.model_validate(
        {
            "job_id": f"j{number}",
            "run_id": "run-1",
            "question": "q",
            "session_settings": {"externalId": "u"},
            "chat_url": "http://agent.test/api/v1/public/r/a/agents/1/chat/stream-chat-state",
            **limits,
        }
    )


@pytest.mark.timeout(60)
async def test_two_admissions_share_a_run_s_stream_and_minute_limits(settings: Settings) -> None:
    """Two workers' admissions (one connection each) against one run's limits."""
    quick = settings.model_copy(update={"leases_poll_s": 0.05})
    first, second = Admission(quick), Admission(quick)
    limits = {"limits": {"max_concurrency": 3, "requests_per_minute": 5}}
    try:
        held = [await first.acquire(_job(0, **limits)), await second.acquire(_job(1, **limits))]
        held.append(await first.acquire(_job(2, **limits)))
        waiting = asyncio.create_task(second.acquire(_job(3, **limits)))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # three streams of the run are out, across both workers
        await held[0].admitted()
        held[0].release()  # its stream lease goes back; its minute lease stays
        fourth = await asyncio.wait_for(waiting, 5)
        fourth.release()
        fifth = await asyncio.wait_for(first.acquire(_job(4, **limits)), 5)
        sixth = asyncio.create_task(second.acquire(_job(5, **limits)))
        await asyncio.sleep(0.3)
        assert not sixth.done()  # five calls started this minute, whoever released
        sixth.cancel()
        for ticket in [*held[1:], fifth]:
            ticket.release()
    finally:
        await first.stop()
        await second.stop()


@pytest.mark.timeout(240)
def test_run_limit_holds_across_two_worker_processes(settings: Settings, tmp_path: Path) -> None:
    limit = 4
    with limited_agent(tmp_path, api_key=API_KEY, max_streams=50, turn_s=1.0) as (url, _, port):
        path = questions_file(
            tmp_path / "q.yaml",
            personas=8,
            questions=5,
            chatUrl=url,
            limits={"maxConcurrency": limit},
        )
        stack = ProcessStack(settings, tmp_path, worker_ids=True)
        with stack.running(workers=["worker-a", "worker-b"], sinks=["sink"]):
            wait_balanced(stack)
            outcome = stack.run_questions(path, timeout_s=180)
            workers = stack.query(
                "SELECT worker_id, count(*) FROM {s}.jobs WHERE run_id = :r GROUP BY worker_id",
                r=outcome.run_id,
            )
        stats = agent_stats(port)
    assert [r.status for r in outcome.results] == ["completed"] * 40
    assert stats["served"] == 40
    assert stats["peak"] <= limit, stats
    assert stats["peak"] == limit  # the limit was reached, not only respected
    assert {row.worker_id for row in workers} == {"worker-a", "worker-b"}, workers


@pytest.mark.timeout(420)
def test_500_jobs_against_a_429ing_agent_all_complete(settings: Settings, tmp_path: Path) -> None:
    max_streams, turn_s = 50, 2.0
    with limited_agent(tmp_path, api_key=API_KEY, max_streams=max_streams, turn_s=turn_s) as (
        url,
        _,
        port,
    ):
        path = questions_file(tmp_path / "q.yaml", personas=50, questions=10, chatUrl=url)
        stack = ProcessStack(settings, tmp_path)
        with stack.running(workers=["worker"], sinks=["sink"]):
            outcome = stack.run_questions(path, timeout_s=360)
        stats = agent_stats(port)
    statuses = [r.status for r in outcome.results]
    assert len(statuses) == 500
    assert statuses.count("failed") == 0 and set(statuses) == {"completed"}
    assert stats["throttled"] > 0, stats  # the worker did overshoot and was told to wait
    assert stats["peak"] <= max_streams
    engine = create_engine(settings)
    try:
        throttling = run_throttling(engine, run_id=outcome.run_id)
    finally:
        engine.dispose()
    assert throttling.answers == stats["throttled"]  # every 429 absorbed and archived
    shown = _runs_show(stack, outcome.run_id)
    assert f"429s absorbed: {throttling.answers:,} throttled answers" in shown
    utilisation = stats["mean_streams"] / max_streams
    jobs_per_s = stats["served"] / stats["window_s"]
    print(
        f"\nrate-limited run: jobs=500 failed=0 throttled={stats['throttled']}"
        f" over {throttling.jobs} jobs; agent window {stats['window_s']:.1f} s,"
        f" {jobs_per_s:.1f} jobs/s vs limit {max_streams / turn_s:.1f} jobs/s;"
        f" mean streams {stats['mean_streams']:.1f} of {max_streams}"
        f" (utilisation {utilisation:.1%}; between the limit first reached and the last"
        f" stream opened {stats['steady_mean_streams'] / max_streams:.1%});"
        f" run elapsed {outcome.elapsed_s:.1f} s"
    )


def _runs_show(stack: ProcessStack, run_id: str) -> str:
    args = [sys.executable, "-m", "pipeline.cli.app", "runs", "show", run_id]
    shown = subprocess.run(args, env=stack.env, cwd=ROOT, capture_output=True, check=True)
    as_json = subprocess.run([*args, "--json"], env=stack.env, cwd=ROOT, capture_output=True)
    document = json.loads(as_json.stdout)
    assert document["throttled"]["answers"] > 0
    return shown.stdout.decode()
