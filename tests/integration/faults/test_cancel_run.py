"""``chatscribe cancel --run RUN_ID`` on a real stack: every unfinished job of the run aborts.

Issue 4, "Cancellation and deadlines": the command reads the run's unfinished jobs from the
archive and publishes a cancellation for each; the worker driving a job calls the abort
endpoint and the job ends as aborted, and a job not started yet is recorded aborted without
calling the Chat API. The Chat API is slowed down (``CHATSCRIBE_LINE_DELAY_MS``) so that the
run is mid-way when the command runs: some jobs stream, the others wait.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fault_support import (
    ROOT,
    audit,
    make_jobs,
    process_env,
    query,
    running_stack,
    stack_settings,
    submit,
    wait_archived,
    wait_until,
)

pytestmark = pytest.mark.integration

JOBS = 10
CONCURRENCY = 2
LINE_DELAY_MS = 700
REASON = "operator stop"
_STREAMING = (
    "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s AND status = 'running'"
    " AND first_line_at IS NOT NULL"
)
_JOBS = (
    "SELECT job_id, status, error, last_attempt, line_count FROM {s}.jobs WHERE run_id = %(run)s"
)


def test_cancel_run_aborts_every_unfinished_job_of_the_run(
    kafka_bootstrap: str, database_url: str, pg_conninfo: str, tmp_path: Path
) -> None:
    settings = stack_settings(kafka_bootstrap, database_url, worker_concurrency=CONCURRENCY)
    schema = settings.database_schema
    with running_stack(
        settings, pg_conninfo, tmp_path, workers=2, line_delay_ms=LINE_DELAY_MS
    ) as stack:
        jobs = make_jobs(JOBS, stack.chat_url)
        other = make_jobs(1, stack.chat_url)  # another run: left alone
        run_id = jobs[0].run_id
        submit(settings, [*jobs, *other])
        wait_until(
            lambda: query(pg_conninfo, schema, _STREAMING, run=run_id)[0]["n"] >= 2,
            timeout_s=90,
            what="two jobs of the run to stream",
            stack=stack,
        )
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "cancel", "--run", run_id, "--reason", REASON],
            env=process_env(settings),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert f"cancellation sent for {JOBS} job(s)" in done.stderr
        wait_archived(pg_conninfo, schema, run_id, JOBS, timeout_s=90, check=stack.check)
        wait_archived(pg_conninfo, schema, other[0].run_id, 1, timeout_s=90, check=stack.check)
        numbers = audit(pg_conninfo, schema, run_id, JOBS, stack.sent_log)
        print(f"\ncancel --run: {numbers}")
        rows = query(pg_conninfo, schema, _JOBS, run=run_id)
        other_rows = query(pg_conninfo, schema, _JOBS, run=other[0].run_id)
    assert numbers.outcomes == {"aborted": JOBS}
    assert numbers.taken_over == 0
    assert all(REASON in (row["error"] or "") for row in rows), rows
    assert [row["status"] for row in other_rows] == ["completed"]
    # The sent log holds the other run's stream too; the aborted streams are all stored.
    assert numbers.streams_sent >= 3 and numbers.streams_unrecorded == 1
    assert numbers.lines_sent_not_stored == other_rows[0]["line_count"]
