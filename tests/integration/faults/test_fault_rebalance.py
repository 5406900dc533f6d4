"""A worker joining, and a worker leaving (SIGTERM), a busy consumer group mid-run.

Issue 4, "Scale-out": a worker joining or leaving rebalances without losing or duplicating a
job. Two workers drive a run four streams each; a third joins while they stream, and must get
partitions and run jobs; then one worker is stopped with SIGTERM while it streams: it finishes
its running jobs (faust's ``stream_wait_empty``), commits, and its partitions go to the others.
Neither rebalance makes a job run twice (no second attempt). The audit
(:func:`fault_support.audit`) then checks that every job has exactly one final outcome and that
every stored line is one the Chat API sent, once.

Jobs that outlast the rebalance's grace (:data:`pipeline.worker.group.HANDOVER_GRACE_S`) are
handed over instead of holding the whole group: their record is published again, and the next
owner ends the attempt as superseded and continues it by fetching the thread's state.
"""

from __future__ import annotations

import pytest

from tests.integration.faults.fault_support import FaultStack, StackFactory

pytestmark = pytest.mark.integration

JOBS = 60
CONCURRENCY = 4
LINE_DELAY_MS = 120
_BY_WORKER = (
    "SELECT worker_id, count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
    " AND first_line_at IS NOT NULL GROUP BY worker_id"
)


def _jobs_by_worker(stack: FaultStack, run_id: str) -> dict[str, int]:
    rows = stack.rows(_BY_WORKER, run=run_id)
    return {row["worker_id"]: row["n"] for row in rows}


@pytest.mark.timeout(240)
def test_fault_rebalance_worker_joins_and_leaves_mid_run(fault_stack: StackFactory) -> None:
    with fault_stack(workers=2, line_delay_ms=LINE_DELAY_MS, concurrency=CONCURRENCY) as stack:
        run_id = stack.submit_run(JOBS)
        stack.wait_until(
            lambda: len(_jobs_by_worker(stack, run_id)) == 2,
            timeout_s=90,
            what="both workers to stream",
        )
        stack.start_worker("worker-c")
        stack.wait_until(
            lambda: "worker-c" in _jobs_by_worker(stack, run_id),
            timeout_s=60,
            what="the joining worker-c to stream a job",
        )
        streaming_on_a = (
            "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s AND status = 'running'"
            " AND worker_id = 'worker-a' AND first_line_at IS NOT NULL"
        )
        stack.wait_until(
            lambda: stack.rows(streaming_on_a, run=run_id)[0]["n"] >= 1,
            timeout_s=60,
            what="worker-a to stream a job after the join",
        )
        leaving = stack.workers[0]  # SIGTERM while it streams: it finishes its jobs, then leaves
        assert leaving.stop() == 0, f"worker-a did not stop cleanly:\n{leaving.log()}"
        stack.gone.add(leaving.name)
        stack.wait_archived(run_id, JOBS, timeout_s=120)
        numbers = stack.audit(run_id, JOBS)
        by_worker = _jobs_by_worker(stack, run_id)
        print(f"\nrebalance join+leave: {numbers}\njobs streamed by worker: {by_worker}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0 and numbers.streams_unrecorded == 0
    assert numbers.taken_over == 0  # nobody ran a job a second time
    assert set(by_worker) == {"worker-a", "worker-b", "worker-c"}


HANDOVER_JOBS = 6
HANDOVER_LINE_DELAY_MS = 900  # jobs of 13 to 28 s: longer than the grace
_HANDED_OVER = """
SELECT j.job_id, j.last_attempt, a.source, a.content,
       (SELECT count(*) FROM {s}.job_events e WHERE e.job_id = j.job_id AND e.attempt = 1
           AND e.payload->>'error_type' = 'AttemptSuperseded') AS superseded
  FROM {s}.jobs j
  LEFT JOIN {s}.answers a ON a.job_id = j.job_id AND a.attempt = j.last_attempt
 WHERE j.run_id = %(run)s AND j.last_attempt > 1
"""


@pytest.mark.timeout(240)
def test_fault_rebalance_hands_over_jobs_that_outlast_the_grace(fault_stack: StackFactory) -> None:
    with fault_stack(workers=2, line_delay_ms=HANDOVER_LINE_DELAY_MS, concurrency=2) as stack:
        run_id = stack.submit_run(HANDOVER_JOBS)
        stack.wait_until(
            lambda: len(_jobs_by_worker(stack, run_id)) == 2,
            timeout_s=90,
            what="both workers to stream",
        )
        stack.start_worker("worker-c")
        stack.wait_archived(run_id, HANDOVER_JOBS, timeout_s=150)
        numbers = stack.audit(run_id, HANDOVER_JOBS)
        print(f"\nrebalance hand-over: {numbers}")
        stack.wait_until(
            lambda: all(r["source"] for r in stack.rows(_HANDED_OVER, run=run_id)),
            timeout_s=30,
            what="the answers of the handed-over jobs",
        )
        handed_over = stack.rows(_HANDED_OVER, run=run_id)
        logs = "".join(proc.log(200_000) for proc in stack.workers)
    assert numbers.outcomes == {"completed": HANDOVER_JOBS}
    assert numbers.taken_over >= 1 and numbers.state_fetched == numbers.taken_over
    # Unrecorded: only the state polls that found the turn still streaming (closed unrecorded,
    # pipeline.worker.job_runner): three lines each (__cutoff__, __state__, __usage__).
    assert numbers.lines_sent_not_stored == 3 * numbers.streams_unrecorded
    assert "handing over running jobs" in logs and "job handed over" in logs
    for job in handed_over:  # attempt 1 ends once, superseded; the state gives the answer
        assert job["superseded"] == 1 and job["source"] == "state" and job["content"], job
