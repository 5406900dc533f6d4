"""Fixtures: one pipeline stack per module, a run of our Chat API, hosted transcripts archived.

The stack is the real one (``python -m pipeline.cli api serve|worker|sink`` processes, Kafka and
PostgreSQL from ``ops/``) on topics and a schema unique to the module. Two Chat API processes
serve the same data: one with our data model, one with a copy in which ``avg_arr_delay``
averages departure delays (the "changed data model" of the run comparison). A stand-in for the
hosted service streams the hand-made transcripts of ``tests/data/hosted`` byte for byte.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml
from archive_stack import (
    HOSTED_DIR,
    HOSTED_IDENTITY,
    ArchiveStack,
    changed_model,
    chat_url,
    free_port,
    hosted_app,
    questions,
    serve_in_thread,
    stack_env,
    start_process,
    wait_finished,
    wait_healthy,
)
from psycopg import sql

from models import wire
from models.records import ChatJob
from pipeline.archive import upgrade
from pipeline.kafka import ensure_topics
from pipeline.runner import RunOutcome, run_questions_file
from pipeline.settings import Settings
from pipeline.submit import submit_jobs


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str,
    database_url: str,
    pg_conninfo: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ArchiveStack]:
    name = f"a{uuid.uuid4().hex[:10]}"
    main_port, changed_port = free_port(), free_port()
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        database_url=database_url,
        database_schema=name,
        topic_prefix=f"{name}.",
        worker_group=f"{name}-worker",
        sink_group=f"{name}-sink",
        chat_url=chat_url(main_port),
        api_key="archive-key",
    )
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    upgrade(settings)
    asyncio.run(ensure_topics(settings, wire.ALL_TOPICS))
    logs = tmp_path_factory.mktemp("archive-logs")
    model = changed_model(tmp_path_factory.mktemp("changed-model"))
    env = stack_env(settings)
    serve_args = ("api", "serve", "--host", "127.0.0.1", "--port")
    main = start_process("chat-api", logs, env, *serve_args, str(main_port))
    changed_env = {**env, "CHATSCRIBE_MODEL_DIR": str(model)}
    changed = start_process("chat-api-changed", logs, changed_env, *serve_args, str(changed_port))
    processes = [main, changed]
    try:
        with serve_in_thread(hosted_app()) as hosted_port:
            wait_healthy(main, main_port)
            wait_healthy(changed, changed_port)
            processes.append(start_process("worker", logs, env, "worker"))
            processes.append(start_process("sink", logs, env, "sink"))
            yield ArchiveStack(
                settings,
                env,
                chat_url(changed_port),
                chat_url(hosted_port, account="acme"),
                processes,
            )
    finally:
        for process in processes:
            process.stop()
        with psycopg.connect(pg_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def questions_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("questions") / "questions.yaml"
    path.write_text(yaml.safe_dump(questions()))
    return path


@pytest.fixture(scope="module")
def run_a(stack: ArchiveStack, questions_file: Path) -> RunOutcome:
    outcome = asyncio.run(
        run_questions_file(
            stack.settings,
            questions_file,
            timeout_s=180,
            show_progress=False,
            check_alive=stack.assert_running,
        )
    )
    assert outcome.finished, f"run did not finish: {outcome.results}"
    assert {r.status for r in outcome.results} == {"completed"}
    return outcome


@pytest.fixture(scope="module")
def hosted_jobs(stack: ArchiveStack) -> dict[str, str]:
    """Every hand-made hosted transcript asked once through the real worker and sink."""
    run_id = f"hosted-{uuid.uuid4().hex[:8]}"
    jobs = {
        path.stem: ChatJob.model_validate(
            {
                "job_id": str(uuid.uuid4()),
                "run_id": run_id,
                "question": path.stem,
                "persona": "hosted",
                "session_settings": {"externalId": HOSTED_IDENTITY},
                "chat_url": stack.hosted_url,
            }
        )
        for path in sorted(HOSTED_DIR.glob("*.ndjson"))
    }
    asyncio.run(submit_jobs(stack.settings, list(jobs.values())))
    wait_finished(stack, [job.job_id for job in jobs.values()])
    return {name: job.job_id for name, job in jobs.items()}
