"""`chatscribe dlq list|show|replay` against real Kafka, with a real sink archiving replays."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from models import wire
from models.records import ChatJob, DeadLetter
from pipeline.cli.app import app
from pipeline.cli.dlq import hexdump
from pipeline.kafka.clients import create_producer, ensure_topics
from pipeline.settings import Settings
from pipeline.sink.loop import Sink
from tests.integration.pipeline.sink_records_support import (
    job_records,
    produce_records,
    running_sinks,
    wait_for,
)
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BAD_LINE = b"\xff\xfe not a line"
BAD_JOB = b'{"job_id": 1'
WAIT_S = 45.0


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, tag="dlq", sink_batch_wait_ms=100
    )


@pytest.fixture
async def sink(settings: Settings) -> AsyncIterator[Sink]:
    await ensure_topics(settings, wire.ALL_TOPICS)
    async with running_sinks(settings) as (running,):
        yield running


async def _cli(settings: Settings, *args: str) -> Any:
    env = {
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
    }
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)


def _scalar(engine: sa.Engine, query: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(query), params).scalar_one()


def _lines_stored(engine: sa.Engine, job_id: str) -> int:
    return int(_scalar(engine, "SELECT count(*) FROM stream_lines WHERE job_id = :j", j=job_id))


async def _until(condition: Callable[[], bool], what: str) -> None:
    await wait_for(condition, what, timeout_s=WAIT_S)


async def _seed(settings: Settings) -> bytes:
    """Produces a job with line 5 held back in chat.lines.dlq, and two bad records.

    Line 5 is as if dead-lettered while the archive could not take it; the others are a
    record the sink must dead-letter and a dead job.

    Returns: the held-back line's raw bytes.
    """
    lines, events = job_records("job-a", n_deltas=10)
    held = lines[4]
    await produce_records(settings, [line for line in lines if line is not held], events)
    producer = create_producer(settings)
    await producer.start()
    try:
        lines_topic = settings.topic(wire.TOPIC_LINES)
        _, value, headers = held.to_record()
        letter = DeadLetter(reason="archive unavailable (test)", source_topic=lines_topic)
        dlq = settings.topic(wire.TOPIC_LINES_DLQ)
        await producer.send_and_wait(
            dlq, value, key=b"job-a", headers=[*headers, *letter.headers()]
        )
        await producer.send_and_wait(lines_topic, BAD_LINE, key=b"job-bad")
        requests_letter = DeadLetter(
            reason="invalid chat job: JSON (test)",
            source_topic=settings.topic(wire.TOPIC_REQUESTS),
            source_partition=2,
            source_offset=7,
        )
        await producer.send_and_wait(
            settings.topic(wire.TOPIC_REQUESTS_DLQ),
            BAD_JOB,
            key=b"job-dead",
            headers=requests_letter.headers(),
        )
    finally:
        await producer.stop()
    return held.raw


async def test_dead_letters_are_listed_shown_and_replayed_into_the_archive_once(
    settings: Settings, engine: sa.Engine, sink: Sink
) -> None:
    held_raw = await _seed(settings)
    await _until(lambda: sink.stats.dead_lettered == 1, "the sink to dead-letter the bad line")
    await _until(lambda: _lines_stored(engine, "job-a") == 11, "job-a's other lines")

    listed = await _cli(settings, "dlq", "list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {json.loads(line)["key"]: json.loads(line) for line in listed.stdout.splitlines()}
    assert set(rows) == {"job-a", "job-bad", "job-dead"}
    bad = rows["job-bad"]
    assert bad["ref"].startswith("chat.lines.dlq:")
    assert (bad["source_topic"], bad["size_bytes"]) == (
        settings.topic(wire.TOPIC_LINES),
        len(BAD_LINE),
    )
    assert isinstance(bad["source_offset"], int) and "chatscribe-attempt" in bad["reason"]
    dead_job = rows["job-dead"]
    assert dead_job["ref"].startswith("chat.requests.dlq:")
    assert (dead_job["source_partition"], dead_job["source_offset"]) == (2, 7)

    shown = await _cli(settings, "dlq", "show", bad["ref"], "--json")
    assert json.loads(shown.stdout)["value_hex"] == BAD_LINE.hex()
    text = await _cli(settings, "dlq", "show", bad["ref"])
    assert hexdump(BAD_LINE).splitlines()[0] in text.stdout
    assert "chatscribe-dlq-reason" in text.stdout
    held = await _cli(settings, "dlq", "show", rows["job-a"]["ref"], "--json")
    assert json.loads(held.stdout)["value_utf8"] == held_raw.decode()

    for _ in range(2):  # replaying twice stores the line once
        replayed = await _cli(settings, "dlq", "replay", rows["job-a"]["ref"])
        assert replayed.exit_code == 0, replayed.output
        assert f"-> {settings.topic(wire.TOPIC_LINES)}" in replayed.stderr
    await _until(lambda: sink.stats.lines >= 12 + 1, "both replays to reach the sink")
    assert _lines_stored(engine, "job-a") == 12
    stored = _scalar(engine, "SELECT raw FROM stream_lines WHERE job_id = 'job-a' AND line_no = 5")
    answers = _scalar(engine, "SELECT count(*) FROM answers")
    assert bytes(stored) == held_raw
    assert answers == 1  # the job completed once its missing line arrived


async def test_dlq_commands_reject_bad_references(settings: Settings) -> None:
    await ensure_topics(settings, wire.ALL_TOPICS)
    missing = await _cli(settings, "dlq", "show", "chat.lines.dlq:0:999999")
    assert missing.exit_code == 1
    assert "no dead letter at" in missing.stderr
    malformed = await _cli(settings, "dlq", "show", "chat.lines:0:1")
    assert malformed.exit_code == 2
    neither = await _cli(settings, "dlq", "replay")
    assert neither.exit_code == 2
    empty = await _cli(settings, "dlq", "list", "--json")
    assert (empty.exit_code, empty.stdout.strip()) == (0, "")


async def _seed_secret_letters(settings: Settings, api_key: str) -> None:
    """Dead-letters two jobs carrying ``api_key``: one valid JSON, one cut and not UTF-8."""
    job = ChatJob.model_validate(
        {
            "job_id": "job-secret",
            "run_id": "r1",
            "question": "How many flights?",
            "session_settings": {"externalId": "ann"},
            "chat_url": "http://127.0.0.1:8400/chat",
            "api_key": api_key,
        }
    )
    value = job.to_value()
    letter = DeadLetter(
        reason=f"chat URL refused (test): Authorization: Api-Key {api_key}",
        source_topic=settings.topic(wire.TOPIC_REQUESTS),
    )
    headers = [("authorization", f"Api-Key {api_key}".encode()), *letter.headers()]
    producer = create_producer(settings)
    await producer.start()
    try:
        dlq = settings.topic(wire.TOPIC_REQUESTS_DLQ)
        await producer.send_and_wait(dlq, value, key=b"job-secret", headers=headers)
        await producer.send_and_wait(dlq, b"\xff" + value[:-3], key=b"job-cut", headers=headers)
    finally:
        await producer.stop()


async def test_dlq_list_and_show_print_no_secret_of_a_dead_lettered_job(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    api_key = f"sk-{uuid.uuid4().hex}"
    await ensure_topics(settings, wire.ALL_TOPICS)
    await _seed_secret_letters(settings, api_key)
    listed = await _cli(settings, "dlq", "list", "--json")
    refs = [json.loads(line)["ref"] for line in listed.stdout.splitlines()]
    outputs = [listed.output, (await _cli(settings, "dlq", "list")).output]
    for ref in refs:
        for extra in ([], ["--json"]):
            shown = await _cli(settings, "dlq", "show", ref, *extra)
            assert shown.exit_code == 0, shown.output
            outputs.append(shown.output)
    assert len(refs) == 2 and all(api_key not in out for out in outputs)
    assert all(api_key not in record.getMessage() for record in caplog.records)
    details = [json.loads(out) for out in outputs if '"headers"' in out]
    assert len(details) == 2 and all(d["headers"]["authorization"] == "***" for d in details)
    (whole,) = [d for d in details if "value_utf8" in d]
    assert json.loads(whole["value_utf8"])["api_key"] == "***"
