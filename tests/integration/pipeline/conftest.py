"""Fixtures for the worker tests (helpers in ``worker_support``).

``worker`` is one worker process per module, on topics with a prefix unique to the module and
its own consumer group; tests tell their records apart by job id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from pipeline.kafka.clients import ensure_topics
from tests.integration.pipeline.worker_support import (
    ALL_TOPICS,
    ScriptedChat,
    Submit,
    TopicReader,
    WorkerProcess,
    free_port,
    reading,
    serve_scripted_chat,
    start_worker,
    submitting,
    unique_prefix,
    worker_settings,
)


@pytest.fixture(scope="module")
def scripted_chat() -> Iterator[ScriptedChat]:
    """The scripted Chat API, served by uvicorn in a background thread."""
    with serve_scripted_chat() as state:
        yield state


@pytest.fixture(scope="module")
def worker(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """One worker process for the module, on its own topics and consumer group."""
    settings = worker_settings(
        kafka_bootstrap, unique_prefix(), job_deadline_s=30.0, metrics_port=free_port()
    )
    asyncio.run(ensure_topics(settings, ALL_TOPICS))
    running = start_worker(settings, tmp_path_factory.mktemp("worker") / "worker.log")
    yield running
    code = running.stop()
    assert code == 0, f"worker exited with {code}:\n{running.log()[-5000:]}"


@pytest.fixture
async def topic_reader(worker: WorkerProcess) -> AsyncIterator[TopicReader]:
    """A reader of the module worker's output topics."""
    async with reading(worker.settings) as reader:
        yield reader


@pytest.fixture
async def submit(worker: WorkerProcess, scripted_chat: ScriptedChat) -> AsyncIterator[Submit]:
    """Submits jobs for the module worker, aimed at the scripted Chat API."""
    async with submitting(worker.settings, scripted_chat.chat_url) as send:
        yield send
