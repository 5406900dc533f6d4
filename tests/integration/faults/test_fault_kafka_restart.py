"""Restart Kafka mid-run (a private broker, never the shared one): nothing is lost.

The test starts its own broker with ``ops/services.sh`` (its own state folder and ports; the
jars are linked from the shared cache), runs the stack on it, restarts the broker while jobs
stream, and checks that producers and consumers reconnected and the run is complete.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.faults.fault_support import running_stack
from tests.stack_support import ROOT, free_port

pytestmark = pytest.mark.integration

JOBS = 16
LINE_DELAY_MS = 150
SHARED_STATE = Path(os.environ.get("CHATSCRIBE_STATE_DIR", Path.home() / ".local/state/chatscribe"))


def _services(env: dict[str, str], command: str) -> None:
    done = subprocess.run(
        [str(ROOT / "ops/services.sh"), command], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"services.sh {command}:\n{done.stdout}\n{done.stderr}"


@pytest.fixture
def private_kafka(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A one-node Kafka of this test's own; yields its bootstrap address and ops env."""
    state = tmp_path / "state"
    (state / "kafka").mkdir(parents=True)
    shared = SHARED_STATE / "kafka"
    (state / "kafka/libs").symlink_to(shared / "libs")
    (state / "kafka/libs.pom.sha256").write_bytes((shared / "libs.pom.sha256").read_bytes())
    bootstrap = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "CHATSCRIBE_STATE_DIR": str(state),
        "CHATSCRIBE_KAFKA_BOOTSTRAP": bootstrap,
        "CHATSCRIBE_KAFKA_CONTROLLER_PORT": str(free_port()),
    }
    _services(env, "start-kafka")
    try:
        yield bootstrap, env
    finally:
        _services(env, "stop-kafka")


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
        _services(ops_env, "restart-kafka")
        stack.wait_archived(run_id, JOBS, timeout_s=180)
        numbers = stack.audit(run_id, JOBS)
        print(f"\nkafka restart: {numbers}")
    assert numbers.outcomes == {"completed": JOBS}
    assert numbers.lines_sent_not_stored == 0
