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
import time
from collections.abc import Iterator
from pathlib import Path

import fault_support
import pytest
import sqlalchemy as sa
from sink_fault_stack import (
    ROOT,
    Stack,
    assert_nothing_lost_or_doubled,
    audit,
    chat_url,
    free_port,
    questions_file,
    sent_lines,
    start_stack,
)

from models import wire
from pipeline.archive import create_engine, upgrade
from pipeline.kafka import ensure_topics
from pipeline.runner import submit_questions_file, wait_for_run
from pipeline.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOBS = 48
LINE_DELAY_MS = 20
DOWN_S = 8.0
FLOW_WAIT_S = 120.0
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
    name = f"pgfault{os.urandom(5).hex()}"
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        database_url=private_postgres[1],
        database_schema="faults",
        topic_prefix=f"{name}.",
        worker_group=f"{name}-worker",
        sink_group=f"{name}-sink",
        sink_batch_max_records=25,
        worker_concurrency=6,
        chat_url=chat_url(free_port()),
    )
    upgrade(settings)
    asyncio.run(ensure_topics(settings, wire.ALL_TOPICS))
    return settings


def _stored(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM faults.stream_lines")).scalar_one())


async def _wait_for_flow(engine: sa.Engine, stack: Stack, since: int) -> int:
    deadline = time.monotonic() + FLOW_WAIT_S
    while (now := await asyncio.to_thread(_stored, engine)) <= since:
        stack.assert_running()
        assert time.monotonic() < deadline, "no new lines reached the archive"
        await asyncio.sleep(0.1)
    return now


def _retries(stack: Stack) -> float:
    return sum(sink.samples().get(RETRIES, 0.0) for sink in stack.sinks)


async def test_postgres_down_then_restarted_pauses_the_sinks_and_loses_nothing(
    settings: Settings, private_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    state_dir, url = private_postgres
    port = int(settings.chat_url.split(":")[2].split("/")[0])
    stack = start_stack(
        settings,
        tmp_path,
        chat_port=port,
        workers=1,
        sinks=2,
        line_delay_ms=LINE_DELAY_MS,
        sent_log=tmp_path / "sent.ndjson",
    )
    engine = create_engine(settings)
    try:
        run = await submit_questions_file(
            settings, questions_file(tmp_path / "q.yaml", jobs=JOBS), chat_url=settings.chat_url
        )
        stored = await _wait_for_flow(engine, stack, 0)
        await asyncio.to_thread(_services, state_dir, url, "stop-postgres")
        await asyncio.sleep(DOWN_S)  # workers keep streaming into Kafka meanwhile
        stack.assert_running()
        retries_while_down = _retries(stack)
        await asyncio.to_thread(_services, state_dir, url, "start-postgres")
        stored = await _wait_for_flow(engine, stack, stored)
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
    numbers = fault_support.audit(
        url.replace("postgresql+psycopg://", "postgresql://"),
        settings.database_schema,
        run.run_id,
        run.job_count,
        tmp_path / "sent.ndjson",
    )
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
    print(f"Chat API sent log: {numbers}")
    assert numbers.lines_sent == numbers.lines_stored == result.lines_stored
    assert numbers.streams_unrecorded == 0 and numbers.lines_sent_not_stored == 0
