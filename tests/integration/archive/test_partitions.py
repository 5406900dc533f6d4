"""Monthly partitions of ``stream_lines`` (migration 0006) against a real PostgreSQL.

A line lands in the partition of its job's month (``chatscribe-job-at``), else of its receive
time; a line delivered twice lands in the same partition and is absorbed on both write paths;
partitions are created ahead and take over lines the default partition caught; retention
detaches or drops whole months; the audit, run and per-job line queries use indexes, and a
query bounded in ``partition_at`` reads one partition (EXPLAIN).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from models.records import LineEnvelope
from pipeline.archive import audit, derived, partitions, replay, runs
from pipeline.archive.engine import upgrade
from pipeline.archive.redaction import Redactor
from pipeline.archive.retention import apply_policy, load_policy
from pipeline.archive.writer import ArchiveWriter
from pipeline.settings import Settings
from tests.integration.archive.archive_stack import run_cli
from tests.stack_support import stack_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("archive_schema"),
]

JOB_AT = datetime(2026, 10, 30, 23, 59, tzinfo=UTC)
RECEIVED = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


@pytest.fixture
def writer(engine: sa.Engine) -> ArchiveWriter:
    return ArchiveWriter(engine)


def _rows(engine: sa.Engine, query: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:  # search_path is the archive's schema (create_engine)
        return list(conn.execute(sa.text(query), params))


def _lines(
    job_id: str, n: int, *, job_at: datetime | None, bad: bool = False
) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(
            job_id=job_id,
            attempt=1,
            line_no=k,
            raw=b'{"id":"n","sort":NaN}'
            if bad and k == 2
            else json.dumps({"id": f"m{k}"}).encode(),
            received_at=RECEIVED + timedelta(seconds=k),
            job_at=job_at,
        )
        for k in range(1, n + 1)
    ]


def _placement(engine: sa.Engine) -> dict[str, int]:
    query = "SELECT tableoid::regclass::text, count(*) FROM stream_lines GROUP BY 1"
    return {name: n for name, n in _rows(engine, query)}


def test_a_line_lands_in_its_jobs_month_and_a_second_delivery_is_absorbed(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    with engine.begin() as conn:
        partitions.ensure(conn, months=[JOB_AT, RECEIVED])
    with_header = _lines("job-a", 5, job_at=JOB_AT)
    without = _lines("job-b", 5, job_at=None)
    assert writer.write_batch(with_header + without, []).lines_inserted == 10  # direct COPY
    assert _placement(engine) == {"stream_lines_p2026_10": 5, "stream_lines_p2026_11": 5}
    again = writer.write_batch(with_header + without, [])  # COPY refused: staging + ON CONFLICT
    assert again.lines_inserted == 0
    refused = _lines("job-c", 3, job_at=JOB_AT, bad=True)  # jsonb refuses: the safe select
    assert writer.write_batch(refused + with_header, []).lines_inserted == 3
    assert writer.write_batch(refused, []).lines_inserted == 0
    assert _placement(engine) == {"stream_lines_p2026_10": 8, "stream_lines_p2026_11": 5}


def test_ensure_creates_months_ahead_and_takes_over_strays(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    far = datetime(2027, 6, 15, tzinfo=UTC)
    writer.write_batch(_lines("job-far", 4, job_at=far), [])
    assert _placement(engine) == {"stream_lines_default": 4}
    with engine.begin() as conn:
        created = partitions.ensure_ahead(conn, now=far, ahead=2)
    assert created == ["stream_lines_p2027_06", "stream_lines_p2027_07", "stream_lines_p2027_08"]
    assert _placement(engine) == {"stream_lines_p2027_06": 4}
    with engine.begin() as conn:
        assert partitions.ensure_ahead(conn, now=far, ahead=2) == []
        assert partitions.stray_count(conn) == 0
    assert writer.write_batch(_lines("job-far", 4, job_at=far), []).lines_inserted == 0
    index = _rows(
        engine,
        "SELECT indexname FROM pg_indexes WHERE tablename = 'stream_lines_p2027_06'"
        " AND schemaname = current_schema() ORDER BY 1",
    )
    assert [r[0] for r in index] == [
        "stream_lines_p2027_06_job_id_attempt_line_no_idx",
        "stream_lines_p2027_06_pkey",
    ]


def test_the_writer_creates_this_and_next_month_before_its_first_batch(
    engine: sa.Engine, settings: Settings
) -> None:
    schema = settings.database_schema
    month = partitions.month_start(datetime.now(UTC))
    following = partitions.partition_name(partitions.add_months(month, 1))
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP TABLE "{schema}"."{following}"')
    writer = ArchiveWriter(engine)
    assert writer.write_batch(_lines("job-now", 2, job_at=None), []).lines_inserted == 2
    with engine.connect() as conn:
        names = [p.name for p in partitions.list_partitions(conn)]
    assert following in names
    assert writer.ensure_partitions(now=datetime(2030, 12, 5, tzinfo=UTC)) == [
        "stream_lines_p2030_12",
        "stream_lines_p2031_01",
    ]


def test_db_partitions_ensure_command_creates_this_and_next_months(
    bare_settings: Settings,
) -> None:
    unmigrated = run_cli(stack_env(bare_settings), "db", "partitions", "ensure")
    assert unmigrated.returncode == 2
    assert b"db upgrade" in unmigrated.stderr.replace(b"\n", b"")
    upgrade(bare_settings)
    done = run_cli(stack_env(bare_settings), "db", "partitions", "ensure", "--ahead", "4")
    assert done.returncode == 0, done.stderr.decode()
    listed = run_cli(stack_env(bare_settings), "db", "partitions", "list")
    assert listed.returncode == 0, listed.stderr.decode()
    names = [line.split()[0] for line in listed.stdout.decode().splitlines()]
    month = partitions.month_start(datetime.now(UTC))
    expected = [partitions.partition_name(partitions.add_months(month, n)) for n in range(5)]
    assert set(expected) <= set(names)
    assert names[-1] == "stream_lines_default"


def test_retention_detaches_or_drops_whole_months(
    writer: ArchiveWriter, engine: sa.Engine, tmp_path: Path
) -> None:
    for month in (7, 8, 9):
        writer.write_batch(
            _lines(f"job-{month}", 3, job_at=datetime(2026, month, 5, tzinfo=UTC)), []
        )
    with engine.begin() as conn:
        partitions.ensure(conn, months=[datetime(2026, m, 1, tzinfo=UTC) for m in (7, 8, 9)])
    policy = tmp_path / "policy.yaml"
    policy.write_text("partitions:\n  afterDays: 40\n  action: detach\n", encoding="utf-8")
    now = datetime(2026, 10, 12, tzinfo=UTC)  # August ended 42 days before, September 12
    with engine.begin() as conn:
        outcome = apply_policy(
            conn, load_policy(policy), now=now, default_redactor=Redactor.build()
        )
    assert outcome.partitions_removed == ("stream_lines_p2026_07", "stream_lines_p2026_08")
    assert _placement(engine) == {"stream_lines_p2026_09": 3}
    detached = _rows(engine, "SELECT count(*) FROM stream_lines_p2026_08")
    assert detached == [(3,)]  # a plain table now, its lines intact
    policy.write_text("partitions:\n  afterDays: 0\n  action: drop\n", encoding="utf-8")
    with engine.begin() as conn:
        outcome = apply_policy(
            conn, load_policy(policy), now=now, default_redactor=Redactor.build()
        )
    assert outcome.partitions_removed == ("stream_lines_p2026_09",)
    assert _placement(engine) == {}
    assert _rows(engine, "SELECT to_regclass('stream_lines_p2026_09')") == [(None,)]


# -- EXPLAIN ------------------------------------------------------------------------------------

FILL = """
INSERT INTO jobs (job_id, run_id, question, identity, session_settings, status, attempts,
                  last_attempt, submitted_at, started_at, normalised_attempt)
SELECT 'job-' || g, 'run-' || mod(g, 500), 'question ' || g, 'external:u' || mod(g, 50),
       jsonb_build_object('externalId', 'u' || mod(g, 50)), 'completed', 1, 1,
       timestamptz '2026-05-01' + g * interval '2 minutes',
       timestamptz '2026-05-01' + g * interval '2 minutes', 1
FROM generate_series(1, 50000) AS g;
INSERT INTO answers (job_id, attempt, content, source, stream_errors)
SELECT job_id, 1, 'answer', 'final', '{}' FROM jobs;
INSERT INTO messages (job_id, attempt, message_id, is_final, is_delta_merged, first_line,
                      last_line, extra)
SELECT job_id, 1, 'm' || k, false, true, k, k, '{}' FROM jobs, generate_series(1, 3) AS k;
INSERT INTO sql_queries (job_id, attempt, message_id, sql_query, views)
SELECT job_id, 1, 'm2', 'SELECT 1', ARRAY['flights'] FROM jobs;
INSERT INTO tool_calls (job_id, attempt, message_id, name, kind, complete)
SELECT job_id, 1, 'm2', 'sql', 'sql', true FROM jobs;
INSERT INTO stream_lines (job_id, attempt, line_no, received_at, raw, terminated, partition_at)
SELECT j.job_id, 1, k, j.submitted_at + k * interval '1 second', '\\x7b7d', true, j.submitted_at
FROM jobs j, generate_series(1, 6) AS k;
"""


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


def _explain(conn: sa.Connection, statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for statement, parameters in statements:
        result = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters)
        nodes += _plan_nodes(result.scalar_one()[0]["Plan"])
    return nodes


def _captured(engine: sa.Engine, call: Any) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):  # the reads
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", keep)
    try:
        call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", keep)
    assert seen
    return seen


def _plan(
    conn: sa.Connection, statements: list[tuple[str, Any]]
) -> tuple[set[str], set[str], set[str]]:
    """Returns: (relations read by a Seq Scan, indexes used, relations read) over the plans."""
    nodes = _explain(conn, statements)
    seq = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    return seq, indexes, {n["Relation Name"] for n in nodes if "Relation Name" in n}


def test_audit_run_and_line_queries_use_indexes_and_prune(
    engine: sa.Engine, settings: Settings
) -> None:
    schema = settings.database_schema
    with engine.begin() as conn:
        partitions.ensure(conn, months=[datetime(2026, m, 1, tzinfo=UTC) for m in range(5, 8)])
        conn.exec_driver_sql(FILL)
        conn.exec_driver_sql("ANALYZE")
    flt = audit.AuditFilter(
        since=datetime(2026, 6, 1, tzinfo=UTC), until=datetime(2026, 6, 1, 2, tzinfo=UTC)
    )
    with engine.connect() as conn:
        audited = _captured(engine, lambda: audit.read_entries(conn, flt=flt))
        by_view = _captured(
            engine,
            lambda: audit.read_entries(
                conn,
                flt=audit.AuditFilter(since=flt.since, until=flt.until, view="flights"),
            ),
        )
        lines = _captured(engine, lambda: replay.read_attempt(conn, job_id="job-7"))
        progress = _captured(
            engine, lambda: runs.run_progress(engine, run_id="run-7", expected=100)
        )
        results = _captured(engine, lambda: runs.run_results(engine, run_id="run-7"))
        pairs = [(f"job-{n}", 1) for n in range(1, 400, 4)]
        sink_reads = _captured(
            engine,
            lambda: (
                derived.ready(conn, pairs, force=True),
                derived.read_lines(conn, [(j, a, 6) for j, a in pairs], {}),
            ),
        )
        plans = {
            "sink": _plan(conn, sink_reads),
            "audit": _plan(conn, audited + by_view),
            "progress": _plan(conn, progress),
            "results": _plan(conn, results),
            "lines": _plan(conn, lines),
        }
        statement, params = lines[-1]
        bounded = statement.replace("ORDER BY", "AND partition_at >= %(lo)s ORDER BY")
        may = {**params, "lo": datetime(2026, 7, 1, tzinfo=UTC)}
        one_month = _plan(conn, [(bounded, may)])
        empty = set(
            conn.exec_driver_sql(
                "SELECT relname FROM pg_class WHERE relnamespace = %(s)s::regnamespace"
                " AND relkind = 'r' AND reltuples <= 0",
                {"s": schema},
            ).scalars()
        )
    for name, (seq, _, _) in plans.items():
        assert seq <= empty, (name, seq)  # sequential scans only of empty tables
    _, audit_indexes, _ = plans["audit"]
    assert {"ix_jobs_asked_at", "pk_answers", "pk_messages", "pk_sql_queries"} <= audit_indexes
    assert "pk_tool_calls" in audit_indexes
    assert "ix_jobs_run_id" in plans["progress"][1]
    assert {f"stream_lines_p2026_{m:02d}_pkey" for m in (5, 6, 7)} <= plans["sink"][1]
    assert {"ix_jobs_run_id", "pk_answers", "pk_sql_queries"} <= plans["results"][1]
    _, line_indexes, line_tables = plans["lines"]
    months = {f"stream_lines_p2026_{m:02d}" for m in (5, 6, 7)}
    assert months <= line_tables  # job-7's month is not known to the query: every partition
    assert {f"{m}_pkey" for m in months} <= line_indexes
    assert one_month[2] == {"stream_lines_p2026_07"} | (one_month[2] & empty)  # pruned
    assert "stream_lines_p2026_05" not in one_month[2]
