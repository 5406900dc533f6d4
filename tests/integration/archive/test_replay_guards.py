"""The replay server keeps row-level scope and abort ownership (fresh schema per test).

One conversation is archived by the real :class:`~pipeline.archive.writer.ArchiveWriter`: asked
as ``jfk-ops-1`` with ``origin = JFK``, its lines a second apart; the replay server serves it
under uvicorn on a loopback port.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from models import wire
from models.records import ChatJob, JobEvent
from pipeline.archive.writer import ArchiveWriter
from pipeline.replay.server import create_app
from pipeline.settings import Settings
from tests.integration.archive.archive_records import T0, URL, envelopes, raw
from tests.integration.archive.archive_stack import serve_in_thread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

API_KEY = "replay-test-key"
QUESTION = "How many flights left?"
JFK: dict[str, Any] = {
    "externalId": "jfk-ops-1",
    "userAttributes": [{"name": "origin", "value": "JFK"}],
    "groups": ["ops"],
}
LINES = [
    raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "c-jfk"}),
    raw(id="u1", role="user", content=QUESTION, sort=1),
    raw(id="f1", role="assistant", content="JFK: 111,279.", graphPath=["final"], sort=2),
]
RECORDED = b"".join(line + b"\n" for line in LINES)
AUTH = {"Authorization": f"Api-Key {API_KEY}"}


@pytest.fixture
def archived(engine: sa.Engine) -> str:
    """The JFK conversation, completed; returns its job id."""
    job_id = str(uuid.uuid4())
    job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": "r1",
            "question": QUESTION,
            "session_settings": JFK,
            "chat_url": URL,
        }
    )
    common = {"job_id": job_id, "run_id": "r1", "at": T0}
    events = [
        JobEvent(**common, kind="accepted", job=job),
        JobEvent(**common, kind="started", attempt=1, job=job),
        JobEvent(**common, kind="completed", attempt=1, line_count=len(LINES)),
    ]
    ArchiveWriter(engine).write_batch(envelopes(job_id, LINES), events)
    return job_id


def _serve(settings: Settings, engine: sa.Engine, speed: float) -> Iterator[str]:
    app = create_app(settings, speed=speed, api_keys=[API_KEY], engine=engine)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}" + wire.CHAT_PATH_TEMPLATE.format(
            cloud_region="local", account_name="demo", agent_id="1"
        )


@pytest.fixture
def replay_url(settings: Settings, engine: sa.Engine, archived: str) -> Iterator[str]:
    """The replay server without delays."""
    yield from _serve(settings, engine, speed=0)


@pytest.fixture
def slow_replay_url(settings: Settings, engine: sa.Engine, archived: str) -> Iterator[str]:
    """The replay server pausing 10,000 times the recorded gaps (capped at 30 s)."""
    yield from _serve(settings, engine, speed=0.0001)


def _ask(url: str, asked_as: dict[str, Any]) -> httpx.Response:
    body = {"input": QUESTION, "sessionSettings": asked_as}
    return httpx.post(url, json=body, headers=AUTH, timeout=30)


@pytest.mark.parametrize(
    "asked_as",
    [
        {"externalId": "jfk-ops-1"},
        {**JFK, "userAttributes": [{"name": "origin", "value": "LGA"}]},
        {**JFK, "userAttributes": [*JFK["userAttributes"], {"name": "carrier", "value": "UA"}]},
        {**JFK, "groups": ["ops", "admin"]},
        {**JFK, "securityContext": {"origin": "EWR"}},
    ],
)
def test_a_request_with_other_row_level_attributes_gets_no_archived_conversation(
    replay_url: str, asked_as: dict[str, Any]
) -> None:
    refused = _ask(replay_url, asked_as)
    assert refused.status_code == 404
    assert "row-level attributes" in refused.json()["error"]


def test_the_same_identity_and_attributes_in_any_order_replay_the_conversation(
    replay_url: str,
) -> None:
    same = {**JFK, "groups": ["ops", "ops"], "email": "ops@jfk.example"}
    assert _ask(replay_url, same).content == RECORDED


def test_only_the_identity_that_started_a_replay_can_abort_it(slow_replay_url: str) -> None:
    abort_url = slow_replay_url + wire.ABORT_SUFFIX
    body = {"input": QUESTION, "sessionSettings": JFK}
    with httpx.stream("POST", slow_replay_url, json=body, headers=AUTH, timeout=60) as response:
        lines = response.iter_lines()
        chat_id = json.loads(next(lines))["state"]["chatId"]
        other = {"chatId": chat_id, "sessionSettings": {"externalId": "lga-ops-1"}}
        assert httpx.post(abort_url, json=other, headers=AUTH).status_code == 403
        anonymous = {"chatId": chat_id}
        assert httpx.post(abort_url, json=anonymous, headers=AUTH).status_code == 403
        owner = {"chatId": chat_id, "sessionSettings": {"externalId": "jfk-ops-1"}}
        assert httpx.post(abort_url, json=owner, headers=AUTH).status_code == 204
        rest = [json.loads(line)["id"] for line in lines]
    assert rest == [wire.ID_ABORTED]


def test_an_abort_after_a_replay_finished_leaves_later_replays_whole(replay_url: str) -> None:
    assert _ask(replay_url, JFK).content == RECORDED
    abort = {"chatId": "c-jfk", "sessionSettings": JFK}
    late = httpx.post(replay_url + wire.ABORT_SUFFIX, json=abort, headers=AUTH, timeout=30)
    assert late.status_code == 404
    assert _ask(replay_url, JFK).content == RECORDED
