"""Archive growth (issue 13, point 4): the sink and the read queries at 100k, 1M and 10M lines.

One bench-only schema, migrated to the head (``stream_lines`` partitioned by month), grows in
steps. Each step adds synthetic jobs generated inside PostgreSQL (``INSERT ... SELECT`` over
``generate_series``): every job is a copy of one of the recorded transcripts
(``bench/data/transcripts.jsonl``, ~560 B per line as served, ~19 lines per job) whose rows in
every archive table were first written by the real :class:`~pipeline.archive.writer.ArchiveWriter`
(template jobs, then moved aside), with a new job id (a UUID, as ``chatscribe batch`` makes),
runs of :data:`JOBS_PER_RUN` jobs, and times one job every :data:`JOB_SPACING_S` seconds: the
archive grows by history, so 10M lines span about six months (seven partitions) and a query
for "the last hour" or "one run" returns as many rows at every size.

At each size it measures (medians of :data:`REPEATS`):

* ``sink``: lines/s of :meth:`ArchiveWriter.write_batch` on fresh batches of whole jobs (lines
  and their ``accepted``/``started``/``completed`` events, so each batch also normalises its
  jobs), median of :data:`SINK_PASSES` passes of :data:`SINK_BATCHES` batches of
  :data:`JOBS_PER_BATCH` jobs, job time now;
* ``audit``: :func:`pipeline.archive.audit.read_entries` over the archive's last hour;
* ``run``: :func:`pipeline.archive.runs.run_progress` plus
  :func:`~pipeline.archive.runs.run_results` of runs picked across the whole archive (same
  seed at every size);
* ``replay``: :func:`pipeline.archive.replay.read_attempt` of jobs picked across the archive.

Each figure is printed as a ratio to the 100k figure (target: latency ≤ 1.3x, lines/s ≥ 1/1.3).
Disk: ~1.3 KB per line in ``stream_lines`` (raw bytes and jsonb payload), so ~13 GB at 10M; when
the free space of the database's disk (``df`` of :data:`DISK_PATH`) is short, lines are stored
without their jsonb payload (narrower, said in the output and the details).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import psycopg
import sqlalchemy as sa
from psycopg import sql

from bench.archive_schema import BenchSpace, conninfo
from bench.transcripts import Transcript
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.archive import audit, partitions, replay, runs
from pipeline.archive.engine import create_engine, upgrade
from pipeline.archive.writer import ArchiveWriter

logger = logging.getLogger(__name__)

JOB_SPACING_S: Final = 30
JOBS_PER_RUN: Final = 100
JOBS_PER_BATCH: Final = 100
SINK_BATCHES: Final = 8
SINK_PASSES: Final = 3
REPEATS: Final = 7
SAMPLED_RUNS: Final = 8
SAMPLED_JOBS: Final = 20
FILL_CHUNK_JOBS: Final = 50_000
BYTES_PER_LINE: Final = 1_400
DISK_PATH: Final = Path("/work")
HISTORY_DAYS: Final = 200
KEEP_ENV: Final = "BENCH_GROWTH_KEEP"
"""Set to ``1`` to keep the bench schema for inspection (``EXPLAIN`` at 10M lines)."""
TABLES: Final = (
    "jobs", "job_events", "stream_lines", "messages", "tool_calls", "sql_queries", "answers",
)  # fmt: skip
_JOB_ID: Final = "md5('growth-' || g)::uuid::text"
_RUN_ID: Final = f"'run-' || (g / {JOBS_PER_RUN})"


@dataclass
class GrowthStep:
    """Figures at one archive size. Attributes: lines archived; sink lines/s; latencies, ms."""

    lines: int
    jobs: int
    sink_lines_per_s: float
    audit_ms: float
    run_ms: float
    replay_ms: float
    fill_s: float
    stream_lines_bytes: int
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Archive:
    space: BenchSpace
    transcripts: Sequence[Transcript]
    templates: int
    lines_per_cycle: int
    start: datetime
    narrow: bool
    jobs: int = 0
    lines: int = 0


def measure(
    transcripts: Sequence[Transcript], sizes: Sequence[int], *, emit: Callable[[str], None]
) -> list[GrowthStep]:
    """Grows one archive through ``sizes`` (lines) and measures at each (module docstring)."""
    space = BenchSpace.new("growth")
    narrow = _short_of_disk(max(sizes))
    if narrow:
        emit("bench growth: disk short for full lines; storing lines without jsonb payload")
    try:
        _create(space)
        archive = _templates(space, transcripts, narrow=narrow)
        steps = []
        for size in sizes:
            fill_s = _fill(archive, size)
            steps.append(_measure_step(archive, fill_s))
            emit(f"bench growth: {size} lines filled in {fill_s:.0f} s, {_describe(steps[-1])}")
        return steps
    finally:
        if os.environ.get(KEEP_ENV) == "1":
            emit(f"bench growth: schema {space.schema} kept ({KEEP_ENV}=1); drop it by hand")
        else:
            _drop(space)


def _drop(space: BenchSpace) -> None:
    with psycopg.connect(conninfo(space.settings), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(space.schema))
        )


def _short_of_disk(lines: int) -> bool:
    free = shutil.disk_usage(DISK_PATH).free
    return free < 2 * lines * BYTES_PER_LINE


def _create(space: BenchSpace) -> None:
    with psycopg.connect(conninfo(space.settings), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(space.schema)))
    upgrade(space.settings)


def _describe(step: GrowthStep) -> str:
    return (
        f"sink {step.sink_lines_per_s:.0f} lines/s, audit {step.audit_ms:.1f} ms,"
        f" run {step.run_ms:.1f} ms, replay {step.replay_ms:.2f} ms"
    )


def _job(job_id: str, run_id: str, t: Transcript, at: datetime) -> ChatJob:
    return ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": run_id,
            "question": t.question,
            "persona": t.persona,
            "session_settings": t.session_settings,
            "chat_url": "http://127.0.0.1:9/bench",
            "submitted_at": at,
        }
    )


def whole_jobs(
    transcripts: Sequence[Transcript], ids: Sequence[str], run_id: str, at: datetime
) -> tuple[list[LineEnvelope], list[JobEvent]]:
    """Returns: the lines and lifecycle events of one job per id, cycling the transcripts."""
    lines: list[LineEnvelope] = []
    events: list[JobEvent] = []
    for n, job_id in enumerate(ids):
        t = transcripts[n % len(transcripts)]
        job = _job(job_id, run_id, t, at)
        lines += [
            LineEnvelope.from_raw(
                job_id=job_id,
                attempt=1,
                line_no=k,
                raw=raw,
                received_at=at + timedelta(milliseconds=50 * k),
                job_at=at,
            )
            for k, raw in enumerate(t.lines, start=1)
        ]
        common = {"job_id": job_id, "run_id": run_id}
        events += [
            JobEvent(**common, kind="accepted", job=job, at=at),
            JobEvent(**common, kind="started", attempt=1, job=job, at=at),
            JobEvent(**common, kind="completed", attempt=1, line_count=len(t.lines), at=at),
        ]
    return lines, events


def _templates(space: BenchSpace, transcripts: Sequence[Transcript], *, narrow: bool) -> _Archive:
    """Writes one job per transcript through the real writer, then sets the rows aside.

    Every archive table's rows move into ``tpl_<table>`` (with ``tpl``, the transcript's index).
    """
    start = partitions.month_start(datetime.now(UTC) - timedelta(days=HISTORY_DAYS))
    ids = [f"tpl-{n:04d}" for n in range(len(transcripts))]
    lines, events = whole_jobs(transcripts, ids, "tpl", start)
    engine = create_engine(space.settings)
    try:
        writer = ArchiveWriter(engine)
        writer.write_batch(lines, events)
    finally:
        engine.dispose()
    with psycopg.connect(conninfo(space.settings), autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(space.schema)))
        for table in TABLES:
            conn.execute(
                f"CREATE TABLE tpl_{table} AS SELECT substr(job_id, 5)::int AS tpl, * FROM {table}"
            )
            conn.execute(f"TRUNCATE {table}")
        if narrow:
            conn.execute("UPDATE tpl_stream_lines SET payload = NULL")
    return _Archive(space, transcripts, len(transcripts), len(lines), start, narrow)


def _columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s AND is_generated = 'NEVER'"
        " ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def _expression(column: str, data_type: str) -> str:
    """The value of ``column`` for job ``g``: new ids, times shifted to the job's time."""
    if column == "job_id":
        return _JOB_ID
    if column == "run_id":
        return _RUN_ID
    if data_type.startswith("timestamp"):
        start = "%(start)s::timestamptz"
        return f"{start} + g * interval '{JOB_SPACING_S} seconds' + (t.{column} - {start})"
    return f"t.{column}"


def _fill(archive: _Archive, lines: int) -> float:
    """Adds jobs until the archive holds about ``lines`` lines; returns wall seconds."""
    per_job = archive.lines_per_cycle / archive.templates
    target_jobs = max(archive.jobs + 1, round(lines / per_job))
    end = archive.start + timedelta(seconds=JOB_SPACING_S * target_jobs)
    started = time.perf_counter()
    with psycopg.connect(conninfo(archive.space.settings), autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(archive.space.schema)))
        _ensure_months(archive, end)
        statements = {t: _insert(conn, t, archive.templates) for t in TABLES}
        for first in range(archive.jobs, target_jobs, FILL_CHUNK_JOBS):
            last = min(first + FILL_CHUNK_JOBS, target_jobs)
            params = {"start": archive.start, "first": first, "last": last - 1}
            with conn.transaction():
                for statement in statements.values():
                    conn.execute(statement, params)
        conn.execute(
            f"INSERT INTO runs (run_id, created_at, job_count) SELECT 'run-' || r,"
            f" %(start)s + r * interval '{JOB_SPACING_S * JOBS_PER_RUN} seconds',"
            f" {JOBS_PER_RUN} FROM generate_series(%(a)s::int, %(b)s::int) AS r"
            " ON CONFLICT DO NOTHING",
            {
                "start": archive.start,
                "a": archive.jobs // JOBS_PER_RUN,
                "b": target_jobs // JOBS_PER_RUN,
            },
        )
        for table in TABLES:  # autovacuum would otherwise run during the measurements
            conn.execute(f"VACUUM (ANALYZE) {table}")
        archive.lines = int(conn.execute("SELECT count(*) FROM stream_lines").fetchone()[0])  # type: ignore[index]
    archive.jobs = target_jobs
    return time.perf_counter() - started


def _ensure_months(archive: _Archive, end: datetime) -> None:
    months, month = [], archive.start
    while month <= end:
        months.append(month)
        month = partitions.add_months(month, 1)
    engine = create_engine(archive.space.settings)
    try:
        with engine.begin() as conn:
            partitions.ensure(conn, months=months)
    finally:
        engine.dispose()


def _insert(conn: psycopg.Connection[Any], table: str, templates: int) -> bytes:
    columns = _columns(conn, table)
    names = ", ".join(c for c, _ in columns)
    values = ", ".join(_expression(c, d) for c, d in columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {values}"
        f" FROM generate_series(%(first)s::int, %(last)s::int) AS g"
        f" JOIN tpl_{table} AS t ON t.tpl = mod(g, {templates})"
    ).encode()


def _measure_step(archive: _Archive, fill_s: float) -> GrowthStep:
    settings = archive.space.settings
    rng = random.Random(13)
    engine = create_engine(settings)
    try:
        sink = _sink(archive, engine)
        with engine.connect() as conn:
            last = conn.exec_driver_sql(
                "SELECT max(coalesce(started_at, submitted_at)) FROM jobs WHERE run_id <> 'sink'"
            ).scalar_one()
            flt = audit.AuditFilter(since=last - timedelta(hours=1), until=last)
            audit_ms = _median_ms(lambda: audit.read_entries(conn, flt=flt))
            audit_rows = len(audit.read_entries(conn, flt=flt))
            picks = [rng.randrange(archive.jobs) for _ in range(SAMPLED_JOBS)]
            ids = [str(uuid.UUID(_md5(f"growth-{g}"))) for g in picks]
            replay_ms = _median_ms(
                lambda: [replay.read_attempt(conn, job_id=j) for j in ids]
            ) / len(ids)
        run_ids = [
            f"run-{rng.randrange(archive.jobs // JOBS_PER_RUN)}" for _ in range(SAMPLED_RUNS)
        ]

        def run_queries() -> None:
            for run_id in run_ids:
                runs.run_progress(engine, run_id=run_id, expected=JOBS_PER_RUN)
                runs.run_results(engine, run_id=run_id)

        run_ms = _median_ms(run_queries) / len(run_ids)
    finally:
        engine.dispose()
    size = archive.space.relation_bytes(("stream_lines",))["stream_lines"]
    return GrowthStep(
        lines=archive.lines,
        jobs=archive.jobs,
        sink_lines_per_s=sink,
        audit_ms=audit_ms,
        run_ms=run_ms,
        replay_ms=replay_ms,
        fill_s=fill_s,
        stream_lines_bytes=size,
        details={"narrow_lines": archive.narrow, "audit_rows": audit_rows},
    )


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # matches PostgreSQL's md5()


def _median_ms(call: Callable[[], object]) -> float:
    call()  # warm-up
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        call()
        samples.append(1000 * (time.perf_counter() - started))
    return statistics.median(samples)


def _sink(archive: _Archive, engine: sa.Engine) -> float:
    """Returns: lines/s of the real writer over fresh batches of whole jobs, job time now.

    The median of :data:`SINK_PASSES` passes of :data:`SINK_BATCHES` batches each (one pass is
    about a second; passes on one 10M archive ranged 10,077-14,868 lines/s, the first one lowest).
    """
    transcripts = archive.transcripts
    writer = ArchiveWriter(engine)
    now = datetime.now(UTC)

    def batches(n: int) -> list[tuple[list[LineEnvelope], list[JobEvent]]]:
        return [
            whole_jobs(transcripts, [str(uuid.uuid4()) for _ in range(JOBS_PER_BATCH)], "sink", now)
            for _ in range(n)
        ]

    writer.write_batch(*batches(1)[0])  # warm-up (partitions checked, caches filled)
    rates = []
    for _ in range(SINK_PASSES):
        todo = batches(SINK_BATCHES)
        written = 0
        started = time.perf_counter()
        for lines, events in todo:
            written += writer.write_batch(lines, events).lines_inserted
        rates.append(written / (time.perf_counter() - started))
    return statistics.median(rates)
