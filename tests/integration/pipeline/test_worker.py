"""The faust worker against real Kafka and a scripted Chat API under uvicorn.

One worker process serves the module (its topics carry a prefix unique to the module); every
test submits jobs with fresh ids and reads the records of those jobs only.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from worker_support import (
    ALL_TOPICS,
    API_KEY,
    BIG_LINE_BYTES,
    RUN_WORKER,
    ScriptedChat,
    Submit,
    TopicReader,
    WorkerProcess,
    normal_lines,
    reading,
    send_record,
    start_worker,
    submitting,
    worker_settings,
)

from models import wire
from models.records import ChatJob, LineEnvelope
from pipeline.kafka import create_consumer, ensure_topics
from pipeline.settings import Settings

pytestmark = pytest.mark.integration

NameFactory = Callable[[str], str]


def _envelopes(reader: TopicReader, job_id: str) -> list[LineEnvelope]:
    records = reader.of(wire.TOPIC_LINES, job_id)
    return [LineEnvelope.from_record(r.key, r.value, r.headers) for r in records]


async def test_worker_fans_out_every_line_byte_identical_and_in_order(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    job = await submit("normal")
    terminal = await topic_reader.wait_terminal(job.job_id)

    lines = _envelopes(topic_reader, job.job_id)
    assert terminal.chat_id is not None
    assert [x.raw for x in lines] == normal_lines(terminal.chat_id)
    assert [x.line_no for x in lines] == list(range(1, len(lines) + 1))
    assert all(x.attempt == 1 and x.terminated for x in lines)
    assert all(x.chat_id == terminal.chat_id for x in lines)
    assert lines[0].received_at <= lines[-1].received_at
    assert lines[3].parse_error is not None and "UTF-8" in lines[3].parse_error
    assert lines[4].parse_error is not None and "JSON" in lines[4].parse_error
    assert {r.partition for r in topic_reader.of(wire.TOPIC_LINES, job.job_id)} == {
        topic_reader.of(wire.TOPIC_JOB_EVENTS, job.job_id)[0].partition
    }
    assert [e.kind for e in topic_reader.events(job.job_id)] == [
        "started",
        "first_line",
        "completed",
    ]
    assert terminal.line_count == len(normal_lines("x"))
    assert terminal.attempt == 1
    assert terminal.worker_id
    started = topic_reader.events(job.job_id)[0]
    assert started.job is not None and started.job.question == "normal"
    assert f"Api-Key {API_KEY}" in scripted_chat.authorizations


async def test_worker_uses_the_jobs_own_api_key_and_keeps_it_out_of_events(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    job = await submit(f"normal:{uuid.uuid4()}", api_key="job-own-key")
    await topic_reader.wait_terminal(job.job_id)

    assert "Api-Key job-own-key" in scripted_chat.authorizations
    for record in topic_reader.of(wire.TOPIC_JOB_EVENTS, job.job_id):
        assert b"job-own-key" not in (record.value or b"")


async def test_worker_fails_job_on_http_500_after_retries_with_status_and_message(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"http-500:{uuid.uuid4()}"
    job = await submit(question)
    terminal = await topic_reader.wait_terminal(job.job_id)

    assert terminal.kind == "failed"
    assert terminal.http_status == 500
    assert terminal.error is not None and "agent crashed" in terminal.error
    assert terminal.error_type == "ChatServerError"
    assert terminal.line_count == 0
    assert scripted_chat.calls[question] == 4
    assert topic_reader.of(wire.TOPIC_LINES, job.job_id) == []


async def test_worker_retries_transient_errors_before_the_first_line(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"flaky:{uuid.uuid4()}"
    job = await submit(question)
    terminal = await topic_reader.wait_terminal(job.job_id)

    assert terminal.kind == "completed"
    assert scripted_chat.calls[question] == 3
    assert [x.line_no for x in _envelopes(topic_reader, job.job_id)] == list(range(1, 9))


async def test_worker_error_line_fails_the_job_but_keeps_the_rest_of_the_stream(
    submit: Submit, topic_reader: TopicReader
) -> None:
    job = await submit("error-line")
    terminal = await topic_reader.wait_terminal(job.job_id)

    assert terminal.kind == "failed"
    assert terminal.http_status == 200
    assert terminal.error == "tool exploded"
    assert terminal.error_type == "StreamErrorLine"
    lines = _envelopes(topic_reader, job.job_id)
    assert len(lines) == terminal.line_count == 5
    assert json.loads(lines[-1].raw)["id"] == wire.ID_USAGE


async def test_worker_aborts_the_chat_at_the_deadline_and_reads_to_the_end(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    job = await submit("slow", deadline_s=1.0)
    terminal = await topic_reader.wait_terminal(job.job_id, timeout_s=30)

    assert terminal.kind == "aborted"
    assert terminal.error == "deadline exceeded"
    assert {"chatId": terminal.chat_id, "sessionSettings": {"externalId": "analyst-1"}} in (
        scripted_chat.aborts
    )
    lines = _envelopes(topic_reader, job.job_id)
    assert len(lines) == terminal.line_count
    assert [json.loads(x.raw).get("id") for x in lines[-2:]] == [wire.ID_ABORTED, wire.ID_USAGE]


async def test_worker_records_a_stream_that_ended_with_aborted_as_aborted(
    submit: Submit, topic_reader: TopicReader
) -> None:
    job = await submit("aborted")
    terminal = await topic_reader.wait_terminal(job.job_id)

    assert terminal.kind == "aborted"
    assert terminal.error is not None and "chat_aborted" in terminal.error


async def test_worker_cancellation_aborts_a_running_job(
    submit: Submit, topic_reader: TopicReader, worker: WorkerProcess
) -> None:
    job = await submit("slow")
    await topic_reader.wait_for(lambda: len(topic_reader.of(wire.TOPIC_LINES, job.job_id)) >= 3)
    await send_record(
        worker.settings, wire.TOPIC_CANCELLATIONS, job.job_id, b'{"reason": "operator"}'
    )
    terminal = await topic_reader.wait_terminal(job.job_id, timeout_s=30)

    assert terminal.kind == "aborted"
    assert terminal.error == "cancelled: operator"


async def test_worker_keeps_an_unterminated_last_line(
    submit: Submit, topic_reader: TopicReader
) -> None:
    job = await submit("unterminated")
    terminal = await topic_reader.wait_terminal(job.job_id)

    lines = _envelopes(topic_reader, job.job_id)
    assert terminal.kind == "completed"
    assert [(x.raw, x.terminated) for x in lines[1:]] == [(b'{"content":"cut', False)]


async def test_worker_produces_a_line_larger_than_a_default_kafka_record(
    submit: Submit, topic_reader: TopicReader
) -> None:
    job = await submit("big")
    terminal = await topic_reader.wait_terminal(job.job_id)

    lines = _envelopes(topic_reader, job.job_id)
    assert terminal.kind == "completed"
    assert len(lines[1].raw) > BIG_LINE_BYTES


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"this is not json", "Invalid JSON"),
        (
            json.dumps({"job_id": "j", "run_id": "r", "question": "q", "chat_url": "http://x"}),
            "session_settings: Field required",
        ),
    ],
)
async def test_worker_dead_letters_a_record_that_is_not_a_job(
    worker: WorkerProcess, topic_reader: TopicReader, value: bytes | str, reason: str
) -> None:
    key = f"bad-{uuid.uuid4()}"
    raw = value.encode() if isinstance(value, str) else value
    await send_record(worker.settings, wire.TOPIC_REQUESTS, key, raw)
    await topic_reader.wait_for(lambda: bool(topic_reader.of(wire.TOPIC_REQUESTS_DLQ, key)))

    (record,) = topic_reader.of(wire.TOPIC_REQUESTS_DLQ, key)
    headers = dict(record.headers)
    assert record.value == raw
    assert reason in headers[wire.HEADER_DLQ_REASON].decode()
    assert (
        headers[wire.HEADER_DLQ_SOURCE_TOPIC] == worker.settings.topic(wire.TOPIC_REQUESTS).encode()
    )
    assert int(headers[wire.HEADER_DLQ_SOURCE_OFFSET]) >= 0
    assert int(headers[wire.HEADER_DLQ_SOURCE_PARTITION]) in range(4)
    assert topic_reader.of(wire.TOPIC_JOB_EVENTS, key) == []


async def test_worker_runs_jobs_concurrently(submit: Submit, topic_reader: TopicReader) -> None:
    slow = await submit("slow", deadline_s=3.0)
    quick: list[ChatJob] = [await submit("normal") for _ in range(3)]
    for job in quick:
        assert (await topic_reader.wait_terminal(job.job_id)).kind == "completed"
    assert topic_reader.terminal(slow.job_id) is None
    assert (await topic_reader.wait_terminal(slow.job_id)).kind == "aborted"


async def test_worker_drains_running_jobs_on_sigterm_and_commits_their_offsets(
    kafka_bootstrap: str, unique_name: NameFactory, scripted_chat: ScriptedChat, tmp_path: Path
) -> None:
    settings = worker_settings(kafka_bootstrap, unique_name("drain"), job_deadline_s=2.0)
    await ensure_topics(settings, ALL_TOPICS)
    running = start_worker(settings, tmp_path / "worker.log")
    async with reading(settings) as reader, submitting(settings, scripted_chat.chat_url) as submit:
        job = await submit("slow")
        await reader.wait_for(lambda: len(reader.of(wire.TOPIC_LINES, job.job_id)) >= 2)
        stopped_at = time.monotonic()
        code = await asyncio.to_thread(running.stop)
        assert code == 0, running.log()[-3000:]
        assert time.monotonic() - stopped_at >= 1.0  # it waited for the job
        terminal = await reader.wait_terminal(job.job_id, timeout_s=10)
    assert terminal.kind == "aborted"
    assert await _committed(settings) == await _end_offsets(settings)


async def test_worker_that_cannot_deliver_records_stops_without_acking_the_job(
    kafka_bootstrap: str, unique_name: NameFactory, scripted_chat: ScriptedChat, tmp_path: Path
) -> None:
    settings = worker_settings(kafka_bootstrap, unique_name("crash"))
    await ensure_topics(settings, ALL_TOPICS)
    async with reading(settings) as reader, submitting(settings, scripted_chat.chat_url) as submit:
        job = await submit(f"normal:{uuid.uuid4()}")
        broken = start_worker(settings, tmp_path / "broken.log", code=BROKEN_DELIVERY + RUN_WORKER)
        code = await asyncio.to_thread(broken.wait, 60)
        assert code != 0
        assert "kafka did not confirm records" in broken.log()
        assert reader.terminal(job.job_id) is None
        assert await _committed(settings) == {}

        running = start_worker(settings, tmp_path / "worker.log")
        try:
            terminal = await reader.wait_terminal(job.job_id)
        finally:
            assert await asyncio.to_thread(running.stop) == 0
    assert terminal.kind == "completed"
    assert await _committed(settings) == await _end_offsets(settings)


BROKEN_DELIVERY = """
import pipeline.kafka as kafka
async def delivered(self):
    raise kafka.RecordDeliveryError("injected: broker gone", topic="chat.lines")
kafka.JobOutput.delivered = delivered
"""


async def _committed(settings: Settings) -> dict[int, int]:
    """Returns: partition → committed offset of the worker group on ``chat.requests``."""
    topic = settings.topic(wire.TOPIC_REQUESTS)
    consumer = create_consumer(settings, group_id=settings.worker_group)
    await consumer.start()
    try:
        found = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(4)}
    finally:
        await consumer.stop()
    return {p: offset for p, offset in found.items() if offset}


async def _end_offsets(settings: Settings) -> dict[int, int]:
    topic = settings.topic(wire.TOPIC_REQUESTS)
    consumer = create_consumer(settings, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(4)])
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in ends.items() if offset}
