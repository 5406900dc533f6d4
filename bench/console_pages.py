"""Console pages over a 10,000-job run: server time per page (issue 14: under 300 ms).

A private schema (``bench_console_<hex>``, migrated, dropped afterwards) is filled by ``COPY``
with a run of ``baseline_jobs`` jobs and every page timed (the baseline, measured in the same
run), then a run of ``jobs`` jobs is added and every page timed again (each job has an answer and
a SQL query touching one of three views; three personas). Each run also gets a review queue of
all its jobs (issue 26) with a reviewer and :data:`VERDICTS` verdicts appended through the
verdict chain, so the Review page, the queue API and the reviewed accuracy of the run page are
timed over a 10,000-item queue. Each page of
:mod:`pipeline.console` is requested in process through ``httpx.ASGITransport`` (no network,
no browser: the server's time to build the page, from request to the last byte), ``repeats``
times after one warm-up; the figure is the median.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import httpx
import psycopg
from psycopg import sql

from bench.archive_schema import BenchSpace, conninfo
from pipeline.archive import reviews
from pipeline.archive.engine import create_engine, upgrade
from pipeline.console.app import create_app
from pipeline.settings import Settings

BUDGET_MS: Final = 300.0
VERDICTS: Final = 200
"""Verdicts given in each run's review queue (the first positions, mixed verdicts)."""
PERSONAS: Final = ("analyst", "jfk-ops", "lga-ops")
VIEWS: Final = ("flights", "weather", "planes")
_SCHEMA: Final = [
    {"name": "carrier", "column_type": "String"},
    {"name": "n", "column_type": "Int64"},
]


@dataclass(frozen=True)
class PageFigures:
    """Median server time of each page, in milliseconds, over the big and the baseline run."""

    big_ms: dict[str, float]
    small_ms: dict[str, float]
    jobs: int
    baseline_jobs: int


def _copy_run(conn: psycopg.Connection, schema: str, run_id: str, jobs: int) -> str:
    """COPYs a run of ``jobs`` jobs; returns one job id (for the conversation page)."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    ident = sql.Identifier(schema)
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.runs (run_id, name, source_file, chat_url, created_at, created_by,"
            " job_count) VALUES (%s, %s, 'bench.yaml', 'http://bench', now(), 'bench', %s)"
        ).format(ident),
        (run_id, f"bench {jobs}", jobs),
    )
    ids = [f"{run_id}-{n:06d}" for n in range(jobs)]
    with conn.cursor() as cur:
        columns = (
            "job_id, run_id, persona, question, session_settings, identity, status, attempts,"
            " last_attempt, submitted_at, started_at, finished_at, line_count, normalised_attempt"
        )
        with cur.copy(sql.SQL(f"COPY {{}}.jobs ({columns}) FROM STDIN").format(ident)) as copy:
            for n, job_id in enumerate(ids):
                at = start + timedelta(seconds=n)
                persona = PERSONAS[n % 3]
                settings = json.dumps({"externalId": f"{persona}-1"})
                question = f"How many flights did carrier {n % 16} fly in month {n % 12 + 1}?"
                copy.write_row(
                    (job_id, run_id, persona, question, settings, f"external:{persona}-1",
                     "completed", 1, 1, at, at, at + timedelta(seconds=2), 8, 1)
                )  # fmt: skip
        with cur.copy(
            sql.SQL(
                "COPY {}.answers (job_id, attempt, content, source, stream_errors) FROM STDIN"
            ).format(ident)
        ) as copy:
            for n, job_id in enumerate(ids):
                copy.write_row((job_id, 1, f"There were {n:,} flights.", "final", []))
        with cur.copy(
            sql.SQL(
                "COPY {}.sql_queries (job_id, attempt, message_id, sql_query, total_rows, views,"
                " members, result_schema, rows) FROM STDIN"
            ).format(ident)
        ) as copy:
            for n, job_id in enumerate(ids):
                view = VIEWS[n % 3]
                copy.write_row(
                    (job_id, 1, "t1", f"SELECT MEASURE(count) FROM {view}", 1, [view],
                     [f"{view}.count"], json.dumps(_SCHEMA), json.dumps([["UA", n]]))
                )  # fmt: skip
    return ids[len(ids) // 2]


async def _time_pages(app: object, paths: Sequence[str], repeats: int) -> dict[str, float]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    medians = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        for path in paths:
            samples = []
            for n in range(repeats + 1):
                began = time.perf_counter()
                response = await client.get(path)
                elapsed = (time.perf_counter() - began) * 1000
                assert response.status_code == 200, (path, response.status_code)
                if n:
                    samples.append(elapsed)
            medians[path] = statistics.median(samples)
    return medians


def _pages(run_id: str, job_id: str, jobs: int) -> dict[str, str]:
    return {
        "runs": "/",
        "run": f"/runs/{run_id}",
        "run-last-page": f"/runs/{run_id}?offset=100000000",
        "run-by-view": f"/runs/{run_id}?view=weather&sort=duration&desc=1&offset=1000",
        "conversation": f"/jobs/{job_id}",
        "search": "/search?q=carrier+flights",
        "audit-user": "/audit?user=jfk-ops-1&until=2026-11-01T00:10:00",
        "audit-all": "/audit",
        "review-queues": "/review",
        "review": f"/review/q-{run_id}?pos={max(jobs // 2, 1)}",
        "review-api": f"/review/q-{run_id}/items?first={max(jobs // 2, 1)}&limit=50",
    }


def measure(jobs: int = 10_000, baseline_jobs: int = 100, repeats: int = 5) -> PageFigures:
    """Times each console page over a small and then a big archive.

    Fills a private schema (module docstring) and times each page: first over an archive holding
    only the baseline run, then again once the big run is added.
    """
    space = BenchSpace.new("console")
    with psycopg.connect(conninfo(space.settings), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(space.schema)))
    try:
        upgrade(space.settings)
        app = create_app(space.settings)
        small = _fill_and_time(app, space.settings, baseline_jobs, repeats)
        big = _fill_and_time(app, space.settings, jobs, repeats)
        return PageFigures(big_ms=big, small_ms=small, jobs=jobs, baseline_jobs=baseline_jobs)
    finally:
        with psycopg.connect(conninfo(space.settings), autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
            conn.execute(drop.format(sql.Identifier(space.schema)))


def review_queue(settings: Settings, run_id: str, *, verdicts: int) -> str:
    """Makes queue ``q-<run_id>`` of the run's jobs, reviewer ``r-<run_id>``, ``verdicts`` verdicts.

    Returns:
        The reviewer's token.
    """
    engine = create_engine(settings)
    try:
        with engine.begin() as conn:
            token = reviews.add_reviewer(conn, f"r-{run_id}")
            count = reviews.create_queue(
                conn, f"q-{run_id}", reviews.QueueFilter(run=run_id), reviewers=[f"r-{run_id}"]
            )
        with engine.begin() as conn:
            items = reviews.queue_items(conn, f"q-{run_id}", first=1, limit=min(verdicts, count))
            for n, item in enumerate(items):
                form = reviews.VerdictForm(
                    f"q-{run_id}", item.position, item.job_id, VERDICT_CYCLE[n % 4]
                )
                reviews.give(conn, token, form, anchor=None)
    finally:
        engine.dispose()
    return token


VERDICT_CYCLE: Final = ("correct", "correct", "incorrect", "needs_follow_up")


def _fill_and_time(app: object, settings: Settings, jobs: int, repeats: int) -> dict[str, float]:
    run_id = f"run-{jobs}-{uuid.uuid4().hex[:6]}"
    schema, dsn = settings.database_schema, conninfo(settings)
    with psycopg.connect(dsn) as conn:
        job_id = _copy_run(conn, schema, run_id, jobs)
    review_queue(settings, run_id, verdicts=min(VERDICTS, jobs))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("jobs", "review_items", "review_verdicts"):
            conn.execute(
                sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            )
    pages = _pages(run_id, job_id, jobs)
    timed = asyncio.run(_time_pages(app, list(pages.values()), repeats))
    return {name: timed[path] for name, path in pages.items()}
