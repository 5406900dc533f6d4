"""What the console (:mod:`pipeline.console`) reads: runs, a run's jobs, search, read-only.

A database module (SQLAlchemy). The console connects through :func:`create_read_only_engine`,
whose every connection starts with ``default_transaction_read_only = on`` (PostgreSQL
documentation, "Client Connection Defaults"), so no page can write, whatever its query says.
Everything is read as stored: a question or answer that retention redacted or deleted
(:mod:`pipeline.archive.retention`) is shown, and found, only as it now is.

* :func:`list_runs`: every run with its jobs counted by status, newest first.
* :func:`run_jobs`: one page of a run's jobs (filter by status, persona, view; sort; offset
  paging): the page is chosen on ``jobs`` alone (``ix_jobs_run_page``), then only its rows are
  joined to their answers and SQL, so a page costs the same over 100 or 100,000 jobs.
* :func:`run_facets`: the personas, statuses and views of a run (the filters' choices).
* :func:`search`: full-text search over questions and answers (migration ``0005``), newest
  first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

import sqlalchemy as sa

from pipeline.archive.engine import create_engine
from pipeline.settings import Settings

Engine = sa.Engine
"""The archive's engine type, for modules that may not import SQLAlchemy themselves."""
Connection = sa.Connection
"""A connection of :data:`Engine`."""
JobSort = Literal["submitted", "duration", "status", "persona", "question", "lines"]
SORTS: Final[dict[str, str]] = {
    "submitted": "j.submitted_at {d} NULLS LAST, j.job_id {d}",
    "duration": "(j.finished_at - j.started_at) {d} NULLS LAST, j.job_id {d}",
    "status": "j.status {d}, j.submitted_at, j.job_id",
    "persona": "j.persona {d} NULLS LAST, j.submitted_at, j.job_id",
    "question": "j.question {d} NULLS LAST, j.job_id",
    "lines": "j.line_count {d} NULLS LAST, j.job_id",
}


def create_read_only_engine(settings: Settings) -> sa.Engine:
    """Returns: an engine on the archive whose transactions are all read only (module docstring).

    :func:`pipeline.archive.engine.create_engine` with ``read_only``: the schema is applied the
    archive's one way (``search_path``).
    """
    return create_engine(settings, read_only=True, pool_size=4)


@dataclass(frozen=True)
class RunRow:
    """A run as the Runs page lists it.

    Attributes:
        by_status: Jobs per status (``submitted``, ``running``, ``completed``, ...).
        known: Jobs the archive has; ``job_count``: jobs submitted.
    """

    run_id: str
    name: str | None
    source_file: str | None
    chat_url: str | None
    created_at: datetime | None
    created_by: str | None
    job_count: int
    rerun_of: str | None
    by_status: dict[str, int]

    @property
    def known(self) -> int:
        """Jobs the archive holds a row for."""
        return sum(self.by_status.values())

    @property
    def finished(self) -> int:
        """Jobs in a terminal status."""
        return sum(self.by_status.get(s, 0) for s in ("completed", "failed", "aborted"))

    @property
    def running(self) -> bool:
        """True while a submitted job is not finished."""
        return self.finished < max(self.job_count, self.known)


_RUNS = """
SELECT r.run_id, r.name, r.source_file, r.chat_url, r.created_at, r.created_by,
       coalesce(r.job_count, 0) AS job_count, r.rerun_of, coalesce(c.by_status, '{{}}') AS by_status
FROM runs r
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(status, n) AS by_status FROM (
        SELECT status, count(*) AS n FROM jobs WHERE run_id = r.run_id GROUP BY status
    ) g
) c ON true
{where}
ORDER BY r.created_at DESC, r.run_id
LIMIT :limit
"""


def list_runs(conn: sa.Connection, *, run_id: str | None = None, limit: int = 200) -> list[RunRow]:
    """Reads the newest ``limit`` runs (or only ``run_id``) with their jobs counted by status."""
    where = "WHERE r.run_id = :run_id" if run_id is not None else ""
    query = sa.text(_RUNS.format(where=where))
    rows = conn.execute(query, {"run_id": run_id, "limit": limit}).all()
    return [
        RunRow(
            run_id=r.run_id,
            name=r.name,
            source_file=r.source_file,
            chat_url=r.chat_url,
            created_at=r.created_at,
            created_by=r.created_by,
            job_count=int(r.job_count),
            rerun_of=r.rerun_of,
            by_status={str(k): int(v) for k, v in (r.by_status or {}).items()},
        )
        for r in rows
    ]


@dataclass(frozen=True)
class JobFilter:
    """Which of a run's jobs a page shows; None: any."""

    status: str | None = None
    persona: str | None = None
    view: str | None = None


@dataclass(frozen=True)
class JobRow:
    """One job on a run's page: what was asked, as whom, what came back."""

    job_id: str
    persona: str | None
    identity: str | None
    question: str | None
    status: str
    error: str | None
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    answer: str | None
    answer_source: str | None
    sql: list[str] = field(default_factory=list)
    total_rows: list[int | None] = field(default_factory=list)

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish, or None while either is unknown."""
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class JobPage:
    """A page of jobs: its rows, how many matched in all, where it starts."""

    jobs: list[JobRow]
    total: int
    offset: int
    limit: int


_PAGE = """
WITH page AS (
    SELECT j.* FROM jobs j
    WHERE {where}
    ORDER BY {order}
    LIMIT :limit OFFSET :offset
)
SELECT j.job_id, j.persona, j.identity, j.question, j.status, j.error, j.attempts,
       j.started_at, j.finished_at, a.content AS answer, a.source AS answer_source,
       coalesce(q.sql, ARRAY[]::text[]) AS sql, coalesce(q.total_rows, ARRAY[]::int[]) AS total_rows
FROM page j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
LEFT JOIN LATERAL (
    SELECT array_agg(q.sql_query ORDER BY q.message_id) AS sql,
           array_agg(q.total_rows ORDER BY q.message_id) AS total_rows
    FROM sql_queries q WHERE q.job_id = j.job_id AND q.attempt = j.last_attempt
) q ON true
ORDER BY {order}
"""
_COUNT = "SELECT count(*) FROM jobs j WHERE {where}"


def _job_where(flt: JobFilter) -> tuple[str, dict[str, Any]]:
    clauses, params = ["j.run_id = :run_id"], {}
    if flt.status:
        clauses.append("j.status = :status")
        params["status"] = flt.status
    if flt.persona:
        clauses.append("j.persona = :persona")
        params["persona"] = flt.persona
    if flt.view:
        clauses.append(
            "EXISTS (SELECT 1 FROM sql_queries v WHERE v.job_id = j.job_id"
            " AND v.attempt = j.last_attempt AND :view = ANY(v.views))"
        )
        params["view"] = flt.view
    return " AND ".join(clauses), params


def run_jobs(
    conn: sa.Connection,
    *,
    run_id: str,
    flt: JobFilter = JobFilter(),
    sort: JobSort = "submitted",
    descending: bool = False,
    offset: int = 0,
    limit: int = 50,
) -> JobPage:
    """Reads one page of a run's jobs (module docstring).

    Args:
        conn: A (read-only) connection.
        run_id: The run.
        flt: Status, persona and view to keep.
        sort: A key of :data:`SORTS`.
        descending: Reverses the order of ``sort``.
        offset: The page's first row among the sorted jobs (negative counts as 0).
        limit: The page's number of rows: rows ``offset`` .. ``offset + limit - 1``.

    Returns:
        The page and the number of matching jobs.
    """
    where, params = _job_where(flt)
    order = SORTS[sort].format(d="DESC" if descending else "ASC")
    params |= {"run_id": run_id, "limit": limit, "offset": max(offset, 0)}
    total = conn.execute(sa.text(_COUNT.format(where=where)), params).scalar_one()
    rows = conn.execute(sa.text(_PAGE.format(where=where, order=order)), params)
    jobs = [
        JobRow(**{**r._asdict(), "sql": list(r.sql), "total_rows": list(r.total_rows)})
        for r in rows
    ]
    return JobPage(jobs=jobs, total=int(total), offset=max(offset, 0), limit=limit)


_FACETS = """
SELECT (SELECT coalesce(array_agg(DISTINCT persona) FILTER (WHERE persona IS NOT NULL), '{}')
        FROM jobs WHERE run_id = :run_id) AS personas,
       (SELECT coalesce(array_agg(DISTINCT status), '{}')
        FROM jobs WHERE run_id = :run_id) AS statuses,
       (SELECT coalesce(array_agg(DISTINCT v), '{}') FROM jobs j
        JOIN sql_queries q ON q.job_id = j.job_id AND q.attempt = j.last_attempt,
        unnest(q.views) AS v WHERE j.run_id = :run_id) AS views
"""


def run_facets(conn: sa.Connection, *, run_id: str) -> dict[str, list[str]]:
    """Returns: ``{"personas", "statuses", "views"}``: the sorted choices of a run's filters."""
    row = conn.execute(sa.text(_FACETS), {"run_id": run_id}).one()
    return {k: sorted(getattr(row, k) or ()) for k in ("personas", "statuses", "views")}


@dataclass(frozen=True)
class SearchHit:
    r"""A job whose question or answer matched, with the matching text marked.

    Attributes:
        question_marked, answer_marked: ``ts_headline`` excerpts in which each match is
            between ``\x02`` and ``\x03`` (control characters no text holds; the console
            escapes the text, then turns them into ``<mark>``).
    """

    job_id: str
    run_id: str
    persona: str | None
    status: str
    rank: float
    question_marked: str
    answer_marked: str


_SEARCH = """
WITH q AS (SELECT websearch_to_tsquery('english', :text) AS query),
hits AS (
    SELECT j.job_id FROM jobs j, q
    WHERE to_tsvector('english'::regconfig, coalesce(j.question, '')) @@ q.query
    UNION
    SELECT a.job_id FROM answers a JOIN jobs j
        ON j.job_id = a.job_id AND a.attempt = j.last_attempt, q
    WHERE to_tsvector('english'::regconfig, coalesce(a.content, '')) @@ q.query
),
page AS (
    SELECT j.job_id, j.run_id, j.persona, j.status, j.question, j.last_attempt, j.submitted_at
    FROM hits h JOIN jobs j USING (job_id)
    ORDER BY j.submitted_at DESC NULLS LAST, j.job_id
    LIMIT :limit
)
SELECT p.job_id, p.run_id, p.persona, p.status,
       ts_rank(to_tsvector('english'::regconfig, coalesce(p.question, '') || ' '
               || coalesce(a.content, '')), q.query) AS rank,
       ts_headline('english', coalesce(p.question, ''), q.query, :opts) AS question_marked,
       ts_headline('english', coalesce(a.content, ''), q.query, :opts) AS answer_marked
FROM page p
LEFT JOIN answers a ON a.job_id = p.job_id AND a.attempt = p.last_attempt, q
ORDER BY p.submitted_at DESC NULLS LAST, p.job_id
"""
_HEADLINE_OPTIONS: Final = "StartSel=\x02, StopSel=\x03, MaxWords=40, MinWords=10, MaxFragments=2"


def search(conn: sa.Connection, *, text: str, limit: int = 100) -> list[SearchHit]:
    """Full-text search over questions and final answers (last attempts).

    Args:
        conn: A (read-only) connection.
        text: Words as a person types them (``websearch_to_tsquery``: ``"exact phrase"``,
            ``or``, ``-word``; PostgreSQL documentation, "Text Search", 12.3.2).
        limit: At most this many hits, best first.

    Returns:
        The newest ``limit`` hits, newest first (each with its ``ts_rank``); empty for a query
        without searchable words. Newest first, not best ranked: ranking every match would
        compute the text vector of each (no index holds it), which over 10,000 matches costs
        more than the page's budget.
    """
    params = {"text": text, "opts": _HEADLINE_OPTIONS, "limit": limit}
    rows = conn.execute(sa.text(_SEARCH), params).all()
    return [SearchHit(**r._asdict()) for r in rows]
