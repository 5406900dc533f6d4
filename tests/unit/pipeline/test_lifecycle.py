from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models.chat import SessionSettings
from models.records import ChatJob, JobEvent
from pipeline.transcript.lifecycle import JobState, fold

T0 = datetime(2026, 1, 1, tzinfo=UTC)
URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
JOB = ChatJob(
    job_id="j1",
    run_id="r1",
    question="How many flights?",
    persona="analyst",
    session_settings=SessionSettings(external_id="analyst-1"),
    chat_url=URL,
    submitted_at=T0,
)


def _event(kind: str, attempt: int = 1, seconds: float = 0, **fields: Any) -> JobEvent:
    if kind in ("accepted", "started"):
        fields.setdefault("job", JOB)
    return JobEvent.model_validate(
        {
            "job_id": "j1",
            "run_id": "r1",
            "kind": kind,
            "attempt": 0 if kind == "accepted" else attempt,
            "at": T0 + timedelta(seconds=seconds),
            **fields,
        }
    )


LIFE = [
    _event("accepted"),
    _event("started", seconds=1),
    _event("first_line", seconds=2, chat_id="c1", line_count=1),
    _event("completed", seconds=3, chat_id="c1", line_count=9, http_status=200),
]


def test_events_in_order_give_a_completed_job() -> None:
    state = fold(None, LIFE)
    assert (state.status, state.attempts, state.last_attempt) == ("completed", 1, 1)
    assert (state.persona, state.question, state.identity) == (
        "analyst",
        "How many flights?",
        "external:analyst-1",
    )
    assert state.session_settings == {"externalId": "analyst-1"}
    assert (state.chat_id, state.line_count, state.http_status) == ("c1", 9, 200)
    assert state.submitted_at == T0
    assert state.started_at == T0 + timedelta(seconds=1)
    assert state.first_line_at == T0 + timedelta(seconds=2)
    assert state.finished_at == T0 + timedelta(seconds=3)


def test_order_and_duplicates_do_not_matter() -> None:
    expected = fold(None, LIFE)
    assert fold(None, list(reversed(LIFE)) + LIFE) == expected
    one_by_one: JobState | None = None
    for event in reversed(LIFE):
        one_by_one = fold(one_by_one, [event])
    assert one_by_one == expected


def test_late_started_never_overwrites_a_terminal_status() -> None:
    done = fold(None, [_event("completed", line_count=3)])
    later = fold(done, [_event("started", seconds=-5)])
    assert later.status == "completed"
    assert later.started_at == T0 - timedelta(seconds=5)
    assert later.question == "How many flights?"


def test_first_terminal_event_of_an_attempt_wins() -> None:
    state = fold(None, [_event("aborted", seconds=1, error="cancelled", line_count=2)])
    state = fold(state, [_event("failed", seconds=2, error="boom", line_count=5)])
    assert (state.status, state.error, state.line_count) == ("aborted", "cancelled", 2)


def test_a_new_attempt_starts_afresh_and_old_attempts_are_ignored() -> None:
    failed = fold(None, [*LIFE[:2], _event("failed", seconds=3, error="HTTP 500", line_count=0)])
    retried = fold(failed, [_event("started", attempt=2, seconds=10)])
    assert (retried.status, retried.last_attempt, retried.attempts) == ("running", 2, 2)
    assert (retried.error, retried.finished_at, retried.line_count) == (None, None, None)
    stale = fold(retried, [_event("completed", attempt=1, seconds=11, line_count=4)])
    assert stale == retried


def test_job_row_can_start_from_events_without_the_job() -> None:
    state = fold(None, [_event("first_line", chat_id="c1")])
    assert (state.status, state.question, state.chat_id) == ("running", None, "c1")


def test_fold_refuses_events_of_another_job() -> None:
    other = _event("started").model_copy(update={"job_id": "j2"})
    with pytest.raises(ValueError, match="j2"):
        fold(fold(None, LIFE), [other])


def test_a_superseded_attempt_ends_failed_and_the_takeover_decides_the_job() -> None:
    lost = [
        _event("accepted"),
        _event("started", seconds=1, worker_id="worker-a"),
        _event("first_line", seconds=2, chat_id="c1"),
    ]
    superseded = _event(
        "failed", seconds=20, chat_id="c1", error_type="AttemptSuperseded", worker_id="worker-b"
    )
    takeover = [
        _event("started", 2, seconds=21, worker_id="worker-b"),
        _event("completed", 2, seconds=22, chat_id="c1", line_count=3, http_status=200),
    ]
    closed = fold(None, [*lost, superseded])
    assert (closed.status, closed.last_attempt, closed.error_type) == (
        "failed",
        1,
        "AttemptSuperseded",
    )
    for order in ([*lost, superseded, *takeover], [*takeover, superseded, *lost]):
        state = fold(None, order)
        assert (state.status, state.last_attempt, state.attempts) == ("completed", 2, 2)
        assert (state.worker_id, state.error_type, state.line_count) == ("worker-b", None, 3)
