"""Benchmark "paced" (issue 13): LLM-paced streams through a real worker and a real sink.

The paced agent (:mod:`bench.paced_agent`, its own process) streams turns that pace like a hosted
LLM (:class:`bench.paced_turns.Pacing`). Per concurrency C (8, 200, 1,000): a bench space (schema
with the commit clocks, topics; ``chat.lines`` stamped with the broker's append time), one
``chatscribe worker`` (``worker_concurrency`` = C) and one ``chatscribe sink`` process; after a
warm-up job, N jobs are submitted and the run waits until every job is archived. Then, in the
same run, the baseline: :mod:`bench.drive` ``--mode httpx`` (plain asyncio + httpx, its own
process) reads the same N streams at the same C.

Figures per level (:class:`PacedFigures`):

* jobs/s: N / (last job's archive commit - submission start); the reader's N / its wall time;
* CPU per line of the worker, the sink (``/proc/<pid>/stat`` utime + stime over the timed part)
  and the reader (its ``process_time``), in microseconds;
* per-line latency from the server's send stamp to the broker's append time of the line's
  record (``LogAppendTime``: acknowledged by Kafka), and to the commit of the sink's
  transaction that archived it (a deferred trigger on every 10th line, :data:`LINE_CLOCK`);
* job archive delay: the job's commit minus its last line's arrival at the worker
  (:mod:`bench.end_to_end`);
* peak RSS growth per stream of the worker (``VmHWM`` after ``clear_refs``) and the reader.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psycopg
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from bench import end_to_end, processes, streams
from bench.archive_schema import conninfo
from bench.paced_agent import WARM_UP_QUESTION
from bench.paced_turns import Pacing
from bench.results import summary
from bench.transcripts import load_transcripts, sent_at_of
from bench.workload import bench_jobs
from models import wire
from models.records import ChatJob
from pipeline.kafka.clients import DEFAULT_PARTITIONS
from pipeline.settings import Settings

CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
PAGE_KIB: Final = os.sysconf("SC_PAGE_SIZE") // 1024
LINE_SAMPLE: Final = 10
LINE_CLOCK: Final = """
CREATE TABLE {schema}.bench_line_commits (
    job_id text, attempt integer, line_no integer, committed_at timestamptz
);
CREATE FUNCTION {schema}.bench_mark_line() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.bench_line_commits
        VALUES (NEW.job_id, NEW.attempt, NEW.line_no, clock_timestamp());
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER bench_line_committed AFTER INSERT ON {schema}.stream_lines
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.line_no % {sample} = 0)
    EXECUTE FUNCTION {schema}.bench_mark_line();
"""
_JOB_TIMES: Final = """
SELECT EXTRACT(EPOCH FROM submitted_at)::float8, EXTRACT(EPOCH FROM started_at)::float8,
       EXTRACT(EPOCH FROM finished_at)::float8
FROM {schema}.jobs WHERE job_id = ANY(%s)
"""
_LINE_DELAYS: Final = """
SELECT substring(l.raw from 1 for 40), EXTRACT(EPOCH FROM c.committed_at)::float8
FROM {schema}.bench_line_commits AS c
JOIN {schema}.stream_lines AS l USING (job_id, attempt, line_no)
"""


@dataclass(frozen=True)
class Level:
    """One measurement: ``jobs`` jobs at concurrency ``concurrency``."""

    concurrency: int
    jobs: int


@dataclass(frozen=True)
class PacedScale:
    """The pacing and levels of a scale."""

    pacing: Pacing
    levels: tuple[Level, ...]


SCALES: Final = {
    "small": PacedScale(Pacing(turn_s=5.0), (Level(8, 16), Level(200, 200), Level(1000, 1000))),
    "full": PacedScale(Pacing(), (Level(8, 24), Level(200, 400), Level(1000, 1000))),
}


@dataclass
class PacedFigures:
    """One level's figures (module docstring); times in seconds, CPU in seconds."""

    level: Level
    lines: int = 0
    elapsed_s: float = 0.0
    worker_cpu_s: float = 0.0
    sink_cpu_s: float = 0.0
    worker_rss_kib: int = 0
    agent_cpu_s: float = 0.0
    postgres_cpu_s: float = 0.0
    kafka_cpu_s: float = 0.0
    kafka_latency_s: list[float] = field(default_factory=list)
    archive_latency_s: list[float] = field(default_factory=list)
    job_delays_s: list[float] = field(default_factory=list)
    queue_waits_s: list[float] = field(default_factory=list)
    max_in_flight: int = 0
    phases_s: dict[str, float] = field(default_factory=dict)
    reader: dict[str, Any] = field(default_factory=dict)

    def per_line_us(self, cpu_s: float) -> float:
        """Returns: ``cpu_s`` per archived line, microseconds."""
        return cpu_s * 1e6 / max(self.lines, 1)

    @property
    def reader_cpu_us(self) -> float:
        """The reader's CPU per line read, microseconds."""
        return float(self.reader["cpu_s"]) * 1e6 / max(int(self.reader["lines"]), 1)

    @property
    def reader_lines_per_s(self) -> float:
        """The reader's lines per second."""
        return float(self.reader["lines"]) / float(self.reader["elapsed_s"])

    def details(self) -> dict[str, Any]:
        """Returns: the figures as JSON-ready values (latency summaries in ms)."""
        ms = {
            "kafka_latency_ms": self.kafka_latency_s,
            "archive_latency_ms": self.archive_latency_s,
            "job_archive_delay_ms": self.job_delays_s,
            "job_queue_wait_ms": self.queue_waits_s,
        }
        return {
            "concurrency": self.level.concurrency,
            "jobs": self.level.jobs,
            "lines": self.lines,
            "elapsed_s": self.elapsed_s,
            "worker_cpu_us_per_line": self.per_line_us(self.worker_cpu_s),
            "sink_cpu_us_per_line": self.per_line_us(self.sink_cpu_s),
            "reader_cpu_us_per_line": self.reader_cpu_us,
            "agent_cpu_us_per_line": self.per_line_us(self.agent_cpu_s),
            "postgres_cpu_us_per_line": self.per_line_us(self.postgres_cpu_s),
            "kafka_cpu_us_per_line": self.per_line_us(self.kafka_cpu_s),
            "worker_rss_kib_per_stream": self.worker_rss_kib / self.level.concurrency,
            "max_streams_in_flight": self.max_in_flight,
            "phases_s": self.phases_s,
            **{k: summary([x * 1000 for x in v]) for k, v in ms.items()},
            "reader": self.reader,
        }


def cpu_s(pid: int, *, reaped: bool = False) -> float:
    """Returns: user + system CPU seconds of process ``pid`` (``/proc/<pid>/stat``).

    ``reaped``: also its children that ended and were waited for (``cutime`` + ``cstime``).
    """
    fields = _stat(pid)
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLOCK_TICKS


def _stat(pid: int) -> list[str]:
    """Returns: ``/proc/<pid>/stat`` after the command name (field 3 on is index 0 on)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def server_cpu_s() -> tuple[float, float]:
    """Returns: CPU seconds used so far by the PostgreSQL server and the Kafka broker.

    PostgreSQL: every postmaster (a ``postgres`` process whose parent is not one) with the
    backends it reaped, plus its live processes (backends, WAL writer, checkpointer...); a
    backend that ends between two readings moves from the second sum to the first, so
    differences stay right. Kafka: the JVM running ``kafka.Kafka``. Both are the servers
    ``ops/services.sh`` runs; whatever else uses them meanwhile is counted too.
    """
    comm: dict[int, str] = {}
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm", encoding="ascii") as handle:
                    comm[int(entry)] = handle.read().strip()
                parent[int(entry)] = int(_stat(int(entry))[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    postgres = kafka = 0.0
    for pid, name in comm.items():
        try:
            if name == "postgres":
                postmaster = comm.get(parent[pid]) != "postgres"
                postgres += cpu_s(pid, reaped=postmaster)
            elif name == "java" and b"kafka.Kafka" in _cmdline(pid):
                kafka += cpu_s(pid)
        except (OSError, ValueError, IndexError):
            continue
    return postgres, kafka


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return cmdline.read()


def reset_peak_rss(pid: int) -> int:
    """Resets ``VmHWM`` of ``pid`` (``clear_refs`` 5) and returns its RSS now, KiB."""
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")
    return _status_kib(pid, "VmRSS")


def peak_rss_kib(pid: int) -> int:
    """Returns: ``VmHWM`` of ``pid``, KiB."""
    return _status_kib(pid, "VmHWM")


def _status_kib(pid: int, name: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise ValueError(f"no {name} in /proc/{pid}/status")


def measure_level(
    chat_url: str, level: Level, *, profile_dir: Path | None = None, agent_pid: int | None = None
) -> PacedFigures:
    """One level: the pipeline run, then the reader's (module docstring).

    Args:
        chat_url: The paced agent's chat URL the jobs are sent to.
        level: The level to run (jobs and worker concurrency).
        profile_dir: Run the worker and the sink under pyinstrument, their profiles written
            here when they stop (CPU figures then include the profiler's cost).
        agent_pid: The paced agent's process, whose CPU per line is noted (the pacer's cost).
    """
    transcripts = load_transcripts()
    figures = PacedFigures(level)
    stack = end_to_end.Stack(chat_url, concurrency=level.concurrency, profile_dir=profile_dir)
    with stack:
        settings = stack.space.settings
        _install_line_clock(settings)
        asyncio.run(_log_append_time(settings))
        warm = bench_jobs(transcripts, 2, chat_url=chat_url)
        stack.run([job.model_copy(update={"question": WARM_UP_QUESTION}) for job in warm])
        worker, sink = (child.process.pid for child in stack.children[:2])
        jobs = bench_jobs(transcripts, level.jobs, chat_url=chat_url)
        rss_before = reset_peak_rss(worker)
        cpu_before = cpu_s(worker), cpu_s(sink)
        agent_before = cpu_s(agent_pid) if agent_pid else 0.0
        servers_before = server_cpu_s()
        started, delays, commits = stack.run(jobs)
        servers_after = server_cpu_s()
        figures.postgres_cpu_s = servers_after[0] - servers_before[0]
        figures.kafka_cpu_s = servers_after[1] - servers_before[1]
        figures.agent_cpu_s = cpu_s(agent_pid) - agent_before if agent_pid else 0.0
        figures.worker_cpu_s = cpu_s(worker) - cpu_before[0]
        figures.sink_cpu_s = cpu_s(sink) - cpu_before[1]
        figures.worker_rss_kib = peak_rss_kib(worker) - rss_before
        figures.elapsed_s = max(commits) - started
        figures.job_delays_s = delays
        figures.lines = _lines(settings, [job.job_id for job in jobs])
        figures.archive_latency_s = _archive_latencies(settings)
        job_rows = _job_rows(settings, jobs)
        figures.queue_waits_s, figures.max_in_flight = _job_times(job_rows)
        figures.phases_s = _phases(job_rows, started, max(commits))
        figures.kafka_latency_s = asyncio.run(_kafka_latencies(settings))
        reader = streams.drive(
            "httpx",
            url=chat_url,
            space=stack.space,
            concurrency=level.concurrency,
            streams=level.jobs,
            streams_per_client=streams.SHARD,
            warm_up_question=WARM_UP_QUESTION,
        )
        figures.reader = reader.figures
    return figures


def _install_line_clock(settings: Settings) -> None:
    schema = f'"{settings.database_schema}"'
    with psycopg.connect(conninfo(settings), autocommit=True) as conn:
        conn.execute(LINE_CLOCK.format(schema=schema, sample=LINE_SAMPLE).encode())


async def _log_append_time(settings: Settings) -> None:
    """Makes the broker stamp ``chat.lines`` records with their append time."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        topic = settings.topic(wire.TOPIC_LINES)
        config = {"message.timestamp.type": "LogAppendTime"}
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, config)])
    finally:
        await admin.close()


def _lines(settings: Settings, job_ids: Sequence[str]) -> int:
    query = f'SELECT count(*) FROM "{settings.database_schema}".stream_lines WHERE job_id = ANY(%s)'
    with psycopg.connect(conninfo(settings), autocommit=True) as conn:
        row = conn.execute(query.encode(), (list(job_ids),)).fetchone()
    return int(row[0]) if row else 0


JobTimes = list[tuple[float | None, float | None, float | None]]
"""Per job: (submitted, started, finished) as epoch seconds (None: not yet)."""


def _job_rows(settings: Settings, jobs: Sequence[ChatJob]) -> JobTimes:
    """Reads each job's submission, start and finish times (``_JOB_TIMES``)."""
    query = _JOB_TIMES.format(schema=f'"{settings.database_schema}"')
    with psycopg.connect(conninfo(settings), autocommit=True) as conn:
        rows = conn.execute(query.encode(), ([job.job_id for job in jobs],)).fetchall()
    return [(submitted, started, done) for submitted, started, done in rows]


def _job_times(rows: JobTimes) -> tuple[list[float], int]:
    """Each job's queueing delay and the worker's peak concurrency.

    Returns:
        Per job, seconds from submission to its start at the worker (waiting in
        ``chat.requests``), and the most jobs the worker ran at once.
    """
    waits = [started - submitted for submitted, started, _ in rows if submitted and started]
    edges = sorted(
        [(started, 1) for _, started, done in rows if started and done]
        + [(done, -1) for _, started, done in rows if started and done]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return waits, most


def _phases(rows: JobTimes, started: float, committed: float) -> dict[str, float]:
    """Returns: when, after submission began, the level's phases ended (seconds).

    ``submitted``: the last job's ``accepted`` event; ``started``: the last job taken by the
    worker; ``first_finished``/``finished``: the first and the last stream done at the worker;
    ``committed``: the last job archived. Where the wall time goes, beside the reader's.
    """
    submitted = [t for t, _, _ in rows if t is not None]
    begun = [t for _, t, _ in rows if t is not None]
    done = [t for _, _, t in rows if t is not None]
    return {
        "submitted": max(submitted, default=started) - started,
        "started": max(begun, default=started) - started,
        "first_finished": min(done, default=started) - started,
        "finished": max(done, default=started) - started,
        "committed": committed - started,
    }


def _archive_latencies(settings: Settings) -> list[float]:
    query = _LINE_DELAYS.format(schema=f'"{settings.database_schema}"')
    with psycopg.connect(conninfo(settings), autocommit=True) as conn:
        rows = conn.execute(query.encode()).fetchall()
    found = []
    for head, committed in rows:
        sent = sent_at_of(bytes(head))
        if sent is not None:
            found.append(committed - sent)
    return found


async def _kafka_latencies(settings: Settings) -> list[float]:
    """Returns: per ``chat.lines`` record, broker append time minus the server's send stamp."""
    topic = settings.topic(wire.TOPIC_LINES)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=settings.max_record_bytes,
    )
    await consumer.start()
    found: list[float] = []
    try:
        partitions = [TopicPartition(topic, p) for p in range(DEFAULT_PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for record in records:
                    sent = sent_at_of(record.value or b"")
                    if sent is not None:
                        found.append(record.timestamp / 1000 - sent)
    finally:
        await consumer.stop()
    return found


AGENT_NICE: Final = -10
"""Scheduling priority of the paced agent (Linux nice, lower runs first)."""


def _before_the_pipeline(pid: int) -> None:
    """Lets the paced agent run before the pipeline's processes when the cores are full.

    The agent stands for a hosted LLM agent on other machines: its pace must not depend on the
    load the pipeline puts on this one. On two shared cores at 1,000 streams its first lines
    came late, the worker's adaptive limit read that as the agent slowing down and shrank, and
    ~100 started jobs waited a whole turn for a stream slot (issue 13, third round). The reader
    runs against the same agent, so both sides see the same pacer. Needs the right to raise a
    priority (root or ``CAP_SYS_NICE``); without it the agent runs at the default priority and
    a line says so.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, pid, AGENT_NICE)
    except PermissionError:
        print(f"bench: paced agent at default priority (nice {AGENT_NICE} not permitted)")


def start_agent(pacing: Pacing) -> tuple[processes.Child, str]:
    """Starts the paced agent; returns it and its chat URL once it answers.

    Raises:
        ChildError: It did not start.
    """
    port = processes.free_port()
    args = ["--port", str(port), "--api-key", processes.BENCH_API_KEY]
    args += ["--turn-s", str(pacing.turn_s), "--lines-per-s", str(pacing.lines_per_s)]
    child = processes.start("paced-agent", "bench.paced_agent", *args)
    _before_the_pipeline(child.process.pid)
    try:
        processes.wait_healthy(child, port)
    except BaseException:
        child.stop()
        raise
    time.sleep(0.1)
    return child, processes.chat_url(port)
