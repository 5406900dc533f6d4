"""LLM-paced chat turns (issue 13, benchmark "paced"): what a hosted agent streams, and when.

A hosted analytics agent is a language model: a turn lasts 10-40 s and streams hundreds of small
delta lines (2-3 words each) at 10-30 lines/s, plus a few large tool results. :func:`build_turn`
turns a recorded transcript (``bench/data/transcripts.jsonl``) into such a turn: its thinking
and answer deltas are replaced by :attr:`Pacing.thinking_deltas` and
:attr:`Pacing.answer_deltas` generated deltas, the first :attr:`Pacing.tool_results` tool
results are padded to a size drawn log-uniformly from :attr:`Pacing.tool_result_bytes`, and the
rest (the ``__cutoff__`` line with the chatId, the user line, the final answer, the ``__state__``
and ``__usage__`` sentinels) is kept, so the worker and the sink see a well-formed stream
(``chat-api-interface.md``, "Stream messages"). :func:`schedule` spreads the lines evenly over
:attr:`Pacing.turn_s`. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from bench.transcripts import KIB, Transcript, pad_tool_result

_SENTENCE: Final = (
    "flights departing from the three New York airports in March were mostly on time while "
    "delays grew in the summer months and carriers with larger fleets carried most of the "
    "passengers across the year"
)
WORDS: Final = tuple(_SENTENCE.split())


_DELTA_FIELDS: Final = {
    "thinking-delta": ("thinking", "thinking"),
    "answer-delta": ("content", "answer"),
}


@dataclass(frozen=True)
class Pacing:
    """How an LLM-paced turn looks (defaults: issue 13's 20 s turn of ~300 lines).

    Attributes:
        turn_s: Seconds from the first line to the last.
        lines_per_s: Lines per second; the turn has ``round(turn_s * lines_per_s)`` lines in all.
        thinking_share: Share of the delta lines that are thinking deltas (50 of 290).
        words_per_delta: Inclusive range of words per delta.
        tool_results: Tool results padded to a large size.
        tool_result_bytes: Inclusive range of a padded tool result's size, bytes.
    """

    turn_s: float = 20.0
    lines_per_s: float = 15.0
    thinking_share: float = 50 / 290
    words_per_delta: tuple[int, int] = (2, 3)
    tool_results: int = 2
    tool_result_bytes: tuple[int, int] = (4 * KIB, 64 * KIB)

    @property
    def lines(self) -> int:
        """Lines of a turn."""
        return max(round(self.turn_s * self.lines_per_s), 1)


def usable(transcript: Transcript, pacing: Pacing) -> bool:
    """Returns: whether ``transcript`` has thinking and answer deltas and enough tool results."""
    kinds = [_kind(json.loads(line)) for line in transcript.lines]
    return (
        "thinking-delta" in kinds
        and "answer-delta" in kinds
        and kinds.count("tool-result") >= pacing.tool_results
    )


def build_turn(transcript: Transcript, pacing: Pacing, rng: random.Random) -> list[bytes]:
    r"""Returns: the paced turn's lines (no ``\n``) made from ``transcript`` (module docstring).

    Raises:
        ValueError: ``transcript`` is not :func:`usable`.
    """
    if not usable(transcript, pacing):
        raise ValueError("transcript has no deltas or too few tool results")
    messages = [json.loads(line) for line in transcript.lines]
    kept = sum(1 for m in messages if not _kind(m).endswith("-delta"))
    deltas = max(pacing.lines - kept, 2)
    thinking = max(round(deltas * pacing.thinking_share), 1)
    texts = {
        "thinking": _delta_texts(thinking, pacing, rng),
        "answer": _delta_texts(deltas - thinking, pacing, rng),
    }
    out: list[bytes] = []
    padded = 0
    for raw, message in zip(transcript.lines, messages, strict=True):
        kind = _kind(message)
        if kind.endswith("-delta"):
            field, which = _DELTA_FIELDS[kind]
            if texts[which]:
                out.extend(_dump({**message, field: text}) for text in texts[which])
                texts[which] = []
        elif kind == "tool-result" and padded < pacing.tool_results:
            out.append(pad_tool_result(raw, _size(pacing, rng)))
            padded += 1
        else:
            out.append(raw)
    return out


def schedule(lines: int, pacing: Pacing) -> list[float]:
    """Returns: each line's send time in seconds after the request, evenly over the turn."""
    if lines <= 1:
        return [0.0] * lines
    step = pacing.turn_s / (lines - 1)
    return [index * step for index in range(lines)]


def _kind(message: Any) -> str:
    if not isinstance(message, dict):
        return "other"
    if isinstance(message.get("toolCall"), dict) and "result" in message["toolCall"]:
        return "tool-result"
    if message.get("isDelta") is True and isinstance(message.get("thinking"), str):
        return "thinking-delta"
    if message.get("isDelta") is True and isinstance(message.get("content"), str):
        return "answer-delta"
    return "other"


def _delta_texts(count: int, pacing: Pacing, rng: random.Random) -> list[str]:
    low, high = pacing.words_per_delta
    texts = []
    for _ in range(count):
        words = rng.randint(low, high)
        texts.append(" " + " ".join(rng.choice(WORDS) for _ in range(words)))
    return texts


def _size(pacing: Pacing, rng: random.Random) -> int:
    low, high = pacing.tool_result_bytes
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def _dump(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def turns(
    transcripts: Sequence[Transcript], pacing: Pacing, *, seed: int = 13
) -> list[list[bytes]]:
    """Returns: one paced turn per usable transcript, same seed same turns.

    Raises:
        ValueError: No transcript is usable.
    """
    rng = random.Random(seed)
    found = [build_turn(t, pacing, rng) for t in transcripts if usable(t, pacing)]
    if not found:
        raise ValueError("no transcript has deltas and enough tool results")
    return found
