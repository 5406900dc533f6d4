"""SIGKILL a worker mid-run: every job still ends once, with every line the Chat API sent.

Two workers share the run; once ``worker-a`` drives a job whose lines reach the archive, it is
killed (no shutdown, no flush, no commit). After the group's session timeout ``worker-b`` gets
its partitions, reads the jobs' own events back and continues them as attempt 2: fetching the
thread's state when the chat id was seen, asking again otherwise. A state fetch has no
``final`` line: its ``answers`` row is read from the thread's state (``source = 'state'``).
The killed attempt 1 gets its terminal event from the takeover: ``failed`` with ``error_type``
``AttemptSuperseded``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.faults.fault_support import TERMINAL, FaultStack, StackFactory

pytestmark = pytest.mark.integration

JOBS = 16
LINE_DELAY_MS = 150
CONCURRENCY = 4


def test_fault_worker_sigkill_mid_run_loses_no_job_and_no_line(fault_stack: StackFactory) -> None:
    with fault_stack(workers=2, line_delay_ms=LINE_DELAY_MS, concurrency=CONCURRENCY) as stack:
        run_id = stack.submit_run(JOBS)
        running_on_a = (
            "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
            " AND worker_id = 'worker-a' AND status = 'running' AND first_line_at IS NOT NULL"
        )
        stack.wait_until(
            lambda: stack.rows(running_on_a, run=run_id)[0]["n"] >= 2,
            timeout_s=90,
            what="worker-a to stream two jobs",
        )
        worker_a = stack.workers[0]
        worker_a.kill()
        stack.gone.add(worker_a.name)
        stack.wait_archived(run_id, JOBS, timeout_s=150)
        numbers = stack.audit(run_id, JOBS)
        print(f"\nworker SIGKILL: {numbers}")
        stack.wait_until(
            lambda: all(j["source"] is not None for j in _answers(stack, run_id)),
            timeout_s=30,
            what="every job's answers row",
        )
        by_job = _answers(stack, run_id)
        superseded = stack.rows(_SUPERSEDED, run=run_id)[0]["n"]
    assert superseded == numbers.taken_over  # each lost attempt 1 ends as AttemptSuperseded
    assert numbers.taken_over >= 2 and numbers.state_fetched >= 1
    for job in by_job:
        assert job["status"] in TERMINAL
        if job["last_attempt"] == 1:
            assert job["status"] == "completed", job
            assert job["source"] == "final", job
        else:  # taken over: the thread's state answered, or the turn died with the worker
            assert job["worker_id"] == "worker-b", job
            ok = job["status"] == "completed" or job["error_type"] == "TurnInterrupted"
            assert ok, job
        if job["earlier_lines"] and job["chats"] == 1:  # a state fetch: no `final` line
            expected = "state" if job["status"] == "completed" else "none"
            assert job["source"] == expected and bool(job["content"]) == (expected == "state"), job


_SUPERSEDED = """
SELECT count(*) AS n FROM {s}.job_events e JOIN {s}.jobs j USING (job_id)
 WHERE j.run_id = %(run)s AND e.attempt = 1 AND e.kind = 'failed'
   AND e.payload->>'error_type' = 'AttemptSuperseded'
"""
_ANSWERS = """
SELECT j.job_id, j.status, j.last_attempt, j.error_type, j.worker_id, a.source, a.content,
       (SELECT count(DISTINCT l.chat_id) FROM {s}.stream_lines l
         WHERE l.job_id = j.job_id) AS chats,
       (SELECT count(*) FROM {s}.stream_lines l
         WHERE l.job_id = j.job_id AND l.attempt < j.last_attempt) AS earlier_lines
  FROM {s}.jobs j
  LEFT JOIN {s}.answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
 WHERE j.run_id = %(run)s
"""


def _answers(stack: FaultStack, run_id: str) -> list[dict[str, Any]]:
    """Returns: each job of the run with its last attempt's answer source and content."""
    return stack.rows(_ANSWERS, run=run_id)
