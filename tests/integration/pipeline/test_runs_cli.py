"""`chatscribe batch --detach` and `chatscribe runs show|wait` on real Kafka and PostgreSQL.

No worker runs here: the test plays the worker's part by reading the submitted jobs from
``chat.requests`` and producing each job's lines and lifecycle events, which a real sink archives.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models import wire
from models.records import ChatJob
from pipeline.cli.app import app
from pipeline.kafka.clients import create_consumer, ensure_topics
from pipeline.settings import Settings
from tests.integration.pipeline.sink_records_support import (
    job_records,
    produce_records,
    running_sinks,
)
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

QUESTIONS = {
    "name": "runs-cli",
    "personas": [{"name": "analyst", "sessionSettings": {"externalId": "analyst-1"}}],
    "questions": [{"text": "How many flights in March?"}, {"text": "Average delay by carrier"}],
}


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, tag="runs", sink_batch_wait_ms=100
    )


def _env(settings: Settings) -> dict[str, str]:
    return {
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
    }


async def _cli(settings: Settings, *args: str) -> Any:
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, app, list(args), env=_env(settings))


async def _submitted_jobs(settings: Settings, count: int) -> list[ChatJob]:
    consumer = create_consumer(settings, settings.topic(wire.TOPIC_REQUESTS), group_id=None)
    await consumer.start()
    jobs: list[ChatJob] = []
    try:
        async with asyncio.timeout(30):
            while len(jobs) < count:
                batches = await consumer.getmany(timeout_ms=500)
                jobs += [ChatJob.from_value(r.value) for p in batches.values() for r in p]
    finally:
        await consumer.stop()
    return jobs


async def _play_worker(settings: Settings, jobs: list[ChatJob]) -> None:
    for job in jobs:
        lines, events = job_records(job.job_id, run_id=job.run_id)
        await produce_records(settings, lines, [e for e in events if e.kind != "accepted"])


async def test_detached_batch_is_followed_by_runs_show_and_runs_wait(
    settings: Settings, tmp_path: Path
) -> None:
    await ensure_topics(settings, wire.ALL_TOPICS)
    questions = tmp_path / "questions.yaml"
    questions.write_text(yaml.safe_dump(QUESTIONS))

    detached = await _cli(settings, "batch", str(questions), "--detach")
    assert detached.exit_code == 0, detached.output
    run_id = detached.stdout.strip().splitlines()[-1]

    shown = await _cli(settings, "runs", "show", run_id, "--json")
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.stdout)
    assert (document["run"]["run_id"], document["run"]["job_count"]) == (run_id, 2)
    assert (document["progress"]["finished"], document["progress"]["done"]) == (0, False)

    early = await _cli(settings, "runs", "wait", run_id, "--timeout", "0", "--json")
    assert early.exit_code == 1
    assert "did not finish" in early.stderr

    jobs = await _submitted_jobs(settings, 2)
    assert {job.run_id for job in jobs} == {run_id}
    async with running_sinks(settings):
        await _play_worker(settings, jobs)
        waited = await _cli(settings, "runs", "wait", run_id, "--timeout", "60", "--json")
    assert waited.exit_code == 0, waited.output
    results = [json.loads(line) for line in waited.stdout.splitlines() if line.strip()]
    assert sorted(r["job_id"] for r in results) == sorted(job.job_id for job in jobs)
    assert {r["status"] for r in results} == {"completed"}
    assert all(r["final_answer"] == f"answer of {r['job_id']}" for r in results)

    table = await _cli(settings, "runs", "show", run_id)
    assert table.exit_code == 0, table.output
    assert "2 of 2 jobs finished (done); completed=2" in table.stdout


async def test_runs_commands_refuse_an_unknown_run(settings: Settings) -> None:
    for command in ("show", "wait"):
        result = await _cli(settings, "runs", command, "no-such-run")
        assert result.exit_code == 2
        assert "no run 'no-such-run' in the archive" in result.stderr


async def test_batch_limit_options_travel_on_every_job_and_into_the_run(
    settings: Settings, tmp_path: Path
) -> None:
    await ensure_topics(settings, wire.ALL_TOPICS)
    questions = tmp_path / "questions.yaml"
    questions.write_text(yaml.safe_dump({**QUESTIONS, "limits": {"requestsPerMinute": 60}}))
    args = ["--max-concurrency", "3", "--target-max-concurrency", "40"]
    detached = await _cli(settings, "batch", str(questions), "--detach", *args)
    assert detached.exit_code == 0, detached.output
    run_id = detached.stdout.strip().splitlines()[-1]
    jobs = await _submitted_jobs(settings, 2)
    for job in jobs:
        assert job.limits is not None and job.target_limits is not None
        assert (job.limits.max_concurrency, job.limits.requests_per_minute) == (3, 60)
        assert job.target_limits.max_concurrency == 40
    shown = await _cli(settings, "runs", "show", run_id)
    assert "429s absorbed: none" in shown.stdout
    refused = await _cli(settings, "batch", str(questions), "--requests-per-minute", "0")
    assert refused.exit_code == 2  # a clear usage error, nothing submitted


async def test_batch_repeat_option_wins_over_the_files_and_asks_each_question_n_times(
    settings: Settings, tmp_path: Path
) -> None:
    await ensure_topics(settings, wire.ALL_TOPICS)
    questions = tmp_path / "questions.yaml"
    questions.write_text(yaml.safe_dump({**QUESTIONS, "repeat": 2}))
    detached = await _cli(settings, "batch", str(questions), "--detach", "--repeat", "3")
    assert detached.exit_code == 0, detached.output
    run_id = detached.stdout.strip().splitlines()[-1]
    jobs = await _submitted_jobs(settings, 6)
    asked = sorted(job.question for job in jobs if job.run_id == run_id)
    assert asked == sorted(["How many flights in March?", "Average delay by carrier"] * 3)
    shown = json.loads((await _cli(settings, "runs", "show", run_id, "--json")).stdout)
    assert shown["run"]["job_count"] == 6
