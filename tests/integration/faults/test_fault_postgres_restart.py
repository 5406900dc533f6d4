"""Fault: PostgreSQL goes down for a while, then is restarted, while a run streams.

PostgreSQL here is a PRIVATE cluster started by ``ops/services.sh start-postgres`` with its own
state folder and port (never the shared one). The sinks must pause and retry (tenacity, with
backoff), keep running, and resume; the run must end with every job holding exactly one final
outcome and every (job, attempt, line) the workers sent stored exactly once, byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.integration.faults.fault_support as fault_support
from pipeline.archive.engine import create_engine
from pipeline.runs.runner import submit_questions_file, wait_for_run
from pipeline.settings import Settings
from tests.integration.faults.sink_fault_stack import (
    SinkFaultStack,
    assert_nothing_lost_or_doubled,
    assert_sent_log_agrees,
    audit,
    questions_file,
    sent_lines,
    sink_fault_settings,
    start_stack,
    wait_for_flow,
)
from tests.stack_support import ROOT, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOBS = 48
LINE_DELAY_MS = 20
DOWN_S = 8.0
SCHEMA = "faults"
RETRIES = ("chatscribe_sink_write_retries_total", ())


def _services(state_dir: Path, url: str, command: str) -> None:
    env = {**os.environ, "CHATSCRIBE_STATE_DIR": str(state_dir), "CHATSCRIBE_DATABASE_URL": url}
    done = subprocess.run(
        [str(ROOT / "ops" / "services.sh"), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"services.sh {command} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture
def private_postgres() -> Iterator[tuple[Path, str]]:
    """A PostgreSQL cluster of this test's own (state folder, URL); stopped and deleted after."""
    state_dir = Path(tempfile.mkdtemp(prefix="chatscribe-pgfault-", dir="/tmp"))
    state_dir.chmod(0o755)  # the server runs as the postgres user (ops/services.sh, pg_locate)
    url = f"postgresql+psycopg://chatscribe:chatscribe@127.0.0.1:{free_port()}/chatscribe"
    try:
        _services(state_dir, url, "start-postgres")
        yield state_dir, url
    finally:
        _services(state_dir, url, "stop-postgres")
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def settings(kafka_bootstrap: str, private_postgres: tuple[Path, str]) -> Settings:
    return sink_fault_settings(kafka_bootstrap, private_postgres[1], schema=SCHEMA)


def _retries(stack: SinkFaultStack) -> float:
    return sum(sink.samples().get(RETRIES, 0.0) for sink in stack.sinks)


async def test_postgres_down_then_restarted_pauses_the_sinks_and_loses_nothing(
    settings: Settings, private_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    state_dir, url = private_postgres
    sent_log = tmp_path / "sent.ndjson"
    stack = start_stack(settings, tmp_path, line_delay_ms=LINE_DELAY_MS, sent_log=sent_log)
    engine = create_engine(settings)
    try:
        run = await submit_questions_file(
            settings, questions_file(tmp_path / "q.yaml", jobs=JOBS), chat_url=settings.chat_url
        )
        stored = await wait_for_flow(engine, SCHEMA, 0, stack.assert_running)
        await asyncio.to_thread(_services, state_dir, url, "stop-postgres")
        await asyncio.sleep(DOWN_S)  # workers keep streaming into Kafka meanwhile
        stack.assert_running()
        retries_while_down = _retries(stack)
        await asyncio.to_thread(_services, state_dir, url, "start-postgres")
        stored = await wait_for_flow(engine, SCHEMA, stored, stack.assert_running)
        await asyncio.to_thread(_services, state_dir, url, "restart-postgres")
        outcome = await wait_for_run(
            settings, run.run_id, timeout_s=400, check_alive=stack.assert_running
        )
        stack.assert_running()
        retries = _retries(stack)
    finally:
        stack.stop()
        engine.dispose()
    sent = await sent_lines(settings)
    result = audit(settings, run.run_id, run.job_count, sent)
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    numbers = fault_support.audit(conninfo, SCHEMA, run.run_id, run.job_count, sent_log)
    print(
        "\n"
        + result.line(
            "PostgreSQL down 8 s, then restarted",
            sink_write_retries=int(retries),
            retries_while_down=int(retries_while_down),
            elapsed_s=round(outcome.elapsed_s, 1),
        )
    )
    assert outcome.finished and run.job_count == JOBS
    assert retries_while_down >= 2, "the sinks did not retry while PostgreSQL was down"
    assert any("archive unavailable, retrying" in sink.log() for sink in stack.sinks)
    assert_nothing_lost_or_doubled(result)
    assert_sent_log_agrees(result, numbers)
