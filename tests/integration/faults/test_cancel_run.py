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

import pytest

from tests.integration.faults.fault_support import StackFactory, make_jobs, submit
from tests.stack_support import ROOT

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


def test_cancel_run_aborts_every_unfinished_job_of_the_run(fault_stack: StackFactory) -> None:
    with fault_stack(workers=2, line_delay_ms=LINE_DELAY_MS, concurrency=CONCURRENCY) as stack:
        jobs = make_jobs(JOBS, stack.chat_url)
        other = make_jobs(1, stack.chat_url)  # another run: left alone
        run_id = jobs[0].run_id
        submit(stack.settings, [*jobs, *other])
        stack.wait_until(
            lambda: stack.rows(_STREAMING, run=run_id)[0]["n"] >= 2,
            timeout_s=90,
            what="two jobs of the run to stream",
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline.cli.app",
                "cancel",
                "--run",
                run_id,
                "--reason",
                REASON,
            ],
            env=stack.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert f"cancellation sent for {JOBS} job(s)" in done.stderr
        stack.wait_archived(run_id, JOBS, timeout_s=90)
        stack.wait_archived(other[0].run_id, 1, timeout_s=90)
        numbers = stack.audit(run_id, JOBS)
        print(f"\ncancel --run: {numbers}")
        rows = stack.rows(_JOBS, run=run_id)
        other_rows = stack.rows(_JOBS, run=other[0].run_id)
    assert numbers.outcomes == {"aborted": JOBS}
    assert numbers.taken_over == 0
    assert all(REASON in (row["error"] or "") for row in rows), rows
    assert [row["status"] for row in other_rows] == ["completed"]
    # The sent log holds the other run's stream too; the aborted streams are all stored.
    assert numbers.streams_sent >= 3 and numbers.streams_unrecorded == 1
    assert numbers.lines_sent_not_stored == other_rows[0]["line_count"]
