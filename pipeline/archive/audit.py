"""``chatscribe audit``: who asked what, when, as which identity, and what the SQL touched.

A database module (SQLAlchemy) that reads one :class:`AuditEntry` per job (its last attempt):
time asked, identity from ``sessionSettings`` (``externalId`` or ``internalId``, groups, user
attributes, security context: the row-level-security identity the queries ran under), the
question, status, whether it was aborted (status or an ``__aborted__`` line), the answer and
whether it came from a ``final`` line, each SQL query with the views and members it touched
(``sql_queries.views``/``members``, parsed by sqlglot when written, so they survive retention),
rows returned, tool errors and stream errors, and the job's latest reviewer verdict (who, when:
:mod:`pipeline.archive.reviewed`; a changed verdict supersedes the old). Formats:
:mod:`pipeline.reports.audit_formats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa


@dataclass(frozen=True)
class AuditFilter:
    """Which jobs to report.

    Asked in ``[since, until)``, by ``user`` (owner key such as ``external:analyst-1``, or a
    bare externalId/internalId), touching ``view``.
    """

    since: datetime | None = None
    until: datetime | None = None
    user: str | None = None
    view: str | None = None


@dataclass
class AuditEntry:
    """One job as an auditor sees it."""

    asked_at: datetime | None
    job_id: str
    run_id: str
    persona: str | None
    identity: str | None
    external_id: str | None
    internal_id: str | None
    groups: list[str]
    user_attributes: dict[str, Any]
    security_context: dict[str, Any] | None
    question: str | None
    status: str
    aborted: bool
    answer: str | None
    answer_source: str | None
    error: str | None
    stream_errors: list[str]
    queries: list[dict[str, Any]] = field(default_factory=list)
    tool_errors: list[dict[str, Any]] = field(default_factory=list)
    verdict: str | None = None
    reviewer: str | None = None
    reviewed_at: datetime | None = None

    @property
    def views(self) -> list[str]:
        """Every view the job's SQL touched, sorted."""
        return sorted({v for q in self.queries for v in q.get("views") or ()})

    @property
    def members(self) -> list[str]:
        """Every member (``view.member``) the job's SQL touched, sorted."""
        return sorted({m for q in self.queries for m in q.get("members") or ()})

    @property
    def rows_returned(self) -> int:
        """Sum of ``totalRows`` over the job's queries."""
        return sum(q.get("total_rows") or 0 for q in self.queries)


_ENTRIES = """
WITH page AS (
    SELECT j.*, coalesce(j.started_at, j.submitted_at) AS asked_at FROM jobs j
    WHERE {where}
    ORDER BY asked_at NULLS LAST, j.job_id
    LIMIT :limit OFFSET :offset
)
SELECT j.asked_at, j.job_id, j.run_id, j.persona,
       j.identity, j.session_settings AS ss, j.question, j.status, j.error,
       a.content AS answer, a.source AS answer_source, coalesce(a.stream_errors, '{{}}') AS se,
       coalesce(q.queries, '[]') AS queries, coalesce(t.errors, '[]') AS tool_errors,
       (j.status = 'aborted' OR EXISTS (
            SELECT 1 FROM messages m WHERE m.job_id = j.job_id
            AND m.attempt = j.last_attempt AND m.message_id = '__aborted__')) AS aborted,
       rv.verdict, rv.reviewer, rv.created_at AS reviewed_at
FROM page j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object(
        'sql', s.sql_query, 'title', s.query_title, 'views', s.views, 'members', s.members,
        'total_rows', s.total_rows, 'returned_rows', s.returned_rows, 'error', s.error,
        'schema', s.result_schema, 'rows', s.rows, 'vega_spec', s.vega_spec)
        ORDER BY s.message_id) AS queries
    FROM sql_queries s WHERE s.job_id = j.job_id AND s.attempt = j.last_attempt
) q ON true
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('tool', t.name, 'error', coalesce(t.error #>> '{{}}',
        t.payload_error))) AS errors
    FROM tool_calls t WHERE t.job_id = j.job_id AND t.attempt = j.last_attempt
      AND (t.error IS NOT NULL OR t.payload_error IS NOT NULL)
) t ON true
LEFT JOIN LATERAL (
    SELECT v.verdict, v.reviewer, v.created_at FROM review_verdicts v
    WHERE v.job_id = j.job_id AND v.pair_job_id IS NULL ORDER BY v.seq DESC LIMIT 1
) rv ON true
ORDER BY j.asked_at NULLS LAST, j.job_id
"""
_COUNT = "SELECT count(*) FROM jobs j WHERE {where}"


def _where(flt: AuditFilter) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = ["true"]
    params: dict[str, Any] = {}
    asked = "coalesce(j.started_at, j.submitted_at)"
    if flt.since is not None:
        clauses.append(f"{asked} >= :since")
        params["since"] = flt.since
    if flt.until is not None:
        clauses.append(f"{asked} < :until")
        params["until"] = flt.until
    if flt.user is not None:
        clauses.append(
            "(j.identity = :user OR j.session_settings ->> 'externalId' = :user"
            " OR j.session_settings ->> 'internalId' = :user)"
        )
        params["user"] = flt.user
    if flt.view is not None:
        clauses.append(
            "EXISTS (SELECT 1 FROM sql_queries v WHERE v.job_id = j.job_id"
            " AND v.attempt = j.last_attempt AND :view = ANY(v.views))"
        )
        params["view"] = flt.view
    return " AND ".join(clauses), params


def read_entries(
    conn: sa.Connection,
    *,
    flt: AuditFilter,
    limit: int | None = None,
    offset: int = 0,
) -> list[AuditEntry]:
    """Reads the audit entries matching ``flt``, oldest first.

    Args:
        conn: A connection.
        flt: Which jobs.
        limit: The most entries of the page (default: all); the page is chosen on ``jobs``
            before the answers, queries and tool errors are joined to it.
        offset: How many matching entries to skip before the page (negative counts as 0).

    Returns:
        The entries, oldest first.
    """
    where, params = _where(flt)
    query = _ENTRIES.format(where=where)
    params |= {"limit": limit, "offset": max(offset, 0)}
    return [_entry(row) for row in conn.execute(sa.text(query), params)]


def count_entries(conn: sa.Connection, *, flt: AuditFilter) -> int:
    """Returns: how many jobs match ``flt`` (the number of entries :func:`read_entries` reads)."""
    where, params = _where(flt)
    query = _COUNT.format(where=where)
    return int(conn.execute(sa.text(query), params).scalar_one())


def _entry(row: Any) -> AuditEntry:
    ss: dict[str, Any] = row.ss or {}
    attributes = {a.get("name"): a.get("value") for a in ss.get("userAttributes") or ()}
    return AuditEntry(
        asked_at=row.asked_at,
        job_id=row.job_id,
        run_id=row.run_id,
        persona=row.persona,
        identity=row.identity,
        external_id=ss.get("externalId"),
        internal_id=ss.get("internalId"),
        groups=list(ss.get("groups") or ()),
        user_attributes=attributes,
        security_context=ss.get("securityContext"),
        question=row.question,
        status=row.status,
        aborted=bool(row.aborted),
        answer=row.answer,
        answer_source=row.answer_source,
        error=row.error,
        stream_errors=list(row.se or ()),
        queries=list(row.queries or ()),
        tool_errors=list(row.tool_errors or ()),
        verdict=row.verdict,
        reviewer=row.reviewer,
        reviewed_at=row.reviewed_at,
    )
