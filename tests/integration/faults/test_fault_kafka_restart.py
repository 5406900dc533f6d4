"""Restart Kafka mid-run (a private broker, never the shared one): nothing is lost.

The test starts its own broker (fixture ``private_kafka``: ``ops/services.sh`` with its own
state folder and ports; the jars are linked from the shared cache), runs the stack on it,
restarts the broker while jobs stream, and checks that producers and consumers reconnected
and the run is complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.faults.fault_support import ops_services, running_stack

pytestmark = pytest.mark.integration

JOBS = 16
LINE_DELAY_MS = 150


def test_fault_kafka_restart_mid_run_loses_nothing(
    private_kafka: tuple[str, dict[str, str]], database_url: str, tmp_path: Path
) -> None:
    bootstrap, ops_env = private_kafka
    logs = tmp_path / "logs"
    logs.mkdir()
    with running_stack(
        bootstrap, database_url, logs, workers=2, line_delay_ms=LINE_DELAY_MS, concurrency=4
    ) as stack:
        run_id = stack.submit_run(JOBS)
        stack.wait_streaming(run_id, at_least=2)
        ops_services(ops_env, "restart-kafka")
        stack.wait_archived(run_id, JOBS, timeout_s=180)
        numbers = stack.audit(run_id, JOBS)
        print(f"\nkafka restart: {numbers}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0
