"""Support for tests that run the real stack as processes, as ``make demo`` runs it.

Every part is ``python -m pipeline.cli.app api serve|worker|sink`` with the settings handed over as
``CHATSCRIBE_*`` variables, on real Kafka and PostgreSQL, isolated by a topic prefix, consumer
groups and a PostgreSQL schema unique to the caller. Imported as ``tests.stack_support`` from
every test folder (``tests/`` is a package).

* :class:`ServiceProcess`, :func:`start_cli`, :func:`wait_healthy`, :func:`stack_env`: one
  process, its log file, its ``/healthz`` wait and its stop (SIGTERM, then SIGKILL).
* :func:`unique_settings`, :func:`migrated_settings`, :func:`isolated_settings`: settings on
  names no other test uses; with the archive upgraded in a given schema; with a schema of their
  own created (Alembic upgrade) and dropped afterwards, and the topics created.
* :class:`ProcessStack`: Chat APIs, workers and sinks started and stopped together
  (:meth:`ProcessStack.running`).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from models import wire
from pipeline.archive.engine import create_engine, upgrade
from pipeline.kafka.clients import ensure_topics
from pipeline.runs.runner import RunOutcome, run_questions_file
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "stack-key"
LOOPBACK_ANY_PORT = ("http://127.0.0.1:*",)
"""The tests' outbound allow-list: their Chat APIs and agents listen on free loopback ports."""
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_CHARS = 6000
TOPIC_PREFIXES: set[str] = set()
"""Starts of the topic names this test session made (:func:`unique_settings`' prefixes, the
``unique_name`` fixture's names); ``kafka_bootstrap`` deletes those topics at the session's end."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Prometheus samples: ``(name, sorted label pairs) -> value``."""


def free_port() -> int:
    """Returns: a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def chat_url(port: int, *, account: str = "demo") -> str:
    """Returns: the chat URL of a Chat API on 127.0.0.1:``port`` (spec: chat path template)."""
    path = wire.CHAT_PATH_TEMPLATE.format(cloud_region="local", account_name=account, agent_id="1")
    return f"http://127.0.0.1:{port}{path}"


def parse_samples(text: str) -> Samples:
    """Returns: the samples of a Prometheus text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@dataclass
class ServiceProcess:
    """One process of the stack, its log file and (for sinks) its metrics port."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stop_timeout_s: float = STOP_TIMEOUT_S
    metrics_port: int | None = None

    def log(self, chars: int = LOG_TAIL_CHARS) -> str:
        """Returns: the last ``chars`` characters of its output."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def assert_running(self) -> None:
        """Raises: AssertionError (with the log's tail) when the process has exited."""
        code = self.popen.poll()
        assert code is None, f"{self.name} exited with {code}:\n{self.log()}"

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no offset commit."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after ``stop_timeout_s`` seconds; returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def samples(self) -> Samples:
        """Returns: its ``/metrics`` samples now (empty when it does not answer)."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=3).text
        except httpx.TransportError:
            return {}
        return parse_samples(text)


def stack_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Returns: this environment plus ``settings`` as ``CHATSCRIBE_*`` variables, then ``extra``.

    The variables are those a stack process reads (pipeline/settings.py).
    """
    api_key = settings.api_key.get_secret_value()
    return {
        **os.environ,
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_WORKER_GROUP": settings.worker_group,
        "CHATSCRIBE_SINK_GROUP": settings.sink_group,
        "CHATSCRIBE_SINK_BATCH_MAX_RECORDS": str(settings.sink_batch_max_records),
        "CHATSCRIBE_WORKER_CONCURRENCY": str(settings.worker_concurrency),
        "CHATSCRIBE_WORKER_SESSION_TIMEOUT_S": str(settings.worker_session_timeout_s),
        "CHATSCRIBE_WORKER_HISTORY_SCAN_TIMEOUT_S": str(settings.worker_history_scan_timeout_s),
        "CHATSCRIBE_WORKER_STALL_TIMEOUT_S": str(settings.worker_stall_timeout_s),
        "CHATSCRIBE_SINK_STALL_TIMEOUT_S": str(settings.sink_stall_timeout_s),
        "CHATSCRIBE_JOB_DEADLINE_S": str(settings.job_deadline_s),
        "CHATSCRIBE_API_KEY": api_key,
        "CHATSCRIBE_API_KEYS": api_key,
        "CHATSCRIBE_CHAT_URL_ALLOW": ",".join(settings.chat_url_allow),
        "CHATSCRIBE_API_KEY_URLS": ",".join(settings.api_key_urls),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def start_cli(
    name: str,
    args: Sequence[str],
    env: dict[str, str],
    logs: Path,
    *,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> ServiceProcess:
    """Starts ``python -m pipeline.cli.app ARGS`` in the repository.

    Output appended to ``logs/<name>.log``; does not wait for it.
    """
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli.app", *args],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return ServiceProcess(name, popen, log_path, stop_timeout_s)


def wait_healthy(process: ServiceProcess, port: int, *, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Polls ``/healthz`` on ``port`` until it answers 200.

    Raises:
        AssertionError: The process exited, or ``timeout_s`` seconds passed (with its log).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        process.assert_running()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{process.name} not ready:\n{process.log()}"
        time.sleep(0.3)


def unique_settings(
    kafka_bootstrap: str,
    database_url: str,
    *,
    tag: str = "s",
    schema: str | None = None,
    **overrides: Any,
) -> Settings:
    """Settings on a topic prefix and consumer groups no other test uses.

    Args:
        kafka_bootstrap: The Kafka bootstrap servers.
        database_url: The PostgreSQL URL.
        tag: Lowercase start of the name ``<tag><10 hex>`` (prefix ``<name>.``, groups
            ``<name>-worker`` and ``<name>-sink``).
        schema: The PostgreSQL schema; by default the name itself.
        overrides: Further settings (``api_key`` defaults to :data:`API_KEY`, the outbound
            allow-lists to :data:`LOOPBACK_ANY_PORT`).
    """
    name = f"{tag}{uuid.uuid4().hex[:10]}"
    TOPIC_PREFIXES.add(f"{name}.")
    values: dict[str, Any] = {
        "kafka_bootstrap": kafka_bootstrap,
        "database_url": database_url,
        "database_schema": schema or name,
        "topic_prefix": f"{name}.",
        "worker_group": f"{name}-worker",
        "sink_group": f"{name}-sink",
        "api_key": API_KEY,
        "chat_url_allow": LOOPBACK_ANY_PORT,
        "api_key_urls": LOOPBACK_ANY_PORT,
        **overrides,
    }
    return Settings(**values)


def migrated_settings(
    kafka_bootstrap: str, database_url: str, *, schema: str, tag: str = "s", **overrides: Any
) -> Settings:
    """:func:`unique_settings` in the existing (or new) ``schema``.

    With the archive's tables upgraded to the newest revision (Alembic) in it.
    """
    settings = unique_settings(kafka_bootstrap, database_url, tag=tag, schema=schema, **overrides)
    upgrade(settings)
    return settings


def _conninfo(settings: Settings) -> str:
    return re.sub(r"^postgresql\+\w+://", "postgresql://", settings.database_url.get_secret_value())


@contextmanager
def isolated_settings(
    kafka_bootstrap: str,
    database_url: str,
    *,
    tag: str = "s",
    topics: Sequence[str] = wire.ALL_TOPICS,
    **overrides: Any,
) -> Iterator[Settings]:
    """:func:`unique_settings` with their schema and ``topics`` created.

    The schema is upgraded (Alembic), and dropped with its contents afterwards.
    """
    settings = unique_settings(kafka_bootstrap, database_url, tag=tag, **overrides)
    with pg_schema_made(_conninfo(settings), settings.database_schema):
        upgrade(settings)
        asyncio.run(ensure_topics(settings, topics))
        yield settings


@contextmanager
def pg_schema_made(conninfo: str, name: str) -> Iterator[str]:
    """Creates the empty PostgreSQL schema ``name``; drops it with its contents afterwards.

    Args:
        conninfo: A psycopg connection string.
        name: The schema's name (quoted as an identifier).
    """
    schema = sql.Identifier(name)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
    try:
        yield name
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))


@dataclass(frozen=True)
class ChatApi:
    """A Chat API process to start: its name, port and extra environment."""

    name: str = "chat-api"
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return chat_url(self.port)


@dataclass
class ProcessStack:
    """Chat APIs, workers and sinks on one set of settings.

    ``gone`` names processes a test stopped or killed on purpose (no longer checked).
    """

    settings: Settings
    logs: Path
    ready_timeout_s: float = READY_TIMEOUT_S
    stop_timeout_s: float = STOP_TIMEOUT_S
    worker_ids: bool = False
    """Start each worker with ``CHATSCRIBE_WORKER_ID`` set to its name."""
    env: dict[str, str] = field(init=False)
    chat_apis: list[ServiceProcess] = field(default_factory=list, init=False)
    chat_urls: dict[str, str] = field(default_factory=dict, init=False)
    workers: list[ServiceProcess] = field(default_factory=list, init=False)
    sinks: list[ServiceProcess] = field(default_factory=list, init=False)
    gone: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.env = stack_env(self.settings)

    @property
    def chat_url(self) -> str:
        """The chat URL of the first Chat API."""
        return next(iter(self.chat_urls.values()))

    @property
    def processes(self) -> list[ServiceProcess]:
        return [*self.workers, *self.sinks, *self.chat_apis]

    def start(self, name: str, *args: str, **extra_env: str) -> ServiceProcess:
        env = {**self.env, **extra_env}
        return start_cli(name, args, env, self.logs, stop_timeout_s=self.stop_timeout_s)

    def start_chat_apis(self, apis: Sequence[ChatApi]) -> None:
        """Starts them all, then waits until each answers ``/healthz``."""
        serve = ("api", "serve", "--host", "127.0.0.1", "--port")
        started = [
            (api, self.start(api.name, *serve, str(api.port), **self._own_state(api)))
            for api in apis
        ]
        self.chat_apis += [process for _, process in started]
        for api, process in started:
            wait_healthy(process, api.port, timeout_s=self.ready_timeout_s)
            self.chat_urls[api.name] = api.url

    def _own_state(self, api: ChatApi) -> dict[str, str]:
        """Returns: ``api.env`` with a state database of its own, unless it names one.

        So no other Chat API on the machine shares its users, threads or sessions.
        """
        own = f"sqlite:///{self.logs / api.name}-state.sqlite3"
        return {"CHATSCRIBE_API_DATABASE_URL": own, **api.env}

    def start_worker(self, name: str = "worker", **extra_env: str) -> ServiceProcess:
        if self.worker_ids:
            extra_env = {"CHATSCRIBE_WORKER_ID": name, **extra_env}
        self.workers.append(self.start(name, "worker", **extra_env))
        return self.workers[-1]

    def start_sink(self, name: str = "sink", **extra_env: str) -> ServiceProcess:
        self.sinks.append(self.start(name, "sink", **extra_env))
        return self.sinks[-1]

    def assert_running(self) -> None:
        """Raises: AssertionError when a process not in ``gone`` has exited."""
        for process in self.processes:
            if process.name not in self.gone:
                process.assert_running()

    def stop(self) -> None:
        """Stops every process (workers, sinks, then Chat APIs)."""
        for process in self.processes:
            process.stop()

    def stop_cleanly(self) -> None:
        """Checks all still run, stops them and checks their exit codes.

        0, or for a Chat API the SIGTERM that uvicorn re-raises once it has shut down
        gracefully.
        """
        self.assert_running()
        for process in [p for p in self.processes if p.name not in self.gone]:
            code = process.stop()
            clean = (0, -signal.SIGTERM) if process in self.chat_apis else (0,)
            assert code in clean, f"{process.name} did not stop cleanly ({code}):\n{process.log()}"

    @contextmanager
    def running(
        self,
        chat_apis: Sequence[ChatApi] = (),
        *,
        workers: Sequence[str] = ("worker",),
        sinks: Sequence[str] = ("sink",),
        check_exit: bool = False,
    ) -> Iterator[ProcessStack]:
        """Starts the Chat APIs (healthy), then the workers and sinks.

        Stops every process on the way out, after :meth:`stop_cleanly` when ``check_exit``
        and the body succeeded.
        """
        try:
            self.start_chat_apis(chat_apis)
            for name in workers:
                self.start_worker(name)
            for name in sinks:
                self.start_sink(name)
            yield self
            if check_exit:
                self.stop_cleanly()
        finally:
            self.stop()

    def run_questions(self, path: Path, *, timeout_s: float) -> RunOutcome:
        """Runs a questions file as ``chatscribe batch`` does.

        Fails (AssertionError) when it does not finish within ``timeout_s`` seconds or a
        process of the stack exits.
        """
        run = run_questions_file
        check = self.assert_running
        outcome = asyncio.run(
            run(self.settings, path, timeout_s=timeout_s, show_progress=False, check_alive=check)
        )
        assert outcome.finished, f"run did not finish: {outcome.results}"
        return outcome

    def query(self, text: str, **params: Any) -> list[Any]:
        """Rows of ``text`` (``{s}`` is the schema) with bound ``:params``, via SQLAlchemy."""
        engine = create_engine(self.settings)
        try:
            with engine.connect() as conn:
                statement = sa.text(text.format(s=self.settings.database_schema))
                return list(conn.execute(statement, params))
        finally:
            engine.dispose()

    def execute(self, text: str, **params: Any) -> None:
        """Runs ``text`` (``{s}`` is the schema) in a transaction of its own."""
        engine = create_engine(self.settings)
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(text.format(s=self.settings.database_schema)), params)
        finally:
            engine.dispose()
