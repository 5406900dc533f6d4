from __future__ import annotations

from typing import Any

import pytest

from models.chat import StreamMessage
from models.records import JobEvent
from pipeline.errors import ChatConnectError, ChatNotFoundError, ChatServerError, StreamBrokenError
from pipeline.worker.attempts import (
    AttemptPlan,
    AttemptState,
    Outcome,
    PriorAttempts,
    outcome,
    plan_attempt,
    superseded_event,
)

URL = "http://chat.test/x/stream-chat-state"


def _state(*lines: dict[str, object], opened: bool = True) -> AttemptState:
    state = AttemptState(http_status=200 if opened else None)
    for line in lines:
        state.observe(StreamMessage.model_validate(line))
    return state


def test_observe_takes_the_chat_id_from_the_cutoff_line_once() -> None:
    state = AttemptState()
    cutoff = StreamMessage.model_validate({"id": "__cutoff__", "state": {"chatId": "c1"}})
    later = StreamMessage.model_validate({"id": "__state__", "state": {"chatId": "c2"}})
    assert state.observe(cutoff) is True
    assert state.observe(later) is False
    assert state.observe(None) is False
    assert state.chat_id == "c1"


def test_observe_keeps_the_first_error_line_and_serialises_non_string_errors() -> None:
    state = _state({"error": {"code": 7}}, {"error": "second"})
    assert state.error_line == '{"code": 7}'


def test_clean_stream_is_completed_with_status_200() -> None:
    assert outcome(_state({"id": "m1"}), abort_reason=None, error=None) == Outcome("completed", 200)


def test_error_line_inside_200_fails_the_job() -> None:
    result = outcome(_state({"error": "tool exploded"}), abort_reason=None, error=None)
    assert result == Outcome("failed", 200, "tool exploded", "StreamErrorLine")


def test_aborted_sentinel_is_aborted_with_its_code() -> None:
    state = _state({"id": "__aborted__", "type": "abort", "code": "chat_aborted"})
    result = outcome(state, abort_reason=None, error=None)
    assert result.kind == "aborted"
    assert result.error == "chat aborted by the service (chat_aborted)"


def test_suspended_stream_fails_as_retryable() -> None:
    result = outcome(_state({"id": "__suspended__"}), abort_reason=None, error=None)
    assert (result.kind, result.error_type) == ("failed", "ChatSuspended")


def test_http_error_fails_with_its_status_and_type() -> None:
    error = ChatNotFoundError("agent not found", status_code=404, url=URL)
    result = outcome(AttemptState(), abort_reason=None, error=error)
    assert result == Outcome("failed", 404, str(error), "ChatNotFoundError")


@pytest.mark.parametrize(
    "error",
    [
        None,
        StreamBrokenError("reset", url=URL, lines_read=3),
    ],
)
def test_requested_abort_wins_when_the_stream_ends_or_breaks(error: Exception | None) -> None:
    state = _state({"error": "late error"})
    result = outcome(state, abort_reason="deadline exceeded", error=error)
    assert result == Outcome("aborted", 200, "deadline exceeded")


def test_stream_closed_by_the_worker_after_an_abort_request_says_so() -> None:
    result = outcome(_state(), abort_reason="cancelled: operator", error=TimeoutError())
    assert result == Outcome(
        "aborted", 200, "cancelled: operator; stream closed by the worker", "StreamClosedByWorker"
    )


@pytest.mark.parametrize(
    "error",
    [
        ChatServerError("boom", status_code=500, url=URL),
        ChatConnectError("refused", url=URL),
    ],
)
def test_call_failure_during_an_abort_request_is_still_a_failure(error: Exception) -> None:
    result = outcome(AttemptState(), abort_reason="deadline exceeded", error=error)
    assert result.kind == "failed"
    assert result.error_type == type(error).__name__


def _event(kind: str, attempt: int, **fields: Any) -> JobEvent:
    return JobEvent.model_validate(
        {"job_id": "j1", "run_id": "r1", "kind": kind, "attempt": attempt, **fields}
    )


def test_prior_attempts_know_the_started_attempt_and_the_chat_id_of_its_first_line() -> None:
    prior = PriorAttempts()
    for event in [
        _event("started", 1),
        _event("first_line", 1, chat_id="c1", line_count=1),
    ]:
        prior = prior.observe(event)
    assert prior == PriorAttempts(attempt=1, open=True, chat_id="c1", lost=True)
    assert plan_attempt(prior) == AttemptPlan(2, "state", "c1")


def test_started_event_chat_id_alone_does_not_mean_the_question_was_received() -> None:
    prior = PriorAttempts().observe(_event("started", 1, chat_id="follow-up-thread"))
    assert prior.chat_id is None
    assert plan_attempt(prior) == AttemptPlan(2, "ask")


def test_a_final_terminal_event_closes_the_job_and_a_broken_one_keeps_it_open() -> None:
    started = PriorAttempts().observe(_event("started", 1))
    done = started.observe(_event("completed", 1, chat_id="c1", line_count=5))
    broken = started.observe(
        _event("failed", 1, chat_id="c1", line_count=3, error_type="StreamBrokenError")
    )
    assert plan_attempt(done) is None
    assert plan_attempt(broken) == AttemptPlan(2, "state", "c1")


def test_a_fresh_job_is_asked_as_attempt_one_and_too_many_attempts_are_exhausted() -> None:
    assert plan_attempt(PriorAttempts()) == AttemptPlan(1, "ask")
    prior = PriorAttempts(attempt=3, open=True, chat_id="c1")
    assert plan_attempt(prior, max_attempts=3) == AttemptPlan(4, "exhausted", "c1")


def test_older_attempt_events_do_not_reopen_a_later_attempt() -> None:
    prior = PriorAttempts().observe(_event("started", 2)).observe(_event("completed", 2))
    assert prior.observe(_event("started", 1)) == PriorAttempts(attempt=2, open=False)


def _state_line(messages: list[dict[str, Any]]) -> StreamMessage:
    return StreamMessage.model_validate(
        {"id": "__state__", "state": {"chatId": "c1", "messages": messages}}
    )


@pytest.mark.parametrize(
    ("messages", "answered"),
    [
        ([{"role": "user"}, {"role": "assistant", "content": "42"}], True),
        ([{"role": "assistant"}, {"role": "user"}], False),
        ([{"type": "human"}, {"type": "ai", "content": [{"type": "text", "text": "42"}]}], True),
        ([{"type": "human"}, {"type": "ai", "tool_calls": [{"name": "sql"}]}], False),
        ([], False),
    ],
)
def test_state_fetch_is_completed_only_when_the_state_holds_an_answer(
    messages: list[dict[str, Any]], answered: bool
) -> None:
    state = AttemptState(chat_id="c1", state_fetch=True, http_status=200)
    state.observe(_state_line(messages))
    result = outcome(state, abort_reason=None, error=None)
    assert state.answered is answered
    assert result.kind == ("completed" if answered else "failed")


def test_a_lost_attempt_is_closed_once_as_superseded_and_stays_open() -> None:
    lost = (
        PriorAttempts().observe(_event("started", 1)).observe(_event("first_line", 1, chat_id="c1"))
    )
    event = superseded_event(lost, job_id="j1", run_id="r1", worker_id="w2")
    assert event is not None
    assert (event.kind, event.attempt, event.error_type) == ("failed", 1, "AttemptSuperseded")
    assert (event.chat_id, event.line_count, event.worker_id) == ("c1", None, "w2")
    closed = lost.observe(event)
    assert closed == PriorAttempts(attempt=1, open=True, chat_id="c1", lost=False)
    assert superseded_event(closed, job_id="j1", run_id="r1", worker_id="w3") is None
    assert plan_attempt(closed) == AttemptPlan(2, "state", "c1")  # the takeover may die too
    again = closed.observe(_event("started", 2))
    assert again.lost and again.attempt == 2


def test_attempts_that_ended_are_not_superseded() -> None:
    started = PriorAttempts().observe(_event("started", 1))
    for ended in (
        started.observe(_event("completed", 1, line_count=3)),
        started.observe(_event("failed", 1, line_count=3, error_type="StreamBrokenError")),
        PriorAttempts(),
    ):
        assert superseded_event(ended, job_id="j1", run_id="r1", worker_id="w") is None
