"""Scale-out: 200 jobs, 4 concurrent streams per worker, 2 workers sharing the consumer group.

Each worker drives four streams at once; a job's lines keep their order (the audit compares
them, line by line, with what the Chat API sent) and no job runs twice.
"""

from __future__ import annotations

import pytest

from tests.integration.faults.fault_support import StackFactory

pytestmark = pytest.mark.integration

JOBS = 200
CONCURRENCY = 4
LINE_DELAY_MS = 30


def test_fault_scale_200_jobs_two_workers_four_streams_each(fault_stack: StackFactory) -> None:
    with fault_stack(workers=2, line_delay_ms=LINE_DELAY_MS, concurrency=CONCURRENCY) as stack:
        run_id = stack.submit_run(JOBS)
        stack.wait_archived(run_id, JOBS, timeout_s=180)
        numbers = stack.audit(run_id, JOBS)
        print(f"\nscale: {numbers}")
        workers = stack.rows(
            "SELECT worker_id, count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
            " GROUP BY worker_id ORDER BY worker_id",
            run=run_id,
        )
        print(f"jobs by worker: {workers}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0 and numbers.streams_unrecorded == 0
    assert numbers.taken_over == 0
    assert {w["worker_id"] for w in workers} == {"worker-a", "worker-b"}
