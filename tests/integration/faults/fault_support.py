"""Support for the fault-injection tests: a real stack of processes, and the audit they share.

Every part runs as its own process, as in production (``python -m pipeline.cli.app ...``): our Chat
API under uvicorn (with ``CHATSCRIBE_SENT_LOG``, so it logs every line it sent), workers and a
sink, on real Kafka and PostgreSQL, with topics, consumer groups and a schema unique to the test.

:func:`audit` checks what the issue's "Done when" asks, from PostgreSQL and the sent log only:

* every job of the run has exactly one final outcome: its ``jobs`` row is terminal and its last
  attempt has exactly one terminal event; so has every earlier attempt, for a broken stream or
  ``AttemptSuperseded`` (its worker was lost; the takeover recorded it);
* every attempt's stored lines are numbered 1..n without a gap (the primary key (job, attempt,
  line) makes a second copy impossible) and are, byte for byte (sha256), the first n lines of
  one stream the Chat API sent; the last attempt's lines are that whole stream;
* it returns the numbers the note quotes (jobs submitted, completed, re-asked, lines sent,
  lines stored).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from aiokafka.partitioner import murmur2
from psycopg import sql

from models import wire
from models.records import ChatJob
from pipeline.kafka.clients import DEFAULT_PARTITIONS
from pipeline.runs.submit import submit_jobs
from pipeline.settings import Settings
from tests.stack_support import ROOT, ChatApi, ProcessStack, isolated_settings

API_KEY = "faults-key"
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
FAST_SESSION_TIMEOUT_S = 6.0
"""The broker's smallest group session timeout (group.min.session.timeout.ms)."""
QUESTIONS = (
    "How many flights were there in March?",
    "How many flights departed from each origin airport?",
    "Average arrival delay by carrier",
    "Average wind speed at LGA",
)
TERMINAL = ("completed", "failed", "aborted")
CONTINUED = ("StreamBrokenError", "AttemptSuperseded")
"""``error_type`` of an earlier attempt's terminal event: broken, or its worker was lost."""


def make_jobs(count: int, url: str, *, run_id: str | None = None) -> list[ChatJob]:
    """``count`` jobs cycling through :data:`QUESTIONS`, asked as ``analyst-1``.

    Job ``n`` lands on partition ``n % DEFAULT_PARTITIONS`` of ``chat.requests`` (its id is drawn
    until the default partitioner, murmur2 of the key, puts it there), so every worker of a
    balanced group gets jobs: with random ids, 6 jobs fell on one worker's two partitions in
    about 3% of runs, and a test waiting for both workers to stream timed out.
    """
    run = run_id or f"run-{uuid.uuid4().hex[:8]}"
    return [
        ChatJob.model_validate(
            {
                "job_id": _job_id_on(n % DEFAULT_PARTITIONS),
                "run_id": run,
                "question": QUESTIONS[n % len(QUESTIONS)],
                "session_settings": {"externalId": "analyst-1"},
                "chat_url": url,
            }
        )
        for n in range(count)
    ]


def _job_id_on(partition: int) -> str:
    """Returns: a random job id that the default partitioner puts on ``partition``."""
    while True:
        job_id = str(uuid.uuid4())
        if (int(murmur2(job_id.encode())) & 0x7FFFFFFF) % DEFAULT_PARTITIONS == partition:
            return job_id


def query(pg_conninfo: str, schema: str, text: str, **params: Any) -> list[dict[str, Any]]:
    """Runs ``text`` (``{s}`` is the schema) and returns the rows as dicts."""
    statement = sql.SQL(text).format(s=sql.Identifier(schema))
    with psycopg.connect(pg_conninfo) as conn, conn.cursor() as cursor:
        cursor.execute(statement, params)
        names = [column.name for column in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


_PENDING_SQL = """
SELECT j.job_id, j.status, j.line_count,
       (SELECT count(*) FROM {s}.stream_lines l
         WHERE l.job_id = j.job_id AND l.attempt = j.last_attempt) AS stored
  FROM {s}.jobs j WHERE j.run_id = %(run)s
"""


def wait_archived(
    pg_conninfo: str,
    schema: str,
    run_id: str,
    count: int,
    *,
    timeout_s: float,
    check: Callable[[], None] = lambda: None,
) -> None:
    """Waits until the run's ``count`` jobs are final with all their last attempt's lines."""
    deadline = time.monotonic() + timeout_s
    while True:
        check()
        rows = query(pg_conninfo, schema, _PENDING_SQL, run=run_id)
        done = [r for r in rows if r["status"] in TERMINAL and r["stored"] == r["line_count"]]
        if len(rows) == count and len(done) == count:
            return
        summary = {s: sum(r["status"] == s for r in rows) for s in ("submitted", "running")}
        assert time.monotonic() < deadline, f"run not archived: {len(done)}/{count} {summary}"
        time.sleep(0.5)


@dataclass
class FaultNumbers:
    """What a fault test saw, for the note."""

    jobs_submitted: int
    outcomes: dict[str, int]
    taken_over: int = 0
    re_asked: int = 0
    state_fetched: int = 0
    lines_sent: int = 0
    lines_stored: int = 0
    lines_sent_not_stored: int = 0
    streams_sent: int = 0
    streams_unrecorded: int = 0
    final_errors: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"jobs submitted={self.jobs_submitted} outcomes={self.outcomes} "
            f"taken over={self.taken_over} (re-asked={self.re_asked}, "
            f"state fetched={self.state_fetched}) lines sent={self.lines_sent} "
            f"lines stored={self.lines_stored} sent but not stored={self.lines_sent_not_stored} "
            f"streams sent={self.streams_sent} unrecorded streams={self.streams_unrecorded} "
            f"final error types={self.final_errors}"
        )


@dataclass
class _SentStream:
    chat_id: str | None
    hashes: list[str]
    used: bool = False


def read_sent_log(path: Path) -> dict[str, _SentStream]:
    """Returns: stream id → the chat id and the sha256 of each line, in line order."""
    streams: dict[str, _SentStream] = {}
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for entry in sorted(entries, key=lambda e: (e["stream"], e["line_no"])):
        stream = streams.setdefault(entry["stream"], _SentStream(entry["chat_id"], []))
        assert entry["line_no"] == len(stream.hashes) + 1, f"sent log gap: {entry}"
        stream.hashes.append(entry["sha256"])
    return streams


_JOBS_SQL = """
SELECT job_id, status, last_attempt, line_count, error_type
  FROM {s}.jobs WHERE run_id = %(run)s
"""
_TERMINALS_SQL = """
SELECT e.job_id, e.attempt, e.kind, e.payload->>'error_type' AS error_type
  FROM {s}.job_events e JOIN {s}.jobs j USING (job_id)
 WHERE j.run_id = %(run)s AND e.kind IN ('completed', 'failed', 'aborted')
"""
_LINES_SQL = """
SELECT l.job_id, l.attempt, l.line_no, l.chat_id, encode(sha256(l.raw), 'hex') AS sha256
  FROM {s}.stream_lines l JOIN {s}.jobs j USING (job_id)
 WHERE j.run_id = %(run)s ORDER BY l.job_id, l.attempt, l.line_no
"""


def audit(
    pg_conninfo: str, schema: str, run_id: str, jobs_submitted: int, sent_log: Path
) -> FaultNumbers:
    """Checks the run against the sent log (module docstring); returns the numbers."""
    jobs = {r["job_id"]: r for r in query(pg_conninfo, schema, _JOBS_SQL, run=run_id)}
    assert len(jobs) == jobs_submitted, f"{len(jobs)} jobs archived of {jobs_submitted}"
    _check_one_final_outcome(jobs, query(pg_conninfo, schema, _TERMINALS_SQL, run=run_id))
    attempts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in query(pg_conninfo, schema, _LINES_SQL, run=run_id):
        attempts[(row["job_id"], row["attempt"])].append(row)
    streams = read_sent_log(sent_log)
    numbers = FaultNumbers(
        jobs_submitted,
        outcomes=_count(r["status"] for r in jobs.values()),
        final_errors=_count(r["error_type"] for r in jobs.values() if r["error_type"]),
        lines_sent=sum(len(s.hashes) for s in streams.values()),
        lines_stored=sum(len(rows) for rows in attempts.values()),
        streams_sent=len(streams),
    )
    for (job_id, attempt), rows in sorted(attempts.items()):
        final = attempt == jobs[job_id]["last_attempt"]
        _match_stream(job_id, attempt, rows, streams, whole=final)
    for job_id, job in jobs.items():
        numbers.taken_over += job["last_attempt"] > 1
        chat_ids = [
            attempts[(job_id, a)][0]["chat_id"]
            for a in range(1, job["last_attempt"] + 1)
            if attempts.get((job_id, a))
        ]
        numbers.state_fetched += job["last_attempt"] > 1 and len(set(chat_ids)) < len(chat_ids)
        numbers.re_asked += job["last_attempt"] > 1 and len(set(chat_ids)) == len(chat_ids)
    stored_of_used = sum(len(s.hashes) for s in streams.values() if s.used)
    numbers.streams_unrecorded = sum(not s.used for s in streams.values())
    numbers.lines_sent_not_stored = numbers.lines_sent - numbers.lines_stored
    assert stored_of_used >= numbers.lines_stored
    return numbers


def _check_one_final_outcome(
    jobs: dict[str, dict[str, Any]], terminals: Sequence[dict[str, Any]]
) -> None:
    by_attempt: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in terminals:
        by_attempt[(row["job_id"], row["attempt"])].append(row)
    for job_id, job in jobs.items():
        assert job["status"] in TERMINAL, f"job {job_id} not final: {job}"
        last = job["last_attempt"]
        finals = by_attempt.get((job_id, last), [])
        assert len(finals) == 1, f"job {job_id} attempt {last} has terminal events {finals}"
        assert finals[0]["kind"] == job["status"]
        for attempt in range(1, last):
            earlier = by_attempt.get((job_id, attempt), [])
            assert len(earlier) == 1, f"job {job_id} attempt {attempt}: terminal events {earlier}"
            assert earlier[0]["error_type"] in CONTINUED, earlier
        assert not [k for k in by_attempt if k[0] == job_id and k[1] > last]


def _match_stream(
    job_id: str,
    attempt: int,
    rows: list[dict[str, Any]],
    streams: dict[str, _SentStream],
    *,
    whole: bool,
) -> None:
    numbers = [r["line_no"] for r in rows]
    assert numbers == list(range(1, len(rows) + 1)), f"{job_id}/{attempt}: line gap {numbers}"
    stored = [r["sha256"] for r in rows]
    chat_id = rows[0]["chat_id"]
    for stream in streams.values():
        if stream.used or stream.chat_id != chat_id:
            continue
        if (stream.hashes == stored) if whole else (stream.hashes[: len(stored)] == stored):
            stream.used = True
            return
    raise AssertionError(
        f"job {job_id} attempt {attempt}: its {len(rows)} stored lines (chat {chat_id}) are not "
        f"{'the whole' if whole else 'a prefix'} of any stream the Chat API sent"
    )


def _count(values: Any) -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    for value in values:
        found[str(value)] += 1
    return dict(sorted(found.items()))


@dataclass(kw_only=True)
class FaultStack(ProcessStack):
    """A running stack and the run's checks.

    The Chat API logs what it sent to ``sent_log``; workers are named ``worker-a``,
    ``worker-b``, ... as their ``worker_id``; one sink.
    """

    sent_log: Path

    @property
    def conninfo(self) -> str:
        """The settings' database URL as a psycopg conninfo URL."""
        url = self.settings.database_url.get_secret_value()
        return re.sub(r"^postgresql\+\w+://", "postgresql://", url)

    def rows(self, text: str, **params: Any) -> list[dict[str, Any]]:
        """:func:`query` on the stack's schema."""
        return query(self.conninfo, self.settings.database_schema, text, **params)

    def submit_run(self, count: int) -> str:
        """Submits ``count`` jobs (:func:`make_jobs`) on its Chat API; returns their run id."""
        jobs = make_jobs(count, self.chat_url)
        submit(self.settings, jobs)
        return jobs[0].run_id

    def wait_archived(self, run_id: str, count: int, *, timeout_s: float) -> None:
        """:func:`wait_archived`, failing early when a process has exited."""
        schema = self.settings.database_schema
        check = self.assert_running
        wait_archived(self.conninfo, schema, run_id, count, timeout_s=timeout_s, check=check)

    def audit(self, run_id: str, jobs_submitted: int) -> FaultNumbers:
        """:func:`audit` of the run against the Chat API's sent log."""
        schema = self.settings.database_schema
        return audit(self.conninfo, schema, run_id, jobs_submitted, self.sent_log)

    def balanced(self) -> bool:
        """True when the group finished rebalancing.

        Every worker's latest assignment of ``chat.requests`` is non-empty and together they hold
        each partition exactly once.
        """
        topic = self.settings.topic(wire.TOPIC_REQUESTS)
        pattern = re.compile(
            rf"partitions assigned worker_id=\S+ topic={re.escape(topic)} partitions=\[([\d, ]*)\]"
        )
        held: list[int] = []
        for worker in self.workers:
            found = pattern.findall(worker.log(chars=1_000_000))
            latest = [int(p) for p in found[-1].split(",") if p.strip()] if found else []
            if not latest:
                return False
            held.extend(latest)
        return sorted(held) == list(range(DEFAULT_PARTITIONS))

    def wait_until(self, check: Callable[[], bool], *, timeout_s: float, what: str) -> None:
        """Polls ``check`` until true, failing early when a process has exited."""
        deadline = time.monotonic() + timeout_s
        while not check():
            self.assert_running()
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)

    def wait_streaming(self, run_id: str, *, at_least: int, timeout_s: float = 90) -> None:
        """Waits until ``at_least`` jobs of the run are running with a first line archived."""
        streaming = (
            "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
            " AND status = 'running' AND first_line_at IS NOT NULL"
        )
        self.wait_until(
            lambda: self.rows(streaming, run=run_id)[0]["n"] >= at_least,
            timeout_s=timeout_s,
            what="jobs streaming",
        )


@contextmanager
def running_stack(
    kafka_bootstrap: str,
    database_url: str,
    logs: Path,
    *,
    workers: int,
    line_delay_ms: int,
    concurrency: int,
    **overrides: Any,
) -> Iterator[FaultStack]:
    """Schema, topics.

    Chat API, ``workers`` workers (``worker-a``, ``worker-b``, ...) and a sink on settings of
    their own: ``concurrency`` streams per worker, group session timeout
    :data:`FAST_SESSION_TIMEOUT_S`, ``overrides`` on top.

    On exit every process still meant to run must stop cleanly (exit code 0).
    """
    with isolated_settings(
        kafka_bootstrap,
        database_url,
        tag="f",
        api_key=API_KEY,
        worker_concurrency=concurrency,
        worker_session_timeout_s=FAST_SESSION_TIMEOUT_S,
        **overrides,
    ) as settings:
        stack = FaultStack(
            settings, logs, READY_TIMEOUT_S, STOP_TIMEOUT_S, True, sent_log=logs / "sent.ndjson"
        )
        delay = str(line_delay_ms)
        chat = ChatApi(
            env={"CHATSCRIBE_LINE_DELAY_MS": delay, "CHATSCRIBE_SENT_LOG": str(stack.sent_log)}
        )
        names = [f"worker-{chr(ord('a') + n)}" for n in range(workers)]
        with stack.running([chat], workers=names, sinks=["sink"], check_exit=True):
            # Jobs submitted while the group still rebalances would be handed over between
            # workers (pipeline.worker.group): tests counting takeovers start from a settled group.
            stack.wait_until(stack.balanced, timeout_s=READY_TIMEOUT_S, what="a balanced group")
            yield stack


StackFactory = Callable[..., AbstractContextManager[FaultStack]]
"""``running_stack`` with Kafka, PostgreSQL and the logs' folder given (fixture ``fault_stack``)."""


def submit(settings: Settings, jobs: Sequence[ChatJob]) -> None:
    """Publishes ``jobs`` as ``chatscribe batch`` does (accepted event, then the job)."""
    asyncio.run(submit_jobs(settings, jobs))


def ops_services(env: dict[str, str], command: str) -> None:
    """Runs ``ops/services.sh COMMAND`` with ``env``, failing the test with its output."""
    done = subprocess.run(
        [str(ROOT / "ops/services.sh"), command], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"services.sh {command}:\n{done.stdout}\n{done.stderr}"
