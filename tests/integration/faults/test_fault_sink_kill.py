"""Fault: a sink is SIGKILLed mid-batch, again and again, while a run streams.

Two sink processes share the consumer group; one of them is killed (no shutdown, no offset
commit) whenever lines are flowing into the archive, and a fresh one started. The run must end
with every job holding exactly one final outcome and every (job, attempt, line) the workers sent
stored exactly once, byte for byte (lines sent are read back from ``chat.lines``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

import tests.integration.faults.fault_support as fault_support
from pipeline.archive.engine import create_engine
from pipeline.archive.jobs import lock_key
from pipeline.runs.runner import submit_questions_file, wait_for_run
from pipeline.settings import Settings
from tests.integration.faults.sink_fault_stack import (
    FLOW_WAIT_S,
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

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOBS = 48
KILLS = 3
LINE_DELAY_MS = 20


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return sink_fault_settings(kafka_bootstrap, database_url, schema=pg_schema)


def _blocked_sinks(engine: sa.Engine) -> list[str]:
    """Returns: application names of sink backends waiting for an advisory lock (mid-batch)."""
    query = (
        "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'sink-%'"
        " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    )
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text(query)).scalars())


def _unfinished_job(engine: sa.Engine, schema: str) -> str | None:
    query = (
        f"SELECT job_id FROM \"{schema}\".jobs WHERE status IN ('submitted', 'running')"
        " ORDER BY status DESC, submitted_at DESC LIMIT 1"
    )
    with engine.connect() as conn:
        found: str | None = conn.execute(sa.text(query)).scalar_one_or_none()
        return found


async def _kill_inside_a_transaction(
    stack: SinkFaultStack, engine: sa.Engine, pg_conninfo: str, schema: str
) -> bool:
    """Holds one unfinished job's advisory lock until a sink's batch transaction waits on it.

    Then SIGKILLs that sink: it dies with its batch fetched, written in part and uncommitted.

    Returns: False when no job was left unfinished to hold.
    """
    job_id = await asyncio.to_thread(_unfinished_job, engine, schema)
    if job_id is None:
        return False
    with psycopg.connect(pg_conninfo, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(job_id),))
        deadline = time.monotonic() + FLOW_WAIT_S
        while not (blocked := await asyncio.to_thread(_blocked_sinks, engine)):
            stack.assert_running()
            assert time.monotonic() < deadline, f"no sink reached job {job_id}"
            await asyncio.sleep(0.1)
        stack.kill_sink(stack.sink_named(blocked[0]))
    stack.start_sink()
    return True


async def test_sink_killed_mid_batch_loses_and_duplicates_no_line(
    settings: Settings, pg_conninfo: str, tmp_path: Path
) -> None:
    sent_log = tmp_path / "sent.ndjson"
    stack = start_stack(settings, tmp_path, line_delay_ms=LINE_DELAY_MS, sent_log=sent_log)
    engine = create_engine(settings)
    schema = settings.database_schema
    in_transaction = flowing = 0
    try:
        run = await submit_questions_file(
            settings, questions_file(tmp_path / "q.yaml", jobs=JOBS), chat_url=settings.chat_url
        )
        stored = 0
        for _ in range(KILLS):
            if await _kill_inside_a_transaction(stack, engine, pg_conninfo, schema):
                in_transaction += 1
            stored = await wait_for_flow(engine, schema, stored, stack.assert_running)
            stack.kill_sink(stack.sinks[0])  # the oldest sink: it holds partitions
            stack.start_sink()
            flowing += 1
        outcome = await wait_for_run(
            settings, run.run_id, timeout_s=400, check_alive=stack.assert_running
        )
    finally:
        stack.stop()
        engine.dispose()
    sent = await sent_lines(settings)
    result = audit(settings, run.run_id, run.job_count, sent)
    numbers = fault_support.audit(pg_conninfo, schema, run.run_id, run.job_count, sent_log)
    print(
        "\n"
        + result.line(
            "sink SIGKILL",
            kills_inside_a_transaction=in_transaction,
            kills_while_lines_flow=flowing,
            duplicates_absorbed=int(stack.duplicate_lines),
            elapsed_s=round(outcome.elapsed_s, 1),
        )
    )
    assert outcome.finished
    assert run.job_count == JOBS and flowing == KILLS and in_transaction >= 1
    assert_nothing_lost_or_doubled(result)
    assert_sent_log_agrees(result, numbers)
