"""``chatscribe diff RUN_A RUN_B``: what changed between two runs of the same questions.

Jobs are paired by (question, identity); the n-th job of a pair in run A meets the n-th in run B.
Per pair: whether the final answer text, the SQL (whitespace-insensitive) and the result changed.
The result of a job is its last SQL query that returned rows; results are compared by
:func:`pipeline.transcript.result_compare.results_match` (bag of rows, column order free, row order
only when both queries order, numbers within a tolerance). A pair is

* ``same``: answer, SQL and result unchanged; ``changed``: anything changed;
* ``new``: only in B; ``missing``: only in A.

A run *regressed* when a pair's result changed, when B lost a result A had (no SQL result, or
the job did not complete), or when a pair is missing from B. New pairs and answer-only changes
are reported but do not regress, so CI can gate an agent change on the exit code.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import sqlalchemy as sa

from pipeline.errors import RunNotFoundError
from pipeline.transcript.result_compare import REL_TOL, Result, normal_rows, results_match
from pipeline.transcript.sql_refs import orders_rows

CaseState = Literal["same", "changed", "new", "missing"]


@dataclass(frozen=True)
class JobSnapshot:
    """What the archive holds of one job's last attempt, for comparison."""

    job_id: str
    question: str
    identity: str | None
    persona: str | None
    status: str
    answer: str | None
    answer_source: str | None
    queries: tuple[dict[str, Any], ...] = ()
    chat_id: str | None = None

    @property
    def sql(self) -> tuple[str, ...]:
        """The SQL texts, in stream order."""
        return tuple(q["sql"] for q in self.queries if q.get("sql"))

    @property
    def result_query(self) -> dict[str, Any] | None:
        """The last query that returned rows (no error), or None."""
        done = [q for q in self.queries if q.get("rows") is not None and not q.get("error")]
        return done[-1] if done else None

    def result(self) -> Result | None:
        """Returns: the comparable result of :attr:`result_query`, or None."""
        query = self.result_query
        if query is None:
            return None
        return Result(
            rows=normal_rows(query.get("rows")),
            total_rows=query.get("total_rows"),
            ordered=orders_rows(query.get("sql")),
        )


@dataclass
class CaseDiff:
    """One (question, identity) pair of the two runs."""

    question: str
    identity: str | None
    state: CaseState
    answer_changed: bool = False
    sql_changed: bool = False
    result_changed: bool = False
    regressed: bool = False
    reasons: list[str] = field(default_factory=list)
    a: dict[str, Any] | None = None
    b: dict[str, Any] | None = None


@dataclass
class RunDiff:
    """The comparison of two runs: cases and their counts."""

    run_a: str
    run_b: str
    cases: list[CaseDiff]

    @property
    def counts(self) -> dict[str, int]:
        """Cases per state: ``same``, ``changed``, ``new``, ``missing``."""
        found = Counter(case.state for case in self.cases)
        return {state: found.get(state, 0) for state in ("same", "changed", "new", "missing")}

    @property
    def regressed(self) -> bool:
        """True when any case regressed (module docstring)."""
        return any(case.regressed for case in self.cases)

    def to_json(self) -> dict[str, Any]:
        """Returns: ``{"run_a", "run_b", "summary", "regressed", "cases"}``.

        ``same`` cases come without their detail.
        """
        cases = []
        for case in self.cases:
            out = asdict(case)
            if case.state == "same":
                out.pop("a"), out.pop("b")
            cases.append(out)
        summary = {**self.counts, "regressed": sum(c.regressed for c in self.cases)}
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "summary": summary,
            "regressed": self.regressed,
            "cases": cases,
        }


def _text(value: str | None) -> str:
    return " ".join((value or "").split())


def _brief(job: JobSnapshot) -> dict[str, Any]:
    query = job.result_query or {}
    rows = query.get("rows")
    return {
        "job_id": job.job_id,
        "status": job.status,
        "answer": job.answer,
        "answer_source": job.answer_source,
        "sql": list(job.sql),
        "rows": rows[:10] if isinstance(rows, list) else None,
        "total_rows": query.get("total_rows"),
    }


def compare_jobs(a: JobSnapshot, b: JobSnapshot, *, rel_tol: float = REL_TOL) -> CaseDiff:
    """Compares one pair (module docstring); pure."""
    case = CaseDiff(a.question, a.identity, "same", a=_brief(a), b=_brief(b))
    case.answer_changed = _text(a.answer) != _text(b.answer)
    case.sql_changed = [_text(s) for s in a.sql] != [_text(s) for s in b.sql]
    ra, rb = a.result(), b.result()
    if ra is not None and rb is not None:
        case.result_changed = not results_match(ra, rb, rel_tol=rel_tol)
        case.regressed = case.result_changed
    elif ra is not None:
        case.result_changed = case.regressed = True
        case.reasons.append("run B has no SQL result")
    elif rb is not None:
        case.result_changed = True
        case.reasons.append("run B has a SQL result run A lacked")
    if a.status == "completed" and b.status != "completed":
        case.regressed = True
        case.reasons.append(f"status {a.status} -> {b.status}")
    if case.result_changed and ra is not None and rb is not None:
        case.reasons.append("result rows differ")
    if case.answer_changed or case.sql_changed or case.result_changed or a.status != b.status:
        case.state = "changed"
    return case


def diff_runs(
    run_a: str,
    jobs_a: Sequence[JobSnapshot],
    run_b: str,
    jobs_b: Sequence[JobSnapshot],
    *,
    rel_tol: float = REL_TOL,
) -> RunDiff:
    """Pairs the jobs of two runs by (question, identity) and compares each pair; pure."""
    by_key_b: dict[tuple[str, str | None], list[JobSnapshot]] = defaultdict(list)
    for job in jobs_b:
        by_key_b[(job.question, job.identity)].append(job)
    cases = []
    for job in jobs_a:
        waiting = by_key_b.get((job.question, job.identity))
        if waiting:
            cases.append(compare_jobs(job, waiting.pop(0), rel_tol=rel_tol))
        else:
            missing = CaseDiff(job.question, job.identity, "missing", regressed=True, a=_brief(job))
            missing.reasons.append("not asked in run B")
            cases.append(missing)
    for left in by_key_b.values():
        cases += [CaseDiff(j.question, j.identity, "new", b=_brief(j)) for j in left]
    return RunDiff(run_a, run_b, cases)


_SNAPSHOTS = """
SELECT j.job_id, j.question, j.identity, j.persona, j.status, j.chat_id,
       a.content AS answer, a.source AS answer_source, coalesce(q.queries, '[]') AS queries
FROM jobs j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('sql', s.sql_query, 'rows', s.rows,
                     'total_rows', s.total_rows, 'error', s.error) ORDER BY m.first_line) AS queries
    FROM sql_queries s
    JOIN messages m USING (job_id, attempt, message_id)
    WHERE s.job_id = j.job_id AND s.attempt = j.last_attempt
) q ON true
WHERE j.run_id = :run_id
ORDER BY j.submitted_at, j.job_id
"""


def load_run(bind: sa.Engine | sa.Connection, *, run_id: str) -> list[JobSnapshot]:
    """Reads a run's jobs for comparison, in submission order.

    Args:
        bind: The archive's engine (:func:`pipeline.archive.engine.create_engine`), or a
            connection of it (the console reads inside its read-only transaction).
        run_id: The run.

    Raises:
        RunNotFoundError: The run has no jobs.
    """
    if isinstance(bind, sa.Connection):
        rows = bind.execute(sa.text(_SNAPSHOTS), {"run_id": run_id}).all()
    else:
        with bind.connect() as conn:
            rows = conn.execute(sa.text(_SNAPSHOTS), {"run_id": run_id}).all()
    if not rows:
        raise RunNotFoundError(run_id)
    return [
        JobSnapshot(
            job_id=r.job_id,
            question=r.question or "",
            identity=r.identity,
            persona=r.persona,
            status=r.status,
            answer=r.answer,
            answer_source=r.answer_source,
            queries=tuple(r.queries if isinstance(r.queries, list) else json.loads(r.queries)),
            chat_id=r.chat_id,
        )
        for r in rows
    ]
