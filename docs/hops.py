"""Counts the module hops of one NDJSON line's path: HTTP read → ``chat.lines`` → sink → table.

Usage (from a checkout's root; the tree may be the flat pre-move layout or the packages)::

    PYTHONPATH=$PWD .venv/bin/python docs/hops.py

A *module hop* is a call from a function of one first-party module (``models``, ``pipeline``)
into a function of another, as ``sys.setprofile`` sees it while the code runs. The path is run
twice, for a stream of ``k`` and of ``k + 1`` content lines (one job, one attempt, its
``completed`` event in the same sink batch), and the difference is what one more line costs:
the hops, and the modules those extra hops enter. Worker side: the real :class:`JobRunner`
reads the stream through the real client from an ``httpx.MockTransport`` and hands each line to
the real ``JobOutput`` (a stand-in producer keeps the Kafka records). Sink side: those records
are decoded by the sink's decode and written by the real ``ArchiveWriter`` into a fresh schema
of the PostgreSQL in ``CHATSCRIBE_DATABASE_URL`` (normalisation included), which is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import httpx
import sqlalchemy as sa

# Only the checkout on PYTHONPATH counts: drop the shared virtualenv's editable-install finder,
# which would otherwise serve modules a checkout lacks from another one.
sys.meta_path[:] = [
    f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", "")).lower()
]

FIRST_PARTY = ("models", "pipeline")
URL = "http://chat.test/api/v1/public/r/a/agents/1/chat/stream-chat-state"
BASE_LINES = 3


def _first(*names: str) -> Any:
    """Returns: the first of ``module:attr`` names that imports (old flat or new layout)."""
    for name in names:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    raise ImportError(names)


ChatClient = _first("pipeline.chat.client:ChatClient", "pipeline.client:ChatClient")
JobRunner = _first("pipeline.worker.job_runner:JobRunner", "pipeline.jobs:JobRunner")
RetryPolicy = _first("pipeline.worker.job_runner:RetryPolicy", "pipeline.jobs:RetryPolicy")
JobOutput = _first("pipeline.kafka.clients:JobOutput", "pipeline.kafka:JobOutput")
decode_batch = _first("pipeline.sink.decode:decode_batch", "pipeline.sink_records:decode_batch")
ArchiveWriter = _first("pipeline.archive.writer:ArchiveWriter", "pipeline.archive:ArchiveWriter")
upgrade = _first("pipeline.archive.engine:upgrade", "pipeline.archive:upgrade")
Settings = _first("pipeline.settings:Settings")
ChatJob = _first("models.records:ChatJob")
wire = importlib.import_module("models.wire")


class _Producer:
    """Keeps what ``JobOutput`` sends, acknowledged at once; every topic has one partition."""

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []

    async def send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None,
        headers: Any,
        partition: int | None = None,
    ) -> Any:
        self.records.append((topic, key, value, list(headers)))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


class _Record:
    def __init__(self, topic: str, key: bytes | None, value: bytes, headers: Any, n: int) -> None:
        self.topic, self.key, self.value, self.headers = topic, key, value, headers
        self.partition, self.offset = 0, n


def _body(lines: int) -> bytes:
    out = [json.dumps({"id": "__cutoff__", "state": {"chatId": "c1"}})]
    for n in range(lines):
        out.append(json.dumps({"id": f"m{n}", "role": "assistant", "content": f"part {n}"}))
    return ("\n".join(out) + "\n").encode()


def _hops(run: Callable[[], Any]) -> tuple[int, Counter[str]]:
    """Returns: first-party module hops while ``run()`` runs, and the modules entered."""
    entered: Counter[str] = Counter()
    count = 0

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal count
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee != caller and all(m.split(".")[0] in FIRST_PARTY for m in (callee, caller)):
            count += 1
            entered[callee] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count, entered


def _worker(lines: int, settings: Any, job_id: str) -> list[Any]:
    producer = _Producer()
    body = _body(lines)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    async def run() -> None:
        client = ChatClient(api_key="k", transport=httpx.MockTransport(handler))
        runner = JobRunner(client, job_deadline_s=30, worker_id="w1", retry=RetryPolicy(attempts=1))
        job = ChatJob.model_validate(
            {
                "job_id": job_id,
                "run_id": "hops",
                "question": "How many?",
                "session_settings": {"externalId": "u1"},
                "chat_url": URL,
            }
        )
        await runner.run_job(job, JobOutput(producer, settings, job_id))

    asyncio.run(run())
    return [_Record(t, k, v, h, n) for n, (t, k, v, h) in enumerate(producer.records)]


def _sink(records: list[Any], settings: Any) -> None:
    lines_topic = settings.topic(wire.TOPIC_LINES)
    events_topic = settings.topic(wire.TOPIC_JOB_EVENTS)
    items, dead = decode_batch(records, lines_topic=lines_topic, events_topic=events_topic)
    assert not dead, dead
    writer = ArchiveWriter.from_settings(settings)
    try:
        values = [value for _, value in items]
        lines = [v for v in values if hasattr(v, "line_no")]
        events = [v for v in values if not hasattr(v, "line_no")]
        outcome = writer.write_batch(lines, events)
        assert outcome.normalised, "the attempt was not normalised"
    finally:
        writer.close()


def main() -> None:
    """Prints the per-line hops of the worker side, the sink side, and the modules entered."""
    schema = f"hops_{uuid.uuid4().hex[:8]}"
    settings = Settings(database_schema=schema)
    upgrade(settings)
    figures = {}
    try:
        for lines in (BASE_LINES, BASE_LINES + 1):
            job_id = f"hops-{lines}"
            worker_hops, worker_mods = _hops(functools.partial(_worker_keep, lines, job_id))
            records = _kept.pop()
            sink_hops, sink_mods = _hops(functools.partial(_sink, records, settings))
            figures[lines] = (worker_hops, worker_mods, sink_hops, sink_mods)
    finally:
        engine = sa.create_engine(settings.database_url.get_secret_value())
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()
    (w0, wm0, s0, sm0), (w1, wm1, s1, sm1) = figures[BASE_LINES], figures[BASE_LINES + 1]
    worker_new = sorted(m for m in wm1 if wm1[m] > wm0.get(m, 0))
    sink_new = sorted(m for m in sm1 if sm1[m] > sm0.get(m, 0))
    print(f"worker: {w1 - w0} hops per line, through {len(worker_new)} modules: {worker_new}")
    print(f"sink:   {s1 - s0} hops per line, through {len(sink_new)} modules: {sink_new}")
    print(f"one line: {w1 - w0 + s1 - s0} hops, {len(set(worker_new) | set(sink_new))} modules")
    print(f"whole job of {BASE_LINES + 1} lines: worker {w1} hops, sink {s1} hops")


_kept: list[list[Any]] = []


def _worker_keep(lines: int, job_id: str) -> None:
    settings = Settings()
    _kept.append(_worker(lines, settings, job_id))


if __name__ == "__main__":
    main()
