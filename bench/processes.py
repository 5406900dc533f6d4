"""Child processes of a benchmark: the Chat API, the synthetic endpoint, workers and sinks.

Each child runs ``sys.executable -m <module> ...`` with its output in
``.state/bench/<name>.log``; :class:`Child` stops it with SIGTERM (SIGKILL after a grace) and
shows the end of its log when it dies early.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from models import wire
from pipeline.settings import Settings

ROOT: Final = Path(__file__).resolve().parent.parent
LOG_DIR: Final = ROOT / ".state" / "bench"
READY_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 20.0
BENCH_API_KEY: Final = "bench-key"


class ChildError(RuntimeError):
    """A child process died or did not get ready; the message ends with its log."""


@dataclass
class Child:
    """A running child process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, lines: int = 30) -> str:
        """Returns: the last ``lines`` lines of the log."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        """Raises ChildError when the process has exited."""
        code = self.process.poll()
        if code is not None:
            raise ChildError(f"{self.name} exited with {code}; its log ends:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; safe to call twice."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(name: str, module: str, *args: str, env: dict[str, str] | None = None) -> Child:
    """Starts ``python -m module args`` from the repository root, output to its log file."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Child(name, process, log_path)


def free_port() -> int:
    """Returns: a TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def chat_url(port: int) -> str:
    """Returns: the chat endpoint's URL on ``127.0.0.1:port`` (agent ``local/demo/1``)."""
    path = wire.CHAT_PATH_TEMPLATE.format(cloud_region="local", account_name="demo", agent_id="1")
    return f"http://127.0.0.1:{port}{path}"


def wait_healthy(child: Child, port: int, *, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Waits until ``GET /healthz`` answers 200.

    Raises:
        ChildError: The child exited, or did not answer within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{port}/healthz"
    while True:
        child.check()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ChildError(f"{child.name} not ready after {timeout_s:.0f} s:\n{child.tail()}")
        time.sleep(0.3)


def pipeline_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Returns: the ``CHATSCRIBE_*`` variables that make a child use ``settings``."""
    return {
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_WORKER_GROUP": settings.worker_group,
        "CHATSCRIBE_SINK_GROUP": settings.sink_group,
        "CHATSCRIBE_WORKER_CONCURRENCY": str(settings.worker_concurrency),
        "CHATSCRIBE_API_KEY": settings.api_key.get_secret_value(),
        "CHATSCRIBE_API_KEYS": settings.api_key.get_secret_value(),
        **extra,
    }
