"""The worker facing hostile jobs and a hostile agent, on real Kafka (issue 24, classes 3 and 4).

One worker process serves the module with an outbound policy of its own: chat URLs may go to
the scripted Chat API and to a second server (``elsewhere``), the worker's own API key only to
the scripted Chat API. ``elsewhere`` stands for a host a questions file names to collect the key.
Calls are counted by the servers; nothing is timed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from models import wire
from pipeline.kafka.clients import ensure_topics
from tests.integration.pipeline.worker_support import (
    ALL_TOPICS,
    API_KEY,
    CHAT_PATH,
    FLOOD_LINES,
    ScriptedChat,
    Submit,
    TopicReader,
    WorkerProcess,
    serve_scripted_chat,
    start_worker,
    unique_prefix,
    worker_settings,
)

pytestmark = pytest.mark.integration

MAX_THROTTLED = 3
MAX_ATTEMPT_LINES = 5_000
"""The module worker's cap on one response's lines (default 20,000: fewer Kafka records keep the
test within its deadline on a loaded machine; the cap works the same)."""


@pytest.fixture(scope="module")
def scripted_chat() -> Iterator[ScriptedChat]:
    with serve_scripted_chat() as state:
        yield state


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[ScriptedChat]:
    """A second server: allowed as a chat target, not as a target of the worker's key."""
    with serve_scripted_chat() as state:
        yield state


@pytest.fixture(scope="module")
def worker(
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
    scripted_chat: ScriptedChat,
    elsewhere: ScriptedChat,
) -> Iterator[WorkerProcess]:
    settings = worker_settings(
        kafka_bootstrap,
        unique_prefix(),
        job_deadline_s=120.0,
        chat_url_allow=(scripted_chat.base_url, elsewhere.base_url),
        api_key_urls=(scripted_chat.base_url,),
        worker_max_throttled=MAX_THROTTLED,
        worker_max_attempt_lines=MAX_ATTEMPT_LINES,
    )
    asyncio.run(ensure_topics(settings, ALL_TOPICS))
    running = start_worker(settings, tmp_path_factory.mktemp("worker") / "worker.log")
    yield running
    code = running.stop()
    assert code == 0, f"worker exited with {code}:\n{running.log()[-5000:]}"


async def _dead_letter_reason(reader: TopicReader, job_id: str) -> str:
    await reader.wait_for(lambda: bool(reader.of(wire.TOPIC_REQUESTS_DLQ, job_id)))
    (record,) = reader.of(wire.TOPIC_REQUESTS_DLQ, job_id)
    reason: bytes = dict(record.headers)[wire.HEADER_DLQ_REASON]
    return reason.decode()


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",  # cloud metadata
        "http://127.0.0.1:15432" + CHAT_PATH,  # the archive's PostgreSQL port
        "http://attacker.example" + CHAT_PATH,
    ],
)
async def test_worker_dead_letters_a_job_whose_chat_url_is_not_allowed(
    submit: Submit, topic_reader: TopicReader, url: str
) -> None:
    job = await submit(f"normal:{uuid.uuid4()}", chat_url=url)

    reason = await _dead_letter_reason(topic_reader, job.job_id)
    terminal = await topic_reader.wait_terminal(job.job_id)
    assert "not under CHATSCRIBE_CHAT_URL_ALLOW" in reason and url in reason
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatUrlRefusedError"
    assert [e.kind for e in topic_reader.events(job.job_id)] == ["failed"]  # never started


async def test_worker_never_sends_its_own_key_to_a_target_it_is_not_bound_to(
    submit: Submit, topic_reader: TopicReader, elsewhere: ScriptedChat
) -> None:
    question = f"normal:{uuid.uuid4()}"
    job = await submit(question, chat_url=elsewhere.chat_url)  # no key of its own

    reason = await _dead_letter_reason(topic_reader, job.job_id)
    terminal = await topic_reader.wait_terminal(job.job_id)
    assert "CHATSCRIBE_API_KEY_URLS" in reason
    assert terminal.error_type == "ChatUrlRefusedError"
    assert elsewhere.calls[question] == 0
    assert all(API_KEY not in header for header in elsewhere.authorizations)


async def test_worker_sends_a_jobs_own_key_to_an_allowed_target(
    submit: Submit, topic_reader: TopicReader, elsewhere: ScriptedChat
) -> None:
    question = f"normal:{uuid.uuid4()}"
    job = await submit(question, chat_url=elsewhere.chat_url, api_key="elsewhere-key")

    terminal = await topic_reader.wait_terminal(job.job_id)
    assert terminal.kind == "completed"
    assert elsewhere.calls[question] == 1
    assert "Api-Key elsewhere-key" in elsewhere.authorizations
    assert all(API_KEY not in header for header in elsewhere.authorizations)


async def test_worker_gives_up_on_an_agent_throttling_with_retry_after_zero_forever(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"throttle-forever:{uuid.uuid4()}"
    job = await submit(question)

    terminal = await topic_reader.wait_terminal(job.job_id)
    assert scripted_chat.calls[question] == MAX_THROTTLED  # not thousands: a floor and a cap
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatThrottleLimitError"
    assert terminal.http_status == 429
    assert terminal.throttled == MAX_THROTTLED
    assert terminal.error is not None and f"gave up after {MAX_THROTTLED}" in terminal.error


@pytest.mark.timeout(180)
async def test_worker_stops_a_response_of_60000_lines_at_the_cap_and_keeps_what_arrived(
    submit: Submit, topic_reader: TopicReader, scripted_chat: ScriptedChat
) -> None:
    question = f"flood:{uuid.uuid4()}"
    job = await submit(question)

    terminal = await topic_reader.wait_terminal(job.job_id, timeout_s=150)
    assert FLOOD_LINES > MAX_ATTEMPT_LINES
    assert terminal.kind == "failed"
    assert terminal.error_type == "ChatResponseTooLargeError"
    assert terminal.error is not None and f"{MAX_ATTEMPT_LINES} lines" in terminal.error
    assert terminal.line_count == MAX_ATTEMPT_LINES
    assert len(topic_reader.of(wire.TOPIC_LINES, job.job_id)) == MAX_ATTEMPT_LINES
    assert scripted_chat.calls[question] == 1  # not asked again
