"""The main job: Chat API, worker and sink as child processes, one run, a report.

``chatscribe demo FILE`` applies the archive migration, makes sure the topics exist, starts
``chatscribe api serve`` (unless a Chat API already answers at the configured URL),
``chatscribe worker`` and ``chatscribe sink``, runs FILE through them
(:func:`pipeline.runs.runner.run_questions_file`) and stops every process it started, whatever
happens.
Child output goes to log files under ``.state/demo/``; a child that dies early fails the demo
with the end of its log.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

from models import wire
from pipeline.archive.engine import upgrade
from pipeline.cli.children import Child, start_child
from pipeline.errors import ChildError
from pipeline.kafka.clients import ensure_topics
from pipeline.runs.runner import RunOutcome, run_questions_file
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

LOG_DIR = Path(".state/demo")
READY_TIMEOUT_S = 120.0


def _start(name: str, *args: str) -> Child:
    return start_child(name, "pipeline.cli.app", *args, log_dir=LOG_DIR)


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
            raise ChildError(
                f"Chat API not ready after {READY_TIMEOUT_S:.0f} s:\n{child.tail()}",
                name=child.name,
            )
        time.sleep(0.5)


def run_demo(settings: Settings, path: Path, *, timeout_s: float = 600.0) -> RunOutcome:
    """Runs the main job end to end and returns the run's outcome.

    Raises:
        ChildError: A child process failed to start or died during the run.
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
