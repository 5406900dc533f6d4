"""Handing running jobs over when a rebalance waits too long (pipeline.worker.group.HandOver)."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.worker.group import HandOver

GRACE_S = 0.3
POLL_S = 0.02


class _Rebalance:
    def __init__(self) -> None:
        self.on = False

    def __call__(self) -> bool:
        return self.on


async def _job(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


async def _watching(handover: HandOver) -> asyncio.Task[None]:
    task = asyncio.create_task(handover.watch())
    await asyncio.sleep(0)
    return task


async def test_a_job_that_ends_by_itself_is_not_handed_over() -> None:
    rebalance = _Rebalance()
    handover = HandOver(rebalance, grace_s=GRACE_S, poll_s=POLL_S)
    watcher = await _watching(handover)
    rebalance.on = True  # a rebalance that the job outlasts by less than the grace
    assert await handover.run("j1", _job(GRACE_S / 3)) is True
    watcher.cancel()
    assert handover.handed_over == 0 and handover.tasks == {}


async def test_a_job_still_running_after_the_grace_is_handed_over() -> None:
    rebalance = _Rebalance()
    handover = HandOver(rebalance, grace_s=GRACE_S, poll_s=POLL_S)
    watcher = await _watching(handover)
    long_job = asyncio.create_task(handover.run("j1", _job(60)))
    await asyncio.sleep(POLL_S * 3)
    rebalance.on = True
    assert await asyncio.wait_for(long_job, timeout=30) is False
    assert handover.handed_over == 1 and handover.tasks == {}
    # jobs started while the same rebalance goes on are not its to hand over
    assert await handover.run("j2", _job(GRACE_S * 2)) is True
    assert handover.handed_over == 1
    watcher.cancel()


async def test_no_job_is_handed_over_without_a_rebalance() -> None:
    handover = HandOver(_Rebalance(), grace_s=POLL_S, poll_s=POLL_S)
    watcher = await _watching(handover)
    assert await handover.run("j1", _job(POLL_S * 10)) is True
    watcher.cancel()
    assert handover.handed_over == 0


async def test_cancelling_the_caller_is_not_a_hand_over() -> None:
    handover = HandOver(_Rebalance(), grace_s=GRACE_S, poll_s=POLL_S)
    caller = asyncio.create_task(handover.run("j1", _job(60)))
    await asyncio.sleep(POLL_S)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert handover.tasks == {}


async def test_errors_of_the_job_reach_the_caller() -> None:
    async def broken() -> None:
        raise ValueError("bug")

    with pytest.raises(ValueError, match="bug"):
        await HandOver(_Rebalance()).run("j1", broken())
