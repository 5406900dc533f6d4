"""The sink against real Kafka (unique topics and group per test) and real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from aiokafka import TopicPartition
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from jsonschema import Draft202012Validator

from models import schemas, wire
from models.records import ChatJob, DeadLetter, JobEvent, LineEnvelope
from pipeline.archive.writer import ArchiveWriter, BatchOutcome
from pipeline.errors import ArchiveRejectedError, ArchiveUnavailableError
from pipeline.kafka.clients import (
    DEFAULT_PARTITIONS,
    create_consumer,
    create_producer,
    ensure_topics,
)
from pipeline.settings import Settings
from pipeline.sink.loop import BatchReport, Sink
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
TOOLS_PATH = ["svc_data_analyst_agent", "tools"]
AGENT_PATH = ["svc_data_analyst_agent"]
WAIT_S = 45.0
REPO_ROOT = Path(__file__).resolve().parents[3]
RUN_SINK = (
    "from pipeline.settings import Settings; from pipeline.sink.loop import run_sink; "
    "run_sink(Settings())"
)
Produce = Callable[[Sequence[LineEnvelope], Sequence[JobEvent]], Awaitable[None]]


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _tool_pair(
    message_id: str, name: str, given: dict[str, Any], got: dict[str, Any]
) -> list[bytes]:
    call = {"name": name, "input": json.dumps(given)}
    return [
        _raw(
            id=message_id, role="assistant", graphPath=TOOLS_PATH, isInProcess=True, toolCall=call
        ),
        _raw(
            id=message_id,
            role="assistant",
            graphPath=TOOLS_PATH,
            isInProcess=False,
            toolCall={**call, "result": json.dumps(got)},
        ),
    ]


SQL = "SELECT carrier, MEASURE(flight_count) FROM flights_view GROUP BY 1 ORDER BY 2 DESC"
SQL_INPUT = {"sqlQuery": SQL, "queryTitle": "Flights by carrier", "userRequest": "Who flies most?"}
SQL_RESULT = {
    **SQL_INPUT,
    "schema": [{"name": "carrier", "column_type": "String"}, {"name": "n", "column_type": "Int64"}],
    "data": [["UA", "245"], ["AA", "120"]],
    "totalRows": 16,
    "uuid": "res-1",
    "vegaSpec": json.dumps({"mark": "bar", "encoding": {}}),
}
META_RESULT = {
    "cubes": [{"name": "flights_view", "type": "view", "members": []}],
    "searchQuery": "flights",
}
FINAL = "UA flew the most flights (245)."
TRANSCRIPT = [
    _raw(
        id=wire.ID_CUTOFF,
        role="assistant",
        sort=0,
        state={"chatId": "chat-e2e", "isStreaming": True},
    ),
    _raw(id="u1", role="user", content="Who flies most?", sort=1),
    _raw(
        id="a1",
        role="assistant",
        thinking="Look up ",
        isDelta=True,
        isInProcess=True,
        graphPath=AGENT_PATH,
    ),
    _raw(
        id="a1",
        role="assistant",
        thinking="the model.",
        isDelta=True,
        isInProcess=False,
        graphPath=AGENT_PATH,
    ),
    *_tool_pair("t1", wire.TOOL_META, {"searchQuery": "flights"}, META_RESULT),
    *_tool_pair("t2", wire.TOOL_SQL, SQL_INPUT, SQL_RESULT),
    _raw(
        id="a2",
        role="assistant",
        content="UA flew ",
        isDelta=True,
        isInProcess=True,
        graphPath=AGENT_PATH,
    ),
    _raw(
        id="a2",
        role="assistant",
        content="the most.",
        isDelta=True,
        isInProcess=False,
        graphPath=AGENT_PATH,
    ),
    _raw(
        id="f1",
        role="assistant",
        content=FINAL,
        graphPath=["final"],
        isDelta=False,
        isStructuredResponse=False,
    ),
    _raw(id=wire.ID_USAGE, usage={"llmCalls": 3, "totalTokens": 1234}),
]


def _records(job_id: str) -> tuple[list[LineEnvelope], list[JobEvent]]:
    job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": "run-e2e",
            "question": "Who flies most?",
            "persona": "analyst",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": URL,
        }
    )
    now = datetime.now(UTC)
    lines = [
        LineEnvelope.from_raw(
            job_id=job_id, attempt=1, line_no=n, raw=raw, received_at=now, chat_id="chat-e2e"
        )
        for n, raw in enumerate(TRANSCRIPT, start=1)
    ]
    common: dict[str, Any] = {"job_id": job_id, "run_id": "run-e2e"}
    events = [
        JobEvent(**common, kind="accepted", job=job),
        JobEvent(**common, kind="started", attempt=1, job=job, worker_id="w1"),
        JobEvent(**common, kind="first_line", attempt=1, chat_id="chat-e2e", line_count=1),
        JobEvent(
            **common,
            kind="completed",
            attempt=1,
            chat_id="chat-e2e",
            line_count=len(lines),
            http_status=200,
        ),
    ]
    return lines, events


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, tag="s", sink_batch_wait_ms=100
    )


@pytest.fixture
async def produce(settings: Settings) -> AsyncIterator[Produce]:
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    producer = create_producer(settings)
    await producer.start()

    async def send(lines: Sequence[LineEnvelope], events: Sequence[JobEvent]) -> None:
        for line in lines:
            key, value, headers = line.to_record()
            await producer.send(settings.topic(wire.TOPIC_LINES), value, key=key, headers=headers)
        for event in events:
            topic = settings.topic(wire.TOPIC_JOB_EVENTS)
            await producer.send(topic, event.to_value(), key=event.job_id.encode())
        await producer.flush()

    yield send
    await producer.stop()


async def _started(settings: Settings, **kwargs: Any) -> Sink:
    sink = Sink(settings, **kwargs)
    await sink.start()
    return sink


def _count(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def _normalised(engine: sa.Engine, job_id: str) -> bool:
    found = _count(engine, "SELECT normalised_attempt FROM jobs WHERE job_id = :j", j=job_id)
    return bool(found == 1)


async def _run_until(
    sink: Sink, done: Callable[[], bool], *, commit: bool = True
) -> list[BatchReport]:
    reports: list[BatchReport] = []
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(done):
        assert time.monotonic() < deadline, f"sink did not get there: {reports}"
        reports.append(await sink.run_once(commit=commit))
    return reports


def _rows(engine: sa.Engine, sql: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql)))


async def test_sink_archives_a_transcript_end_to_end(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-e2e")
    await produce(lines, events)
    sink = await _started(settings)
    try:
        reports = await _run_until(sink, lambda: _normalised(engine, "job-e2e"))
    finally:
        await sink.stop()
    assert all(r.committed for r in reports if r.records)
    (job,) = _rows(engine, "SELECT * FROM jobs")
    assert (job.status, job.chat_id, job.line_count, job.http_status, job.worker_id) == (
        "completed",
        "chat-e2e",
        len(TRANSCRIPT),
        200,
        "w1",
    )
    assert (job.identity, job.persona, job.run_id) == ("external:analyst-1", "analyst", "run-e2e")
    assert job.session_settings == {"externalId": "analyst-1"}
    messages = _rows(engine, "SELECT * FROM messages ORDER BY first_line")
    assert [m.message_id for m in messages] == [
        wire.ID_CUTOFF,
        "u1",
        "a1",
        "t1",
        "t2",
        "a2",
        "f1",
        wire.ID_USAGE,
    ]
    by_id = {m.message_id: m for m in messages}
    assert by_id["a1"].thinking == "Look up the model." and by_id["a1"].is_delta_merged
    assert by_id["a2"].content == "UA flew the most."
    assert by_id["f1"].is_final and by_id["f1"].extra == {"isStructuredResponse": False}
    t2 = by_id["t2"]
    assert (t2.first_line, t2.last_line, t2.tool_name) == (7, 8, "svcSqlApi")
    calls = _rows(engine, "SELECT * FROM tool_calls ORDER BY message_id")
    assert [(c.name, c.kind, c.complete) for c in calls] == [
        ("svcMeta", "meta", True),
        ("svcSqlApi", "sql", True),
    ]
    assert calls[0].result == META_RESULT
    assert calls[1].result["vegaSpec"] == {"mark": "bar", "encoding": {}}
    (query,) = _rows(engine, "SELECT * FROM sql_queries")
    assert (query.sql_query, query.total_rows, query.returned_rows, query.result_uuid) == (
        SQL,
        16,
        2,
        "res-1",
    )
    assert query.rows == SQL_RESULT["data"] and query.result_schema == SQL_RESULT["schema"]
    (answer,) = _rows(engine, "SELECT * FROM answers")
    assert (answer.source, answer.content, answer.message_id, answer.chat_id) == (
        "final",
        FINAL,
        "f1",
        "chat-e2e",
    )
    assert _count(engine, "SELECT count(*) FROM job_events") == 4
    assert _count(engine, "SELECT count(*) FROM stream_lines") == len(TRANSCRIPT)


async def _dead_letters(settings: Settings, count: int) -> list[Any]:
    return await _read(settings, wire.TOPIC_LINES_DLQ, count)


async def _read(settings: Settings, topic: str, count: int) -> list[Any]:
    consumer = create_consumer(settings, settings.topic(topic), group_id=None)
    await consumer.start()
    found: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(found) < count:
            assert time.monotonic() < deadline, f"only {len(found)} records on {topic}"
            batches = await consumer.getmany(timeout_ms=200)
            found += [r for part in batches.values() for r in part]
    finally:
        await consumer.stop()
    return found


async def test_undecodable_records_go_to_the_dead_letter_topic_with_the_reason(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-dlq")
    await produce(lines, events)
    producer = create_producer(settings)
    await producer.start()
    headers = [(n, v) for n, v in lines[0].to_record()[2] if n != wire.HEADER_LINE_NO]
    lines_topic = settings.topic(wire.TOPIC_LINES)
    await producer.send_and_wait(lines_topic, b"\xffraw bytes", key=b"job-x", headers=headers)
    events_topic = settings.topic(wire.TOPIC_JOB_EVENTS)
    await producer.send_and_wait(events_topic, b"not an event", key=b"job-x")
    await producer.stop()

    sink = await _started(settings)
    try:
        reports = await _run_until(sink, lambda: _normalised(engine, "job-dlq"))
        while sum(r.dead_lettered for r in reports) < 2:
            reports.append(await sink.run_once())
    finally:
        await sink.stop()
    found = await _dead_letters(settings, 2)
    letters = {dict(r.headers)[wire.HEADER_DLQ_SOURCE_TOPIC]: r for r in found}
    line_letter = letters[lines_topic.encode()]
    assert (line_letter.key, line_letter.value) == (b"job-x", b"\xffraw bytes")
    reason = dict(line_letter.headers)[wire.HEADER_DLQ_REASON].decode()
    assert wire.HEADER_LINE_NO in reason
    assert dict(line_letter.headers)[wire.HEADER_ATTEMPT] == b"1"  # original headers kept
    event_letter = letters[events_topic.encode()]
    assert event_letter.value == b"not an event"
    assert wire.HEADER_DLQ_SOURCE_OFFSET in dict(event_letter.headers)
    assert _count(engine, "SELECT count(*) FROM stream_lines") == len(TRANSCRIPT)
    for letter in found:  # the dead-letter headers, read as an object, match their schema
        fields = DeadLetter.from_headers(letter.headers).model_dump(mode="json", exclude_none=True)
        assert _schema_errors(schemas.DEAD_LETTERS, fields) == []


def _schema_errors(name: str, document: Any) -> list[str]:
    schema = schemas.by_name(name).shipped()
    assert schema is not None
    return [e.message for e in Draft202012Validator(schema).iter_errors(document)]


async def test_sink_publishes_the_answer_as_a_cloudevent_that_matches_its_schema(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-ce")
    await produce(lines, events)
    sink = await _started(settings)
    try:
        await _run_until(sink, lambda: _normalised(engine, "job-ce"))
    finally:
        await sink.stop()
    (record,) = await _read(settings, wire.TOPIC_ANSWERS, 1)
    headers = dict(record.headers)
    assert {"ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time", "ce_subject"} <= set(
        headers
    )
    message = KafkaMessage(headers=headers, key=record.key, value=record.value)
    event = from_binary(message, JSONFormat())
    assert (event.get_specversion(), event.get_id(), event.get_subject()) == (
        "1.0",
        "job-ce:1",
        "job-ce",
    )
    assert event.get_source() == "/chatscribe/runs/run-e2e"
    assert event.get_type() == wire.CE_TYPE_ANSWER
    assert event.get_datacontenttype() == "application/json"
    assert event.get_time() is not None
    data = event.get_data()
    assert isinstance(data, dict)
    assert (data["answer"], data["identity"], data["total_rows"]) == (
        FINAL,
        "external:analyst-1",
        16,
    )
    assert _schema_errors(wire.TOPIC_ANSWERS, json.loads(record.value)) == []


async def test_sink_reads_the_answers_outbox_of_the_archive_its_writer_writes(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    """The answer publisher uses the writer's engine, not one of its own from the settings."""
    lines, events = _records("job-outbox")
    await produce(lines, events)
    elsewhere = settings.model_copy(update={"database_schema": f"{settings.database_schema}_none"})
    sink = await _started(elsewhere, writer=ArchiveWriter(engine))
    try:
        await _run_until(sink, lambda: _normalised(engine, "job-outbox"))
    finally:
        await sink.stop()
    (record,) = await _read(settings, wire.TOPIC_ANSWERS, 1)
    assert record.key == b"job-outbox"
    assert _count(engine, "SELECT count(*) FROM answers WHERE published_at IS NULL") == 0


async def test_restart_before_the_offset_commit_writes_nothing_twice(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-restart")
    await produce(lines, events)
    first = await _started(settings)
    try:
        seen = await _run_until(first, lambda: _normalised(engine, "job-restart"), commit=False)
    finally:
        await first.stop()  # killed: the offsets were never committed
    before = _rows(engine, "SELECT * FROM jobs")
    total = sum(r.records for r in seen)
    assert total == len(lines) + len(events)

    second = await _started(settings)
    try:
        again: list[BatchReport] = []
        while sum(r.records for r in again) < total:
            again.append(await second.run_once())
    finally:
        await second.stop()
    assert all(r.outcome is None or r.outcome.lines_inserted == 0 for r in again)
    assert all(r.outcome is None or r.outcome.events_inserted == 0 for r in again)
    assert _rows(engine, "SELECT * FROM jobs") == before
    for table, expected in [("stream_lines", len(lines)), ("job_events", 4), ("messages", 8)]:
        assert _count(engine, f"SELECT count(*) FROM {table}") == expected
    assert _count(engine, "SELECT count(*) FROM answers") == 1


class _FlakyWriter(ArchiveWriter):
    """Fails with ArchiveUnavailableError for the first ``failures`` batches."""

    def __init__(self, engine: sa.Engine, failures: int) -> None:
        super().__init__(engine)
        self.failures = failures
        self.calls = 0

    def write_batch(
        self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]
    ) -> BatchOutcome:
        self.calls += 1
        if self.calls <= self.failures:
            raise ArchiveUnavailableError("connection refused (simulated)")
        return super().write_batch(lines, events)


async def test_unavailable_database_is_retried_and_nothing_is_committed_or_dropped(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-retry")
    await produce(lines, events)
    writer = _FlakyWriter(engine, failures=1000)
    sink = await _started(settings, writer=writer, retry_budget_s=1.0)
    try:
        deadline = time.monotonic() + WAIT_S
        while writer.calls == 0:
            assert time.monotonic() < deadline
            try:
                await sink.run_once()
            except ArchiveUnavailableError:
                break
        assert writer.calls >= 2  # retried with backoff before giving up the batch
        writer.failures = writer.calls + 1  # one more failure, then PostgreSQL is back
        reports = await _run_until(sink, lambda: _normalised(engine, "job-retry"))
    finally:
        await sink.stop()
    assert sum(r.records for r in reports) == len(lines) + len(events)  # rewound, none dropped
    assert _count(engine, "SELECT count(*) FROM stream_lines") == len(lines)


POISON = b'{"id": "poison"}'


class _RejectingWriter(ArchiveWriter):
    """Fails every batch holding the POISON line with ``error``."""

    def __init__(self, engine: sa.Engine, error: Exception) -> None:
        super().__init__(engine)
        self._error = error

    def write_batch(
        self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]
    ) -> BatchOutcome:
        if any(line.raw == POISON for line in lines):
            raise self._error
        return super().write_batch(lines, events)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            ArchiveRejectedError("value refused (simulated)", sqlstate="22P05"),
            b"archive refused the record: ",
        ),
        (
            RecursionError("maximum recursion depth exceeded"),
            b"sink could not process the record: RecursionError: maximum recursion",
        ),
    ],
    ids=["refused-by-postgres", "fails-in-the-sink"],
)
async def test_record_that_fails_every_write_is_isolated_and_dead_lettered(
    settings: Settings, engine: sa.Engine, produce: Produce, error: Exception, reason: bytes
) -> None:
    lines, events = _records("job-poison")
    poison = LineEnvelope.from_raw(
        job_id="job-other", attempt=1, line_no=1, raw=POISON, received_at=datetime.now(UTC)
    )
    await produce([*lines[:3], poison, *lines[3:]], events)
    sink = await _started(settings, writer=_RejectingWriter(engine, error))
    try:
        reports = await _run_until(sink, lambda: _normalised(engine, "job-poison"))
        while sum(r.dead_lettered for r in reports) < 1:
            reports.append(await sink.run_once())
    finally:
        await sink.stop()
    (letter,) = await _dead_letters(settings, 1)
    assert letter.value == POISON
    assert dict(letter.headers)[wire.HEADER_DLQ_REASON].startswith(reason)
    assert _count(engine, "SELECT count(*) FROM stream_lines") == len(lines)
    assert all(r.committed for r in reports if r.records)


async def test_run_sink_stops_on_sigterm_after_committing(
    settings: Settings, engine: sa.Engine, produce: Produce
) -> None:
    lines, events = _records("job-signal")
    await produce(lines, events)
    env = {
        **os.environ,
        "CHATSCRIBE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
        "CHATSCRIBE_TOPIC_PREFIX": settings.topic_prefix,
        "CHATSCRIBE_SINK_GROUP": settings.sink_group,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RUN_SINK, env=env, cwd=REPO_ROOT
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not await asyncio.to_thread(_normalised, engine, "job-signal"):
            assert process.returncode is None, "run_sink exited early"
            assert time.monotonic() < deadline, "run_sink did not archive the job"
            await asyncio.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert await _committed(settings, wire.TOPIC_LINES) == len(lines)
    assert await _committed(settings, wire.TOPIC_JOB_EVENTS) == len(events)


async def _committed(settings: Settings, name: str) -> int:
    """Returns: the sink group's committed offsets summed over the topic's partitions."""
    topic = settings.topic(name)
    consumer = create_consumer(settings, group_id=settings.sink_group)
    await consumer.start()
    try:
        partitions = range(DEFAULT_PARTITIONS)  # created by ensure_topics in `produce`
        offsets = [await consumer.committed(TopicPartition(topic, p)) for p in partitions]
    finally:
        await consumer.stop()
    return sum(o or 0 for o in offsets)


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


DEEP_LINES: dict[str, Callable[[int], bytes]] = {
    "content": lambda d: b'{"id":"deep","role":"assistant","content":' + _deep(d).encode() + b"}",
    "array": lambda d: b"[" * d + b"]" * d,
    "extra": lambda d: b'{"id":"deep","role":"assistant","extra":' + _deep(d).encode() + b"}",
    "tool-result": lambda d: _raw(
        id="deep",
        role="assistant",
        graphPath=TOOLS_PATH,
        isInProcess=False,
        toolCall={"name": wire.TOOL_SQL, "input": json.dumps(SQL_INPUT), "result": _deep(d)},
    ),
    "tool-input": lambda d: _raw(
        id="deep",
        role="assistant",
        graphPath=TOOLS_PATH,
        isInProcess=True,
        toolCall={"name": wire.TOOL_SQL, "input": _deep(d)},
    ),
}


@pytest.mark.parametrize("depth", [400, 1000, 5000])
@pytest.mark.parametrize("where", sorted(DEEP_LINES))
async def test_a_deeply_nested_line_is_archived_raw_with_its_error_and_the_sink_goes_on(
    settings: Settings, engine: sa.Engine, produce: Produce, depth: int, where: str
) -> None:
    lines, events = _records("job-deep")
    deep = LineEnvelope.from_raw(
        job_id="job-deep",
        attempt=1,
        line_no=len(lines) + 1,
        raw=DEEP_LINES[where](depth),
        received_at=datetime.now(UTC),
    )
    events[-1] = events[-1].model_copy(update={"line_count": len(lines) + 1})
    await produce([*lines, deep], events)
    sink = await _started(settings)
    try:
        await _run_until(sink, lambda: _normalised(engine, "job-deep"))
    finally:
        await sink.stop()
    (row,) = _rows(
        engine, f"SELECT raw, parse_error FROM stream_lines WHERE line_no = {deep.line_no}"
    )
    assert bytes(row.raw) == deep.raw
    if where.startswith("tool-"):  # the line parses; its payload is kept raw with the error
        (call,) = _rows(engine, "SELECT payload_error FROM tool_calls WHERE message_id = 'deep'")
        assert "is not JSON: nested deeper than" in call.payload_error
    else:
        assert row.parse_error.startswith(("invalid JSON: nested deeper than", "JSON list is not"))
    assert _count(engine, "SELECT count(*) FROM answers WHERE job_id = 'job-deep'") == 1
