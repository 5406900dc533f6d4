"""Runs in the archive.

Record a run, follow its progress, read its results, its questions again (``chatscribe rerun``) and
its unfinished jobs (``chatscribe runs cancel``).

A database module (SQLAlchemy): :mod:`pipeline.runs` calls these functions with the engine of
:func:`pipeline.archive.engine.create_engine` and never touches SQLAlchemy itself. The tables
are created by the Alembic migration (``migrations/``); their columns are described in
:mod:`pipeline.archive.tables`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from pipeline.archive.engine import translate_errors

TERMINAL_STATUSES = ("completed", "failed", "aborted")


@dataclass(frozen=True)
class RunProgress:
    """How far a run has got.

    Attributes:
        expected: Jobs submitted.
        known: Jobs the archive has a row for.
        finished: Jobs with a terminal status whose lines are all archived and normalised.
        by_status: Job count per status (``submitted``, ``running``, ``completed``, ...).
    """

    expected: int
    known: int
    finished: int
    by_status: dict[str, int]

    @property
    def done(self) -> bool:
        """True when every expected job is finished."""
        return self.finished >= self.expected

    def to_json(self) -> dict[str, Any]:
        """Returns: the progress as a JSON object, ``done`` included."""
        return {
            "expected": self.expected,
            "known": self.known,
            "finished": self.finished,
            "done": self.done,
            "by_status": dict(sorted(self.by_status.items())),
        }


@dataclass(frozen=True)
class JobResult:
    """One job's outcome as the archive holds it (a row of the run report)."""

    job_id: str
    run_id: str
    persona: str | None
    question: str
    identity: str | None
    status: str
    chat_id: str | None
    final_answer: str | None
    answer_source: str | None
    sql: tuple[str, ...]
    total_rows: tuple[int | None, ...]
    error: str | None
    http_status: int | None
    line_count: int | None
    started_at: datetime | None
    finished_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """Returns: the ``--json`` object of ``chatscribe batch`` (times as ISO strings)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["sql"] = list(self.sql)
        out["total_rows"] = list(self.total_rows)
        for key in ("started_at", "finished_at"):
            value = out[key]
            out[key] = value.isoformat() if value is not None else None
        return out


@dataclass(frozen=True)
class RunInfo:
    """A ``runs`` row: what was submitted, when and by whom.

    Attributes:
        run_id, name, source_file, chat_url, created_by: As recorded by ``chatscribe batch``.
        created_at: When the run was recorded (UTC).
        job_count: Jobs submitted (the number ``runs wait`` waits for).
    """

    run_id: str
    name: str | None
    source_file: str | None
    chat_url: str | None
    created_at: datetime
    created_by: str | None
    job_count: int

    def to_json(self) -> dict[str, Any]:
        """Returns: the run as a JSON object (``created_at`` as an ISO string)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["created_at"] = self.created_at.isoformat()
        return out


def read_run(engine: Engine, *, run_id: str) -> RunInfo | None:
    """Returns: the ``runs`` row of ``run_id``, or None when no such run was recorded."""
    query = text(
        "SELECT run_id, name, source_file, chat_url, created_at, created_by,"
        " coalesce(job_count, 0) AS job_count FROM runs WHERE run_id = :run_id"
    )
    with engine.connect() as connection:
        row = connection.execute(query, {"run_id": run_id}).one_or_none()
    return RunInfo(**row._asdict()) if row is not None else None


def run_sources(bind: Engine | Connection, *, run_ids: Sequence[str]) -> dict[str, str | None]:
    """Returns: ``run_id → its questions file's path`` for the recorded runs.

    A rerun (``chatscribe rerun``) gives the file of the run it asked again; None when neither
    recorded one.
    """
    query = text(
        "SELECT r.run_id, coalesce(r.source_file, o.source_file) AS source_file FROM runs r"
        " LEFT JOIN runs o ON o.run_id = r.rerun_of WHERE r.run_id = ANY(:ids)"
    )
    if isinstance(bind, Connection):
        rows = bind.execute(query, {"ids": list(run_ids)}).all()
    else:
        with bind.connect() as connection:
            rows = connection.execute(query, {"ids": list(run_ids)}).all()
    return {row.run_id: row.source_file for row in rows}


def record_run(
    engine: Engine,
    *,
    run_id: str,
    name: str | None,
    source_file: str | None,
    chat_url: str | None,
    job_count: int,
    created_by: str,
    options: dict[str, Any],
    rerun_of: str | None = None,
) -> None:
    """Inserts the ``runs`` row (idempotent on ``run_id``), in a transaction of its own.

    Args:
        engine: The archive's engine.
        run_id: The run's id.
        name: The questions file's name for the run, if any.
        source_file: The questions file's path (None for a rerun).
        chat_url: The Chat API URL of every job, when they share one.
        job_count: Jobs submitted.
        created_by: The user who submitted the run.
        options: Submission options (JSON object, stored as ``jsonb``).
        rerun_of: The run this one asks again (``chatscribe rerun``), or None.
    """
    query = text(
        "INSERT INTO runs (run_id, name, source_file, chat_url, created_at, created_by,"
        " job_count, options, rerun_of) VALUES (:run_id, :name, :source_file, :chat_url, now(),"
        " :created_by, :job_count, CAST(:options AS jsonb), :rerun_of)"
        " ON CONFLICT (run_id) DO NOTHING"
    )
    params = {
        "run_id": run_id,
        "name": name,
        "source_file": source_file,
        "chat_url": chat_url,
        "created_by": created_by,
        "job_count": job_count,
        "options": json.dumps(options),
        "rerun_of": rerun_of,
    }
    with engine.begin() as connection:
        connection.execute(query, params)


def run_progress(engine: Engine, *, run_id: str, expected: int) -> RunProgress:
    """Counts a run's jobs by status. ``finished`` needs the job normalised at its last attempt."""
    query = text(
        "SELECT status, count(*) AS n, count(*) FILTER (WHERE normalised_attempt IS NOT NULL"
        " AND normalised_attempt = last_attempt) AS normalised FROM jobs"
        " WHERE run_id = :run_id GROUP BY status"
    )
    with engine.connect() as connection:
        rows = connection.execute(query, {"run_id": run_id}).all()
    by_status = {row.status: int(row.n) for row in rows}
    finished = sum(int(r.normalised) for r in rows if r.status in TERMINAL_STATUSES)
    return RunProgress(
        expected=expected, known=sum(by_status.values()), finished=finished, by_status=by_status
    )


@dataclass(frozen=True)
class RunThrottling:
    """How much throttling a run's jobs absorbed.

    429, or 503 with ``Retry-After``, waited out by the workers; the ``throttled`` count of each
    attempt's terminal event.

    Attributes:
        answers: Throttled answers in all.
        jobs: Jobs that met at least one.
    """

    answers: int
    jobs: int

    def to_json(self) -> dict[str, int]:
        """Returns: ``{"answers": ..., "jobs": ...}``."""
        return {"answers": self.answers, "jobs": self.jobs}


def run_throttling(engine: Engine, *, run_id: str) -> RunThrottling:
    """Sums the ``throttled`` counts of a run's terminal events (``job_events.payload``)."""
    query = text(
        "SELECT coalesce(sum((e.payload->>'throttled')::int), 0) AS answers,"
        " count(DISTINCT e.job_id) AS jobs"
        " FROM job_events e JOIN jobs j USING (job_id)"
        " WHERE j.run_id = :run_id AND e.kind IN ('completed', 'failed', 'aborted')"
        " AND (e.payload->>'throttled')::int > 0"
    )
    with engine.connect() as connection:
        row = connection.execute(query, {"run_id": run_id}).one()
    return RunThrottling(answers=int(row.answers), jobs=int(row.jobs))


_RESULTS = """
SELECT j.job_id, j.run_id, j.persona, j.question, j.identity, j.status, j.chat_id, j.error,
       j.http_status, j.line_count, j.started_at, j.finished_at,
       a.content AS final_answer, a.source AS answer_source,
       coalesce(q.sql, ARRAY[]::text[]) AS sql, coalesce(q.total_rows, ARRAY[]::int[]) AS total_rows
FROM jobs j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
LEFT JOIN LATERAL (
    SELECT array_agg(s.sql_query ORDER BY m.first_line) AS sql,
           array_agg(s.total_rows ORDER BY m.first_line) AS total_rows
    FROM sql_queries s
    JOIN messages m USING (job_id, attempt, message_id)
    WHERE s.job_id = j.job_id AND s.attempt = j.last_attempt
) q ON true
WHERE j.run_id = :run_id
ORDER BY j.submitted_at, j.job_id
"""


def run_results(engine: Engine, *, run_id: str) -> list[JobResult]:
    """Reads every job of a run with its final answer and SQL, in submission order."""
    with engine.connect() as connection:
        rows = connection.execute(text(_RESULTS), {"run_id": run_id}).all()
    return [_result(row._mapping) for row in rows]


def _result(row: Any) -> JobResult:
    return JobResult(
        job_id=row["job_id"],
        run_id=row["run_id"],
        persona=row["persona"],
        question=row["question"],
        identity=row["identity"],
        status=row["status"],
        chat_id=row["chat_id"],
        final_answer=row["final_answer"],
        answer_source=row["answer_source"],
        sql=tuple(row["sql"]),
        total_rows=tuple(row["total_rows"]),
        error=row["error"],
        http_status=row["http_status"],
        line_count=row["line_count"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def count_rows(engine: Engine, *, run_id: str, tables: Sequence[str]) -> dict[str, int]:
    """Counts a run's rows in archive tables keyed by ``job_id`` (for the report's footer)."""
    counts = {}
    with engine.connect() as connection:
        for table in tables:
            query = text(
                f'SELECT count(*) FROM "{table}" t JOIN jobs j'
                " USING (job_id) WHERE j.run_id = :run_id"
            )
            counts[table] = int(connection.execute(query, {"run_id": run_id}).scalar_one())
    return counts


@dataclass(frozen=True)
class PastQuestion:
    """A job of a past run as ``chatscribe rerun`` asks it again.

    Attributes:
        question, persona, chat_url, active_branch_name: As archived.
        session_settings: The job's ``sessionSettings`` (wire JSON object).
        run_name: The past run's name, if it had one.
    """

    question: str
    persona: str | None
    session_settings: dict[str, Any]
    chat_url: str
    active_branch_name: str | None
    run_name: str | None


_PAST_QUESTIONS = """
SELECT j.question, j.persona, j.session_settings, j.chat_url, j.active_branch_name,
       r.name AS run_name
FROM jobs j LEFT JOIN runs r ON r.run_id = j.run_id
WHERE j.run_id = :run_id AND j.question IS NOT NULL AND j.session_settings IS NOT NULL
ORDER BY j.submitted_at, j.job_id
"""


def past_questions(engine: Engine, *, run_id: str) -> list[PastQuestion]:
    """Returns: the run's jobs that have a question and an identity.

    In submission order (empty when the run is unknown).
    """
    with engine.connect() as connection:
        rows = connection.execute(text(_PAST_QUESTIONS), {"run_id": run_id}).all()
    return [PastQuestion(**row._asdict()) for row in rows]


def unfinished_job_ids(engine: Engine, *, run_id: str, statuses: Sequence[str]) -> list[str]:
    """Returns: the ids of the run's jobs whose status is one of ``statuses``, sorted.

    Raises:
        ArchiveUnavailableError: PostgreSQL cannot be reached.
        ArchiveSchemaError: The schema has no ``jobs`` table (``chatscribe db upgrade``).
    """
    query = text("SELECT job_id FROM jobs WHERE run_id = :run AND status = ANY(:statuses)")
    with translate_errors("read the run's jobs"), engine.connect() as connection:
        rows = connection.execute(query, {"run": run_id, "statuses": list(statuses)})
        return sorted(row.job_id for row in rows)
