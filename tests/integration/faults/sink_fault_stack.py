"""Support for the sink and PostgreSQL fault tests: the whole pipeline as processes, and the
audit that compares what was sent with what the archive stored.

* :func:`start_stack`: our Chat API, worker(s) and sink(s), each ``python -m pipeline.cli ...``
  with ``CHATSCRIBE_*`` variables, as ``make demo`` runs them; sinks serve their Prometheus
  metrics on a port of their own, so a test can read their counters before killing them.
* :func:`sent_lines`: every record on ``chat.lines`` (what the workers sent), read back with a
  group-less consumer up to the end offsets.
* :func:`audit`: the archive compared with those records, and the numbers a fault test prints.

The tests also run :func:`fault_support.audit` (the worker side's), which compares the archive
with the Chat API's own sent-lines log: between them, what the Chat API sent, what the workers
put on ``chat.lines`` and what PostgreSQL stored must all agree.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import yaml
from aiokafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from models import wire
from pipeline.archive import create_engine
from pipeline.kafka import DEFAULT_PARTITIONS, create_consumer
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
API_KEY = "fault-key"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
QUESTIONS = (
    "How many flights were there in March?",
    "Average arrival delay by carrier",
    "How many flights departed from each origin airport?",
    "How many distinct destinations does JetBlue fly to?",
)
KeyTriple = tuple[str, int, int]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def chat_url(port: int) -> str:
    path = wire.CHAT_PATH_TEMPLATE.format(cloud_region="local", account_name="demo", agent_id="1")
    return f"http://127.0.0.1:{port}{path}"


def questions_file(path: Path, *, jobs: int) -> Path:
    """Writes a questions file of ``jobs`` jobs: each question asked by several personas."""
    personas = -(-jobs // len(QUESTIONS))
    document = {
        "name": "faults",
        "personas": [
            {"name": f"analyst-{n}", "sessionSettings": {"externalId": f"analyst-{n}"}}
            for n in range(personas)
        ],
        "questions": [{"text": text} for text in QUESTIONS],
    }
    path.write_text(yaml.safe_dump(document))
    return path


@dataclass
class Process:
    """One pipeline process with its log file (and metrics port for sinks)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, no offset commit."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Returns: the sink's metrics now (empty when it does not answer)."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=3).text
        except httpx.TransportError:
            return {}
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


@dataclass
class Stack:
    """The processes of one fault test; sinks can be killed and restarted by index."""

    settings: Settings
    logs: Path
    env: dict[str, str]
    chat: Process | None = None
    workers: list[Process] = field(default_factory=list)
    sinks: list[Process] = field(default_factory=list)
    sink_starts: int = 0
    duplicate_lines: float = 0.0
    """Lines the sink incarnations found already stored (read before each kill and stop)."""

    def start_sink(self) -> Process:
        self.sink_starts += 1
        port = free_port()
        name = f"sink-{self.sink_starts}"
        # libpq reads PGAPPNAME: pg_stat_activity then tells which sink a backend serves.
        env = {**self.env, "CHATSCRIBE_SINK_METRICS_PORT": str(port), "PGAPPNAME": name}
        sink = _start(name, self.logs, env, "sink")
        sink.metrics_port = port
        self.sinks.append(sink)
        return sink

    def sink_named(self, name: str) -> Process:
        (sink,) = [s for s in self.sinks if s.name == name]
        return sink

    def kill_sink(self, sink: Process) -> None:
        self.duplicate_lines += _duplicates(sink)
        sink.kill()
        self.sinks.remove(sink)

    def assert_running(self) -> None:
        for process in [p for p in (self.chat, *self.workers, *self.sinks) if p is not None]:
            assert process.alive(), f"{process.name} exited:\n{process.log()}"

    def stop(self) -> None:
        for sink in self.sinks:
            self.duplicate_lines += _duplicates(sink)
        for process in [*self.workers, *self.sinks, *([self.chat] if self.chat else [])]:
            process.stop()


def _duplicates(sink: Process) -> float:
    return sink.samples().get(("chatscribe_sink_lines_total", (("result", "duplicate"),)), 0.0)


def env_for(settings: Settings) -> dict[str, str]:
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
        "CHATSCRIBE_API_KEY": API_KEY,
        "CHATSCRIBE_API_KEYS": API_KEY,
        "PYTHONUNBUFFERED": "1",
    }


def _start(name: str, logs: Path, env: dict[str, str], *args: str) -> Process:
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", *args],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Process(name, popen, log_path)


def start_stack(
    settings: Settings,
    logs: Path,
    *,
    chat_port: int,
    workers: int = 1,
    sinks: int = 2,
    line_delay_ms: int = 0,
    sent_log: Path | None = None,
) -> Stack:
    """Starts the Chat API (waits for ``/healthz``; ``line_delay_ms`` between lines; every
    line it sends logged to ``sent_log``, :mod:`chat_api.sent_log`), the workers and the sinks."""
    stack = Stack(settings, logs, env_for(settings))
    serve = ("api", "serve", "--host", "127.0.0.1", "--port", str(chat_port))
    chat_env = {**stack.env, "CHATSCRIBE_LINE_DELAY_MS": str(line_delay_ms)}
    if sent_log is not None:
        chat_env["CHATSCRIBE_SENT_LOG"] = str(sent_log)
    stack.chat = _start("chat-api", logs, chat_env, *serve)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        assert stack.chat.alive(), f"chat api exited:\n{stack.chat.log()}"
        try:
            if httpx.get(f"http://127.0.0.1:{chat_port}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"chat api not ready:\n{stack.chat.log()}"
        time.sleep(0.3)
    stack.workers = [_start(f"worker-{n}", logs, stack.env, "worker") for n in range(workers)]
    for _ in range(sinks):
        stack.start_sink()
    return stack


async def sent_lines(settings: Settings) -> dict[KeyTriple, bytes]:
    """Returns: every ``chat.lines`` record as ``{(job, attempt, line_no): raw}``.

    Raises:
        AssertionError: The same (job, attempt, line) was sent twice with different bytes.
    """
    topic = settings.topic(wire.TOPIC_LINES)
    parts = [TopicPartition(topic, p) for p in range(DEFAULT_PARTITIONS)]
    consumer = create_consumer(settings, group_id=None)
    await consumer.start()
    found: dict[KeyTriple, bytes] = {}
    try:
        consumer.assign(parts)
        ends = await consumer.end_offsets(parts)
        await consumer.seek_to_beginning(*parts)
        async with asyncio.timeout(120):
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for r in records:
                        headers = dict(r.headers)
                        key = (
                            r.key.decode(),
                            int(headers[wire.HEADER_ATTEMPT]),
                            int(headers[wire.HEADER_LINE_NO]),
                        )
                        assert found.setdefault(key, r.value) == r.value, f"{key} sent twice"
    finally:
        await consumer.stop()
    return found


@dataclass(frozen=True)
class Audit:
    """The archive compared with what was sent (the numbers a fault test prints)."""

    jobs_submitted: int
    jobs_by_status: dict[str, int]
    jobs_reasked: int
    lines_sent: int
    lines_stored: int
    missing: list[KeyTriple]
    extra: list[KeyTriple]
    changed: list[KeyTriple]
    stored_twice: int
    jobs_not_final: list[str]
    answers_twice: int

    def line(self, fault: str, **more: Any) -> str:
        extra = " ".join(f"{k}={v}" for k, v in more.items())
        completed = self.jobs_by_status.get("completed", 0)
        return (
            f"FAULT {fault}: jobs submitted={self.jobs_submitted} completed={completed}"
            f" by_status={self.jobs_by_status} re-asked={self.jobs_reasked}"
            f" lines sent={self.lines_sent} stored={self.lines_stored} {extra}"
        )


def audit(
    settings: Settings, run_id: str, jobs_submitted: int, sent: dict[KeyTriple, bytes]
) -> Audit:
    """Compares the run's ``stream_lines`` with ``sent``; checks each job ended exactly once."""
    engine = create_engine(settings)
    schema = settings.database_schema
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'SET search_path TO "{schema}"')
            jobs = conn.execute(
                sa.text(
                    "SELECT job_id, status, last_attempt, normalised_attempt FROM jobs"
                    " WHERE run_id = :r"
                ),
                {"r": run_id},
            ).all()
            ids = [j.job_id for j in jobs]
            rows = conn.execute(
                sa.text(
                    "SELECT job_id, attempt, line_no, raw FROM stream_lines"
                    " WHERE job_id = ANY(:ids)"
                ),
                {"ids": ids},
            ).all()
            answers_twice = conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT job_id, attempt FROM answers"
                    " WHERE job_id = ANY(:ids) GROUP BY 1, 2 HAVING count(*) > 1) t"
                ),
                {"ids": ids},
            ).scalar_one()
    finally:
        engine.dispose()
    wanted = {k: v for k, v in sent.items() if k[0] in set(ids)}
    stored_keys = Counter((r.job_id, r.attempt, r.line_no) for r in rows)
    stored = {(r.job_id, r.attempt, r.line_no): bytes(r.raw) for r in rows}
    terminal = ("completed", "failed", "aborted")
    return Audit(
        jobs_submitted=jobs_submitted,
        jobs_by_status=dict(Counter(j.status for j in jobs)),
        jobs_reasked=sum(1 for j in jobs if (j.last_attempt or 0) > 1),
        lines_sent=len(wanted),
        lines_stored=len(rows),
        missing=sorted(set(wanted) - set(stored)),
        extra=sorted(set(stored) - set(wanted)),
        changed=sorted(k for k in set(wanted) & set(stored) if wanted[k] != stored[k]),
        stored_twice=sum(1 for n in stored_keys.values() if n > 1),
        jobs_not_final=[
            j.job_id
            for j in jobs
            if j.status not in terminal or j.normalised_attempt != j.last_attempt
        ],
        answers_twice=int(answers_twice),
    )


def assert_nothing_lost_or_doubled(result: Audit) -> None:
    """Every job has one final outcome; stored lines equal sent lines, byte for byte, once."""
    assert not result.jobs_not_final, f"jobs without a final outcome: {result.jobs_not_final}"
    assert sum(result.jobs_by_status.values()) == result.jobs_submitted
    assert not result.missing, f"{len(result.missing)} lines lost: {result.missing[:5]}"
    assert not result.extra, f"{len(result.extra)} lines stored but never sent: {result.extra[:5]}"
    assert not result.changed, f"lines stored with other bytes: {result.changed[:5]}"
    assert result.stored_twice == 0 and result.answers_twice == 0
    assert result.lines_stored == result.lines_sent > 0
