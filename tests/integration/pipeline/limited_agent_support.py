"""A rate-limited synthetic agent (:mod:`bench.limited_chat`) as a process, for stack tests."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from models import wire
from pipeline.kafka.clients import DEFAULT_PARTITIONS
from tests.stack_support import (
    ROOT,
    ProcessStack,
    ServiceProcess,
    chat_url,
    free_port,
    wait_healthy,
)


@contextmanager
def limited_agent(
    logs: Path, *, api_key: str, max_streams: int, turn_s: float, retry_after_s: int = 1
) -> Iterator[tuple[str, ServiceProcess, int]]:
    """Starts the agent on a free port and waits for ``/healthz``.

    Yields:
        ``(chat URL, process, port)``; the process is stopped on the way out.
    """
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "bench.limited_chat",
        "--port",
        str(port),
        "--api-key",
        api_key,
        "--max-streams",
        str(max_streams),
        "--turn-s",
        str(turn_s),
        "--retry-after-s",
        str(retry_after_s),
    ]
    log_path = logs / "limited-agent.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    process = ServiceProcess("limited-agent", popen, log_path)
    try:
        wait_healthy(process, port)
        yield chat_url(port), process, port
    finally:
        process.stop()


def agent_stats(port: int) -> dict[str, Any]:
    """Returns: the agent's ``/stats`` (:class:`bench.limited_chat.LimitStats`)."""
    stats: dict[str, Any] = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()
    return stats


def questions_file(path: Path, *, personas: int, questions: int, **fields: Any) -> Path:
    """Writes a questions file of ``personas × questions`` jobs (plus top-level ``fields``)."""
    import yaml

    document = {
        "name": "rate-limited",
        **fields,
        "personas": [
            {"name": f"p{i}", "sessionSettings": {"externalId": f"user-{i}"}}
            for i in range(personas)
        ],
        "questions": [
            {"text": f"How many flights were there in month {q + 1}?"} for q in range(questions)
        ],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def wait_balanced(stack: ProcessStack, *, timeout_s: float = 90.0) -> None:
    """Waits until the worker group finished rebalancing ``chat.requests``.

    Every worker of ``stack`` holds partitions of ``chat.requests`` and together they hold each
    exactly once (from the workers' logs).
    """
    topic = stack.settings.topic(wire.TOPIC_REQUESTS)
    pattern = re.compile(
        rf"partitions assigned worker_id=\S+ topic={re.escape(topic)} partitions=\[([\d, ]*)\]"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        held: list[int] = []
        for worker in stack.workers:
            found = pattern.findall(worker.log(chars=1_000_000))
            held += [int(p) for p in found[-1].split(",") if p.strip()] if found else []
        if sorted(held) == list(range(DEFAULT_PARTITIONS)) and all(
            pattern.search(w.log(chars=1_000_000)) for w in stack.workers
        ):
            return
        stack.assert_running()
        assert time.monotonic() < deadline, "the worker group did not balance"
        time.sleep(0.3)
