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

import httpx
import pytest
from aiokafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from models import wire
from models.records import ChatJob, LineEnvelope
from pipeline.kafka.clients import DEFAULT_PARTITIONS, create_consumer, ensure_topics, key_partition
from pipeline.settings import Settings
from tests.integration.pipeline.worker_support import (
    ALL_TOPICS,
    API_KEY,
    BIG_LINE_BYTES,
    HUGE_LINE_BYTES,
    RUN_WORKER,
    ScriptedChat,
    Submit,
    TopicReader,
    WorkerProcess,
    malformed_lines,
    normal_lines,
    reading,
    send_record,
    snapshot_lines,
    start_worker,
    submitting,
    worker_settings,
)

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
    producers_choice = {key_partition(job.job_id.encode(), range(DEFAULT_PARTITIONS))}
    assert {r.partition for r in topic_reader.of(wire.TOPIC_LINES, job.job_id)} == producers_choice
    assert {r.partition for r in topic_reader.of(wire.TOPIC_JOB_EVENTS, job.job_id)} == (
        producers_choice
    )
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


async def test_worker_archives_every_malformed_line_raw_and_the_stream_goes_on(
    submit: Submit, topic_reader: TopicReader
) -> None:
    job = await submit(f"malformed:{uuid.uuid4()}")
    terminal = await topic_reader.wait_terminal(job.job_id, timeout_s=120)

    lines = _envelopes(topic_reader, job.job_id)
    assert terminal.chat_id is not None
    sent = malformed_lines(terminal.chat_id)
    assert [x.raw for x in lines] == sent  # byte for byte, the 20 MiB line included
    assert terminal.kind == "completed" and terminal.line_count == len(sent)
    by_no = {x.line_no: x for x in lines}
    invalid_json, invalid_utf8, unknown_fields, unknown_sentinel = (by_no[n] for n in (2, 3, 4, 5))
    assert invalid_json.parse_error is not None and "invalid JSON" in invalid_json.parse_error
    assert invalid_utf8.parse_error is not None and "UTF-8" in invalid_utf8.parse_error
    assert unknown_fields.parse_error is None and unknown_fields.message is not None
    assert unknown_fields.message.to_wire()["isStructuredResponse"] is True
    assert unknown_sentinel.parse_error is None and unknown_sentinel.message is not None
    assert unknown_sentinel.message.id == "__mystery__"
    assert len(by_no[6].raw) > HUGE_LINE_BYTES and by_no[6].parse_error is None
    truncated = lines[-1]
    assert truncated.terminated is False
    assert truncated.parse_error is not None and "invalid JSON" in truncated.parse_error
    assert all(x.terminated for x in lines[:-1])


async def test_worker_fails_a_4xx_at_once_with_its_status_and_message(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"http-400:{uuid.uuid4()}"
    job = await submit(question)
    terminal = await topic_reader.wait_terminal(job.job_id)

    assert (terminal.kind, terminal.http_status, terminal.error_type) == (
        "failed",
        400,
        "ChatClientError",
    )
    assert terminal.error is not None and "bad externalId" in terminal.error
    assert scripted_chat.calls[question] == 1


async def test_worker_continues_a_stream_broken_mid_way_as_attempt_two_from_the_state(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"break:{uuid.uuid4()}"
    job = await submit(question)
    await topic_reader.wait_for(lambda: len(topic_reader.terminals(job.job_id)) == 2)
    first, second = topic_reader.terminals(job.job_id)

    assert (first.attempt, first.kind, first.error_type) == (1, "failed", "StreamBrokenError")
    assert (second.attempt, second.kind) == (2, "completed")
    assert scripted_chat.calls[question] == 1  # the question was not asked again
    assert second.chat_id == first.chat_id is not None
    fetch = {"chatId": first.chat_id, "sessionSettings": {"externalId": "analyst-1"}}
    assert fetch in scripted_chat.state_fetches
    await topic_reader.wait_for(lambda: len(_envelopes(topic_reader, job.job_id)) == 5)
    lines = _envelopes(topic_reader, job.job_id)
    assert [(x.attempt, x.line_no) for x in lines] == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]
    assert [x.raw for x in lines if x.attempt == 2] == snapshot_lines(first.chat_id)


async def test_worker_serves_prometheus_metrics_with_real_values_after_jobs(
    submit: Submit, topic_reader: TopicReader, worker: WorkerProcess
) -> None:
    flaky = await submit(f"flaky:{uuid.uuid4()}")
    normal = await submit(f"normal:{uuid.uuid4()}")
    for job in (flaky, normal):
        assert (await topic_reader.wait_terminal(job.job_id)).kind == "completed"
    port = worker.settings.metrics_port

    def scrape() -> dict[str, float]:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        return {
            sample.name
            + (str(sorted(sample.labels.items())) if sample.labels else ""): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    requests_topic = worker.settings.topic(wire.TOPIC_REQUESTS)

    def lag_reported() -> bool:
        lags = [k for k in scrape() if k.startswith("chatscribe_worker_consumer_lag_records")]
        return len(lags) == 4 and all(requests_topic in k for k in lags)

    await topic_reader.wait_for(lag_reported, timeout_s=30)
    # every job of the module has ended, so the gauge is back to zero
    await topic_reader.wait_for(lambda: scrape()["chatscribe_worker_jobs_in_flight"] == 0, 30)
    values = scrape()
    assert values["chatscribe_worker_jobs_total[('outcome', 'completed')]"] >= 2
    assert values["chatscribe_worker_lines_total"] >= 16
    assert values["chatscribe_worker_first_line_seconds_count"] >= 2
    assert values["chatscribe_worker_final_answer_seconds_count"] >= 2
    assert values["chatscribe_worker_job_seconds_count"] >= 2
    assert values["chatscribe_worker_stream_retries_total[('error_type', 'ChatServerError')]"] >= 2
    assert "chatscribe_worker_dead_letters_total" in values


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
        ends = {(e.attempt, e.kind, e.error_type) for e in reader.terminals(job.job_id)}
    assert terminal.kind == "completed"
    # When the broken worker's `started` reached Kafka, the restart is attempt 2, and the lost
    # attempt 1 ends once, recorded by the takeover.
    lost = {(a, "failed", "AttemptSuperseded") for a in range(1, terminal.attempt)}
    assert ends == {(terminal.attempt, "completed", None), *lost}
    assert await _committed(settings) == await _end_offsets(settings)


BROKEN_DELIVERY = """
import pipeline.kafka.clients as kafka
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
