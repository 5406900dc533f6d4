"""Dashboard views for BI tools (docs/dashboards.md; ops/grafana/archive.json).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Plain views over the archive, each describing a job by its current attempt
(``jobs.last_attempt``); ``day`` is the UTC day the job started (or was submitted), a
``timestamptz`` so Grafana can use it as the time column. Latencies are in seconds.
"""

from __future__ import annotations

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

DAY = "date_trunc('day', coalesce(j.started_at, j.submitted_at, j.updated_at), 'UTC')"

VIEWS: dict[str, str] = {
    "dash_job_facts": f"""
SELECT j.job_id, j.run_id, {DAY} AS day, coalesce(j.started_at, j.submitted_at) AS asked_at,
       j.identity, j.persona, j.question, j.status, a.source AS answer_source,
       extract(epoch FROM j.first_line_at - j.started_at) AS first_line_s,
       extract(epoch FROM l.received_at - j.started_at) AS final_answer_s,
       extract(epoch FROM j.finished_at - j.started_at) AS duration_s,
       (SELECT count(*) FROM sql_queries q
        WHERE q.job_id = j.job_id AND q.attempt = j.last_attempt) AS sql_queries,
       (SELECT count(*) FROM tool_calls t
        WHERE t.job_id = j.job_id AND t.attempt = j.last_attempt AND t.error IS NOT NULL)
           AS tool_errors
FROM jobs j
LEFT JOIN answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
LEFT JOIN stream_lines l
       ON l.job_id = a.job_id AND l.attempt = a.attempt AND l.line_no = a.line_no
""",
    "dash_usage_daily": f"""
SELECT {DAY} AS day, j.identity, coalesce(v.view, '(no SQL)') AS view,
       count(DISTINCT j.job_id) AS jobs, count(DISTINCT j.question) AS questions,
       count(q.message_id) AS sql_queries, coalesce(sum(q.total_rows), 0) AS total_rows
FROM jobs j
LEFT JOIN sql_queries q ON q.job_id = j.job_id AND q.attempt = j.last_attempt
LEFT JOIN LATERAL unnest(q.views) AS v(view) ON true
GROUP BY 1, 2, 3
""",
    "dash_latency_daily": """
SELECT day, count(*) AS jobs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY first_line_s) AS first_line_p50_s,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY first_line_s) AS first_line_p90_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY first_line_s) AS first_line_p99_s,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY final_answer_s) AS final_answer_p50_s,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY final_answer_s) AS final_answer_p90_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY final_answer_s) AS final_answer_p99_s
FROM dash_job_facts
GROUP BY day
""",
    "dash_outcomes_daily": """
SELECT day, count(*) AS jobs,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'aborted') AS aborted,
       count(*) FILTER (WHERE status IN ('submitted', 'running')) AS in_flight,
       round(count(*) FILTER (WHERE status = 'failed')::numeric / count(*), 4) AS failure_rate,
       round(count(*) FILTER (WHERE status = 'aborted')::numeric / count(*), 4) AS abort_rate,
       count(*) FILTER (WHERE answer_source = 'fallback') AS fallback_answers,
       count(*) FILTER (WHERE tool_errors > 0) AS jobs_with_tool_errors
FROM dash_job_facts
GROUP BY day
""",
    "dash_top_questions": """
SELECT question, count(*) AS asked, count(DISTINCT identity) AS identities,
       count(DISTINCT run_id) AS runs, max(asked_at) AS last_asked_at,
       round(count(*) FILTER (WHERE status = 'completed')::numeric / count(*), 4)
           AS completed_rate
FROM dash_job_facts
GROUP BY question
""",
    "dash_tool_errors": f"""
SELECT {DAY} AS day, t.job_id, j.run_id, j.identity, j.question, t.attempt, t.message_id,
       t.name AS tool_name, t.kind, coalesce(t.error #>> '{{}}', t.payload_error) AS error
FROM tool_calls t
JOIN jobs j ON j.job_id = t.job_id AND j.last_attempt = t.attempt
WHERE t.error IS NOT NULL OR t.payload_error IS NOT NULL
""",
    "dash_row_counts": f"""
SELECT {DAY} AS day, coalesce(v.view, '(unknown)') AS view, count(*) AS sql_queries,
       avg(q.total_rows)::double precision AS avg_total_rows, max(q.total_rows) AS max_total_rows,
       coalesce(sum(q.returned_rows), 0) AS returned_rows,
       count(*) FILTER (WHERE q.total_rows = 0) AS empty_results,
       count(*) FILTER (WHERE q.error IS NOT NULL) AS failed_queries
FROM sql_queries q
JOIN jobs j ON j.job_id = q.job_id AND j.last_attempt = q.attempt
LEFT JOIN LATERAL unnest(q.views) AS v(view) ON true
GROUP BY 1, 2
""",
}


def upgrade() -> None:
    for name, query in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {query}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW IF EXISTS {name}")
