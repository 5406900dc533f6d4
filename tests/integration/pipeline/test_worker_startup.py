"""A worker started right after its topics are created waits for their partitions.

Right after a topic is created Kafka's metadata may list it with no partition yet, and
aiokafka's ``partitions_for`` gives an empty set; the worker used to exit with "topic has no
partitions". Here the worker starts on a fresh prefix (it creates its own topics), and the first
metadata answers are made empty on purpose, so the race happens every time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pipeline.worker_support import (
    RUN_WORKER,
    ScriptedChat,
    WorkerProcess,
    reading,
    start_worker,
    submitting,
    worker_settings,
)

pytestmark = pytest.mark.integration

NameFactory = Callable[[str], str]
EMPTY_METADATA_CALLS = 3
EMPTY_FIRST_METADATA = f"""
import aiokafka
_real = aiokafka.AIOKafkaProducer.partitions_for
_calls = []
async def partitions_for(self, topic):
    _calls.append(topic)
    if len(_calls) <= {EMPTY_METADATA_CALLS}:
        print("injected: no partitions yet for", topic, flush=True)
        return set()
    return await _real(self, topic)
aiokafka.AIOKafkaProducer.partitions_for = partitions_for
"""


async def _wait_started(worker: WorkerProcess, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while "worker resources started" not in worker.log():
        code = worker.process.poll()
        assert code is None, f"worker exited with {code}:\n{worker.log()[-3000:]}"
        assert time.monotonic() < deadline, f"worker not started:\n{worker.log()[-3000:]}"
        await asyncio.sleep(0.2)


async def test_worker_started_with_its_topics_waits_for_partitions_and_runs_jobs(
    kafka_bootstrap: str, unique_name: NameFactory, scripted_chat: ScriptedChat, tmp_path: Path
) -> None:
    settings = worker_settings(kafka_bootstrap, unique_name("startup"))
    code = EMPTY_FIRST_METADATA + RUN_WORKER
    worker = start_worker(settings, tmp_path / "worker.log", code=code)
    try:
        await _wait_started(worker)
        assert worker.log().count("injected: no partitions yet") == EMPTY_METADATA_CALLS
        async with (
            reading(settings) as reader,
            submitting(settings, scripted_chat.chat_url) as submit,
        ):
            job = await submit("normal")
            terminal = await reader.wait_terminal(job.job_id, timeout_s=60)
    finally:
        stopped = await asyncio.to_thread(worker.stop)
    assert terminal.kind == "completed"
    assert stopped == 0, worker.log()[-3000:]
