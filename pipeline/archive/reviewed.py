"""Verdicts read back: each job's latest verdict, and reviewed truths for later runs.

A database module (SQLAlchemy). A job's verdict is its latest row of ``review_verdicts``
(highest ``seq``, any queue, any reviewer: a changed verdict supersedes the old one).

Reviewed truths (issue 26, "verdicts as truth"): for each (question, identity), the latest
single-answer verdict that says what the answer should be gives the expected result of later
runs of that question as that identity:

* the reviewer's expected value, when one was given (any verdict);
* else, for ``correct``, the reviewed job's own result (its last SQL query that returned rows).

``incorrect`` without an expected value says what is wrong, not what is right: no truth.
Truths from a run's own jobs are not used to score that run (its verdicts are its *reviewed*
accuracy, not a truth about it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa

from pipeline.transcript.result_compare import ExpectedResult

Key = tuple[str, str | None]
"""(question, identity): how runs of the same question are paired (``chatscribe diff``)."""


@dataclass(frozen=True)
class JobVerdict:
    """A job's latest verdict."""

    job_id: str
    verdict: str
    reviewer: str
    reviewed_at: datetime
    expected: dict[str, Any] | None
    seq: int


_LATEST: Final = """
SELECT DISTINCT ON (v.job_id) v.job_id, v.verdict, v.reviewer, v.created_at AS reviewed_at,
       v.expected, v.seq
FROM review_verdicts v WHERE v.job_id = ANY(:jobs) AND v.pair_job_id IS NULL
ORDER BY v.job_id, v.seq DESC
"""


def latest_verdicts(conn: sa.Connection, job_ids: list[str]) -> dict[str, JobVerdict]:
    """Returns: ``job_id → latest single-answer verdict`` for the reviewed jobs among ids."""
    if not job_ids:
        return {}
    rows = conn.execute(sa.text(_LATEST), {"jobs": sorted(set(job_ids))})
    return {r.job_id: JobVerdict(**r._mapping) for r in rows}


_TRUTHS: Final = """
SELECT DISTINCT ON (j.question, j.identity) j.question, j.identity, v.verdict, v.expected,
       r.rows AS result_rows
FROM review_verdicts v
JOIN jobs j ON j.job_id = v.job_id
LEFT JOIN LATERAL (
    SELECT s.rows FROM sql_queries s JOIN messages m USING (job_id, attempt, message_id)
    WHERE s.job_id = v.job_id AND s.attempt = v.attempt AND s.rows IS NOT NULL
      AND s.error IS NULL
    ORDER BY m.first_line DESC LIMIT 1
) r ON true
WHERE v.pair_job_id IS NULL AND j.run_id IS DISTINCT FROM :run_id
  AND (v.expected IS NOT NULL OR v.verdict = 'correct')
  AND v.seq = (SELECT max(w.seq) FROM review_verdicts w
               WHERE w.job_id = v.job_id AND w.pair_job_id IS NULL)
ORDER BY j.question, j.identity, v.seq DESC
"""


def reviewed_truths(conn: sa.Connection, *, run_id: str | None) -> dict[Key, ExpectedResult]:
    """Returns: ``(question, identity) → expected result`` from verdicts (module docstring).

    Args:
        conn: Any connection.
        run_id: The run to be scored: its own jobs' verdicts are left out (None: all used).
    """
    out: dict[Key, ExpectedResult] = {}
    for r in conn.execute(sa.text(_TRUTHS), {"run_id": run_id}):
        if r.expected is not None:
            out[(r.question or "", r.identity)] = ExpectedResult.model_validate(r.expected)
        elif isinstance(r.result_rows, list):
            out[(r.question or "", r.identity)] = ExpectedResult(rows=r.result_rows)
    return out


_BY_RUN: Final = """
SELECT j.run_id, count(*) FILTER (WHERE v.verdict = 'correct') AS hits, count(*) AS reviewed
FROM (SELECT DISTINCT ON (job_id) job_id, verdict FROM review_verdicts
      WHERE pair_job_id IS NULL ORDER BY job_id, seq DESC) v
JOIN jobs j USING (job_id)
WHERE v.verdict IN ('correct', 'incorrect')
GROUP BY j.run_id
"""


def reviewed_by_run(conn: sa.Connection) -> dict[str, tuple[int, int]]:
    """Returns: ``run_id → (jobs reviewed correct, jobs reviewed correct or incorrect)``."""
    return {r.run_id: (r.hits, r.reviewed) for r in conn.execute(sa.text(_BY_RUN))}
