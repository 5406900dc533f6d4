"""Scale-out: 200 jobs, 4 concurrent streams per worker, 2 workers sharing the consumer group.

Each worker drives four streams at once; a job's lines keep their order (the audit compares
them, line by line, with what the Chat API sent) and no job runs twice.
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
)

pytestmark = pytest.mark.integration

JOBS = 200
CONCURRENCY = 4
LINE_DELAY_MS = 30


def test_fault_scale_200_jobs_two_workers_four_streams_each(
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
        wait_archived(pg_conninfo, schema, run_id, JOBS, timeout_s=180, check=stack.check)
        numbers = audit(pg_conninfo, schema, run_id, JOBS, stack.sent_log)
        print(f"\nscale: {numbers}")
        workers = query(
            pg_conninfo,
            schema,
            "SELECT worker_id, count(*) AS n FROM {s}.jobs WHERE run_id = %(run)s"
            " GROUP BY worker_id ORDER BY worker_id",
            run=run_id,
        )
        print(f"jobs by worker: {workers}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0 and numbers.streams_unrecorded == 0
    assert numbers.taken_over == 0
    assert {w["worker_id"] for w in workers} == {"worker-a", "worker-b"}
