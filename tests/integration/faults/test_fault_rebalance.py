"""A worker joining, and a worker leaving (SIGTERM), a busy consumer group mid-run.

Issue 4, "Scale-out": a worker joining or leaving rebalances without losing or duplicating a
job. Two workers drive a run four streams each; a third joins while they stream, and must get
partitions and run jobs; then one worker is stopped with SIGTERM while it streams: it finishes
its running jobs (faust's ``stream_wait_empty``), commits, and its partitions go to the others.
Neither rebalance makes a job run twice (no second attempt). The audit
(:func:`fault_support.audit`) then checks that every job has exactly one final outcome and that
every stored line is one the Chat API sent, once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_support import (
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

JOBS = 60
CONCURRENCY = 4
LINE_DELAY_MS = 120
_BY_WORKER = (
    "SELECT worker_id, count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
    " AND first_line_at IS NOT NULL GROUP BY worker_id"
)


def _jobs_by_worker(pg_conninfo: str, schema: str, run_id: str) -> dict[str, int]:
    rows = query(pg_conninfo, schema, _BY_WORKER, run=run_id)
    return {row["worker_id"]: row["n"] for row in rows}


@pytest.mark.timeout(240)
def test_fault_rebalance_worker_joins_and_leaves_mid_run(
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
        wait_until(
            lambda: len(_jobs_by_worker(pg_conninfo, schema, run_id)) == 2,
            timeout_s=90,
            what="both workers to stream",
            stack=stack,
        )
        stack.add_worker("worker-c")
        wait_until(
            lambda: "worker-c" in _jobs_by_worker(pg_conninfo, schema, run_id),
            timeout_s=60,
            what="the joining worker-c to stream a job",
            stack=stack,
        )
        streaming_on_a = (
            "SELECT count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s AND status = 'running'"
            " AND worker_id = 'worker-a' AND first_line_at IS NOT NULL"
        )
        wait_until(
            lambda: query(pg_conninfo, schema, streaming_on_a, run=run_id)[0]["n"] >= 1,
            timeout_s=60,
            what="worker-a to stream a job after the join",
            stack=stack,
        )
        leaving = stack.workers[0]  # SIGTERM while it streams: it finishes its jobs, then leaves
        assert leaving.stop() == 0, f"worker-a did not stop cleanly:\n{leaving.log()}"
        stack.gone.add(leaving.name)
        wait_archived(pg_conninfo, schema, run_id, JOBS, timeout_s=120, check=stack.check)
        numbers = audit(pg_conninfo, schema, run_id, JOBS, stack.sent_log)
        by_worker = _jobs_by_worker(pg_conninfo, schema, run_id)
        print(f"\nrebalance join+leave: {numbers}\njobs streamed by worker: {by_worker}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0 and numbers.streams_unrecorded == 0
    assert numbers.taken_over == 0  # nobody ran a job a second time
    assert set(by_worker) == {"worker-a", "worker-b", "worker-c"}
