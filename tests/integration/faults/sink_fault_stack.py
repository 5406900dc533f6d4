"""Support for the sink and PostgreSQL fault tests.

The whole pipeline as processes, and the audit that compares what was sent with what the archive
stored.

* :func:`sink_fault_settings`: settings on topics and groups of their own, the archive
  upgraded in the given schema, the topics created.
* :func:`start_stack`: our Chat API, worker(s) and sink(s), each ``python -m pipeline.cli.app ...``
  (:class:`stack_support.ProcessStack`); sinks serve their Prometheus metrics on a port of their
  own, so a test can read their counters before killing them.
* :func:`sent_lines`: every record on ``chat.lines`` (what the workers sent), read back with a
  group-less consumer up to the end offsets.
* :func:`audit`: the archive compared with those records, and the numbers a fault test prints.

The tests also run :func:`fault_support.audit` (the worker side's), which compares the archive
with the Chat API's own sent-lines log: between them, what the Chat API sent, what the workers
put on ``chat.lines`` and what PostgreSQL stored must all agree.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import yaml
from aiokafka import TopicPartition

from models import wire
from pipeline.archive.engine import create_engine
from pipeline.kafka.clients import DEFAULT_PARTITIONS, create_consumer, ensure_topics
from pipeline.settings import Settings
from tests.integration.faults.fault_support import FaultNumbers
from tests.stack_support import (
    ChatApi,
    ProcessStack,
    ServiceProcess,
    chat_url,
    free_port,
    migrated_settings,
)

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
FLOW_WAIT_S = 120.0
QUESTIONS = (
    "How many flights were there in March?",
    "Average arrival delay by carrier",
    "How many flights departed from each origin airport?",
    "How many distinct destinations does JetBlue fly to?",
)
KeyTriple = tuple[str, int, int]


def sink_fault_settings(kafka_bootstrap: str, database_url: str, *, schema: str) -> Settings:
    """Settings on topics and consumer groups of their own.

    The archive upgraded in ``schema`` and the topics created: 25 records a sink batch, 6
    streams a worker, a free Chat API port.
    """
    settings = migrated_settings(
        kafka_bootstrap,
        database_url,
        tag="sinkfault",
        schema=schema,
        sink_batch_max_records=25,
        worker_concurrency=6,
        chat_url=chat_url(free_port()),
    )
    asyncio.run(ensure_topics(settings, wire.ALL_TOPICS))
    return settings


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


@dataclass(kw_only=True)
class SinkFaultStack(ProcessStack):
    """The processes of one fault test; sinks can be killed and restarted."""

    sink_starts: int = 0
    duplicate_lines: float = 0.0
    """Lines the sink incarnations found already stored (read before each kill and stop)."""

    def start_sink(self, name: str = "", **extra_env: str) -> ServiceProcess:
        """Starts a sink named ``name`` or ``sink-<n>`` (the n-th start).

        Its metrics on a port of its own; libpq reads PGAPPNAME: pg_stat_activity then tells
        which sink a backend serves.
        """
        self.sink_starts += 1
        name = name or f"sink-{self.sink_starts}"
        port = free_port()
        env = {"CHATSCRIBE_SINK_METRICS_PORT": str(port), "PGAPPNAME": name, **extra_env}
        sink = super().start_sink(name, **env)
        sink.metrics_port = port
        return sink

    def sink_named(self, name: str) -> ServiceProcess:
        (sink,) = [s for s in self.sinks if s.name == name]
        return sink

    def kill_sink(self, sink: ServiceProcess) -> None:
        self.duplicate_lines += _duplicates(sink)
        sink.kill()
        self.sinks.remove(sink)

    def stop(self) -> None:
        for sink in self.sinks:
            self.duplicate_lines += _duplicates(sink)
        super().stop()


def _duplicates(sink: ServiceProcess) -> float:
    return sink.samples().get(("chatscribe_sink_lines_total", (("result", "duplicate"),)), 0.0)


def start_stack(
    settings: Settings,
    logs: Path,
    *,
    workers: int = 1,
    sinks: int = 2,
    line_delay_ms: int = 0,
    sent_log: Path | None = None,
) -> SinkFaultStack:
    """Starts the Chat API, the workers and the sinks; the caller stops them.

    The Chat API listens on the port of ``settings.chat_url`` (waited for on ``/healthz``),
    waits ``line_delay_ms`` between lines and logs every line it sends to ``sent_log``
    (:mod:`chat_api.http.sent_log`).
    """
    stack = SinkFaultStack(settings, logs, READY_TIMEOUT_S, STOP_TIMEOUT_S)
    env = {"CHATSCRIBE_LINE_DELAY_MS": str(line_delay_ms)}
    if sent_log is not None:
        env["CHATSCRIBE_SENT_LOG"] = str(sent_log)
    port = httpx.URL(settings.chat_url).port
    assert port is not None, settings.chat_url
    try:
        stack.start_chat_apis([ChatApi(port=port, env=env)])
        for n in range(workers):
            stack.start_worker(f"worker-{n}")
        for _ in range(sinks):
            stack.start_sink()
    except BaseException:
        stack.stop()
        raise
    return stack


def _stored(engine: sa.Engine, schema: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".stream_lines')).scalar_one()
        )


async def wait_for_flow(
    engine: sa.Engine, schema: str, since: int, check: Callable[[], None]
) -> int:
    """Waits until more lines are stored than ``since``; returns the new count.

    Raises:
        AssertionError: ``check`` failed, or none came within ``FLOW_WAIT_S`` seconds.
    """
    deadline = time.monotonic() + FLOW_WAIT_S
    while (now := await asyncio.to_thread(_stored, engine, schema)) <= since:
        check()
        assert time.monotonic() < deadline, "no new lines reached the archive"
        await asyncio.sleep(0.1)
    return now


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


def assert_sent_log_agrees(result: Audit, numbers: FaultNumbers) -> None:
    """The Chat API's sent log agrees with ``chat.lines`` and the archive.

    Every line sent was stored, and every stream it sent was recorded
    (:func:`fault_support.audit`).
    """
    print(f"Chat API sent log: {numbers}")
    assert numbers.lines_sent == numbers.lines_stored == result.lines_stored
    assert numbers.streams_unrecorded == 0 and numbers.lines_sent_not_stored == 0
