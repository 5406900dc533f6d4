"""Child processes of a benchmark: the Chat API, the synthetic endpoint, workers and sinks.

Each child runs ``sys.executable -m <module> ...`` with its output in
``.state/bench/<name>.log``; :class:`Child` stops it with SIGTERM (SIGKILL after a grace) and
shows the end of its log when it dies early.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from typing import Final

from models import wire
from pipeline.cli.children import ROOT as ROOT
from pipeline.cli.children import Child as Child
from pipeline.cli.children import start_child
from pipeline.errors import ChildError as ChildError
from pipeline.settings import Settings

LOG_DIR: Final = ROOT / ".state" / "bench"
READY_TIMEOUT_S: Final = 120.0
BENCH_API_KEY: Final = "bench-key"


def start(name: str, module: str, *args: str, env: dict[str, str] | None = None) -> Child:
    """Starts ``python -m module args`` from the repository root, output to its log file."""
    return start_child(name, module, *args, log_dir=LOG_DIR, env=env)


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
