from __future__ import annotations

import pytest

from models.chat import StreamMessage
from pipeline.attempts import AttemptState, Outcome, outcome
from pipeline.errors import ChatConnectError, ChatNotFoundError, ChatServerError, StreamBrokenError

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
