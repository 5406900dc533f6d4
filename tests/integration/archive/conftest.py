"""Fixtures: one pipeline stack per module, a run of our Chat API, hosted transcripts archived.

The stack is the real one (``python -m pipeline.cli.app api serve|worker|sink`` processes, Kafka and
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

import pytest
import yaml

from models.records import ChatJob
from pipeline.runs.runner import RunOutcome
from pipeline.runs.submit import submit_jobs
from tests.integration.archive.archive_stack import (
    API_KEY,
    HOSTED_DIR,
    HOSTED_IDENTITY,
    READY_TIMEOUT_S,
    ArchiveStack,
    changed_model,
    hosted_app,
    questions,
    serve_in_thread,
    wait_finished,
)
from tests.stack_support import ChatApi, chat_url, isolated_settings


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ArchiveStack]:
    model = changed_model(tmp_path_factory.mktemp("changed-model"))
    main = ChatApi("chat-api")
    changed = ChatApi("chat-api-changed", env={"CHATSCRIBE_MODEL_DIR": str(model)})
    with (
        isolated_settings(
            kafka_bootstrap, database_url, tag="a", chat_url=main.url, api_key=API_KEY
        ) as settings,
        serve_in_thread(hosted_app()) as hosted_port,
    ):
        logs = tmp_path_factory.mktemp("archive-logs")
        stack = ArchiveStack(settings, logs, ready_timeout_s=READY_TIMEOUT_S)
        with stack.running([main, changed], workers=["worker"], sinks=["sink"]):
            stack.chat_urls["hosted"] = chat_url(hosted_port, account="acme")
            yield stack


@pytest.fixture(scope="module")
def questions_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("questions") / "questions.yaml"
    path.write_text(yaml.safe_dump(questions()))
    return path


@pytest.fixture(scope="module")
def run_a(stack: ArchiveStack, questions_file: Path) -> RunOutcome:
    outcome = stack.run_questions(questions_file, timeout_s=180)
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
                "chat_url": stack.chat_urls["hosted"],
            }
        )
        for path in sorted(HOSTED_DIR.glob("*.ndjson"))
    }
    asyncio.run(submit_jobs(stack.settings, list(jobs.values())))
    wait_finished(stack, [job.job_id for job in jobs.values()])
    return {name: job.job_id for name, job in jobs.items()}
