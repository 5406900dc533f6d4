"""SIGKILL a worker mid-run: every job still ends once, with every line the Chat API sent.

Two workers share the run; once ``worker-a`` drives a job whose lines reach the archive, it is
killed (no shutdown, no flush, no commit). After the group's session timeout ``worker-b`` gets
its partitions, reads the jobs' own events back and continues them as attempt 2: fetching the
thread's state when the chat id was seen, asking again otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_support import (
    TERMINAL,
    audit,
    make_jobs,
    query,
    running_stack,
    stack_settings,
    submit,
    wait_archived,
    wait_until,
)

pytestmark = pytest.mark.integration

JOBS = 16
LINE_DELAY_MS = 150
CONCURRENCY = 4


def test_fault_worker_sigkill_mid_run_loses_no_job_and_no_line(
    kafka_bootstrap: str, database_url: str, pg_conninfo: str, tmp_path: Path
) -> None:
    settings = stack_settings(kafka_bootstrap, database_url, worker_concurrency=CONCURRENCY)
    schema = settings.database_schema
    with running_stack(
        settings, pg_conninfo, tmp_path, workers=2, line_delay_ms=LINE_DELAY_MS
    ) as stack:
        jobs = make_jobs(JOBS, stack.chat_url)
        run_id = jobs[0].run_id
        submit(settings, jobs)
        running_on_a = (
            "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
            " AND worker_id = 'worker-a' AND status = 'running' AND first_line_at IS NOT NULL"
        )
        wait_until(
            lambda: query(pg_conninfo, schema, running_on_a, run=run_id)[0]["n"] >= 2,
            timeout_s=90,
            what="worker-a to stream two jobs",
            stack=stack,
        )
        worker_a = stack.workers[0]
        worker_a.kill()
        stack.gone.add(worker_a.name)
        wait_archived(pg_conninfo, schema, run_id, JOBS, timeout_s=150, check=stack.check)
        numbers = audit(pg_conninfo, schema, run_id, JOBS, stack.sent_log)
        print(f"\nworker SIGKILL: {numbers}")
        by_job = query(
            pg_conninfo,
            schema,
            "SELECT job_id, status, last_attempt, error_type, worker_id FROM {s}.jobs"
            " WHERE run_id = %(run)s",
            run=run_id,
        )
    assert numbers.taken_over >= 2
    for job in by_job:
        assert job["status"] in TERMINAL
        if job["last_attempt"] == 1:
            assert job["status"] == "completed", job
        else:  # taken over: the thread's state answered, or the turn died with the worker
            assert job["worker_id"] == "worker-b", job
            ok = job["status"] == "completed" or job["error_type"] == "TurnInterrupted"
            assert ok, job
