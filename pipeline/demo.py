"""The main job: Chat API, worker and sink as child processes, one run, a report.

``chatscribe demo FILE`` applies the archive migration, makes sure the topics exist, starts
``chatscribe api serve`` (unless a Chat API already answers at the configured URL),
``chatscribe worker`` and ``chatscribe sink``, runs FILE through them
(:func:`pipeline.runner.run_questions_file`) and stops every process it started, whatever happens.
Child output goes to log files under ``.state/demo/``; a child that dies early fails the demo
with the end of its log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from models import wire
from pipeline.archive import upgrade
from pipeline.kafka import ensure_topics
from pipeline.runner import RunOutcome, run_questions_file
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

LOG_DIR = Path(".state/demo")
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


class DemoError(RuntimeError):
    """A demo process could not start or died; the message carries the end of its log."""


@dataclass
class Child:
    """A child process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, lines: int = 40) -> str:
        """Returns: the last ``lines`` lines of the log."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        """Raises DemoError when the process has exited."""
        code = self.process.poll()
        if code is not None:
            raise DemoError(f"{self.name} exited with {code}; its log ends:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            logger.warning("demo child did not stop, killing name=%s", self.name)
            self.process.kill()
            self.process.wait()


def _start(name: str, *args: str) -> Child:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=os.environ.copy(),
        )
    logger.info("started name=%s pid=%d log=%s", name, process.pid, log_path)
    return Child(name, process, log_path)


def _healthz(chat_url: str) -> str:
    parts = urlsplit(chat_url)
    return f"{parts.scheme}://{parts.netloc}/healthz"


def _api_answers(chat_url: str) -> bool:
    try:
        with urllib.request.urlopen(_healthz(chat_url), timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_for_api(child: Child, chat_url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _api_answers(chat_url):
        child.check()
        if time.monotonic() > deadline:
            raise DemoError(f"Chat API not ready after {READY_TIMEOUT_S:.0f} s:\n{child.tail()}")
        time.sleep(0.5)


def run_demo(settings: Settings, path: Path, *, timeout_s: float = 600.0) -> RunOutcome:
    """Runs the main job end to end and returns the run's outcome.

    Raises:
        DemoError: A child process failed to start or died during the run.
        QuestionsFileError: The questions file is invalid.
    """
    upgrade(settings)
    asyncio.run(ensure_topics(settings, wire.ALL_TOPICS))
    with ExitStack() as stack:
        children: list[Child] = []
        if not _api_answers(settings.chat_url):
            port = str(urlsplit(settings.chat_url).port or 80)
            api = _start("chat-api", "api", "serve", "--host", "127.0.0.1", "--port", port)
            stack.callback(api.stop)
            _wait_for_api(api, settings.chat_url)
            children.append(api)
        for name in ("worker", "sink"):
            child = _start(name, name)
            stack.callback(child.stop)
            children.append(child)

        def check_alive() -> None:
            for child in children:
                child.check()

        return asyncio.run(
            run_questions_file(settings, path, timeout_s=timeout_s, check_alive=check_alive)
        )
