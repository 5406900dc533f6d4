"""Kafka down ~10 s under a running worker: a few summary lines, not a flood of library errors.

A private broker (fixture ``private_kafka``: ``ops/services.sh`` with its own state folder) is
stopped while jobs stream and started again 10 s later. The worker's log must hold one "outage
started" and one "outage ended" line from :mod:`pipeline.kafka.outage` and no ERROR line of
aiokafka (one worker wrote 1,421 of them in a 20 s outage before, issue 13); the run still loses
nothing.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.integration.faults.fault_support import ops_services, running_stack

pytestmark = pytest.mark.integration

JOBS = 12
LINE_DELAY_MS = 150
OUTAGE_S = 10.0
LIBRARY_ERROR = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) (aiokafka|kafka)\b", re.MULTILINE)


def test_fault_kafka_outage_is_summarised_in_the_worker_log(
    private_kafka: tuple[str, dict[str, str]], database_url: str, tmp_path: Path
) -> None:
    bootstrap, ops_env = private_kafka
    logs = tmp_path / "logs"
    logs.mkdir()
    with running_stack(
        bootstrap, database_url, logs, workers=1, line_delay_ms=LINE_DELAY_MS, concurrency=4
    ) as stack:
        run_id = stack.submit_run(JOBS)
        stack.wait_streaming(run_id, at_least=2)
        ops_services(ops_env, "stop-kafka")
        time.sleep(OUTAGE_S)
        ops_services(ops_env, "start-kafka")
        stack.wait_archived(run_id, JOBS, timeout_s=180)
        stack.wait_until(
            lambda: "kafka outage ended" in stack.workers[0].log(chars=10_000_000),
            timeout_s=30,
            what="the outage's end in the worker log",
        )
        worker_log = stack.workers[0].log(chars=10_000_000)
        sink_log = stack.sinks[0].log(chars=10_000_000)
        numbers = stack.audit(run_id, JOBS)
    errors = LIBRARY_ERROR.findall(worker_log)
    sink_errors = LIBRARY_ERROR.findall(sink_log)
    print(f"\nkafka outage: {numbers}; library ERROR lines: worker={len(errors)}", end="")
    print(f" sink={len(sink_errors)}")
    assert worker_log.count("kafka outage started") == 1
    assert worker_log.count("kafka outage ended") == 1
    assert len(errors) == 0, "\n".join(
        line for line in worker_log.splitlines() if LIBRARY_ERROR.match(line)
    )[:4000]
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0
