"""The answer a thread's state holds (pipeline.transcript.thread_state)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.transcript.thread_state import StateAnswer, state_answer


@pytest.mark.parametrize(
    "state",
    [None, {}, {"messages": "not a list"}, {"messages": []}, {"messages": [1, None, "x"]}],
)
def test_state_without_messages_holds_no_answer(state: Any) -> None:
    assert state_answer(state) is None


def test_answer_is_the_last_text_answer_after_the_last_question() -> None:
    messages = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "id": "a1"},
        {"role": "USER", "content": "Q2"},
        {"role": "assistant", "content": "thinking aloud", "id": "a2"},
        {"role": "assistant", "content": "A2", "id": "a3"},
        {"role": "assistant", "content": None, "id": "a4"},
    ]
    assert state_answer({"messages": messages}) == StateAnswer("a3", "A2")


def test_tool_only_ai_message_is_not_an_answer() -> None:
    messages = [{"type": "human", "content": "Q"}, {"type": "ai", "content": [], "id": 7}]
    assert state_answer({"messages": messages}) is None
