"""The paced turns of the LLM-paced benchmark (bench/paced_turns.py): pure, no I/O."""

from __future__ import annotations

import json
import random

import pytest

from bench.paced_turns import Pacing, build_turn, schedule, turns, usable
from bench.transcripts import load_transcripts


def _kinds(lines: list[bytes]) -> list[str]:
    found = []
    for line in lines:
        message = json.loads(line)
        if isinstance(message.get("toolCall"), dict) and "result" in message["toolCall"]:
            found.append("tool-result")
        elif message.get("isDelta") is True and "thinking" in message:
            found.append("thinking")
        elif message.get("isDelta") is True and "content" in message:
            found.append("answer")
        else:
            found.append(str(message.get("id")))
    return found


def test_default_turn_has_the_issues_shape() -> None:
    pacing = Pacing()
    (turn, *_) = turns(load_transcripts(), pacing)
    kinds = _kinds(turn)
    assert len(turn) == 300 == pacing.lines
    assert 45 <= kinds.count("thinking") <= 55
    assert 230 <= kinds.count("answer") <= 245
    assert kinds[0] == "__cutoff__" and "__state__" in kinds and kinds[-1] == "__usage__"
    sizes = [len(line) for line, kind in zip(turn, kinds, strict=True) if kind == "tool-result"]
    assert sum(4 * 1024 <= size <= 66 * 1024 for size in sizes) >= pacing.tool_results


def test_deltas_have_two_or_three_words() -> None:
    (turn, *_) = turns(load_transcripts(), Pacing(turn_s=4.0))
    for line, kind in zip(turn, _kinds(turn), strict=True):
        if kind in ("thinking", "answer"):
            message = json.loads(line)
            text = message["thinking"] if kind == "thinking" else message["content"]
            assert len(text.split()) in (2, 3)


def test_same_seed_same_turns_and_schedule_spans_the_turn() -> None:
    pacing = Pacing(turn_s=10.0, lines_per_s=12.0)
    assert turns(load_transcripts(), pacing) == turns(load_transcripts(), pacing)
    offsets = schedule(pacing.lines, pacing)
    assert offsets[0] == 0.0 and offsets[-1] == pytest.approx(10.0)
    assert offsets == sorted(offsets)


def test_transcript_without_deltas_is_refused() -> None:
    transcript = next(t for t in load_transcripts() if not usable(t, Pacing(tool_results=9)))
    with pytest.raises(ValueError, match="tool results"):
        build_turn(transcript, Pacing(tool_results=9), random.Random(1))
