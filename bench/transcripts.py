r"""Recorded transcripts: the fixture, the send-time stamp, and the sink's line mix.

``bench/data/transcripts.jsonl`` holds one chat stream per line, recorded from our Chat API
(``python -m bench record``): ``{"question", "persona", "session_settings", "lines"}`` where
``lines`` are the NDJSON lines exactly as served, without ``\n``.

The synthetic endpoint stamps each line with the wall-clock time it sent it, as the first member
``"benchSentAt": <seconds since the epoch>`` (:func:`stamp_line`); a reader recovers it with
:func:`sent_at_of`. Stream messages allow unknown members (field notes), so the worker and the
archive treat a stamped line like any other.

The sink benchmark wants tool results of 1-100 KiB (issue 6): :func:`sink_mix` pads every tool
result of the recorded lines to a size drawn log-uniformly from that range, deterministically.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

FIXTURE: Final = Path(__file__).resolve().parent / "data" / "transcripts.jsonl"
SENT_AT_PREFIX: Final = b'{"benchSentAt":'
KIB: Final = 1024
TOOL_RESULT_MIN_BYTES: Final = 1 * KIB
TOOL_RESULT_MAX_BYTES: Final = 100 * KIB


@dataclass(frozen=True)
class Transcript:
    r"""One recorded chat stream.

    Attributes:
        question: The chat request's ``input``.
        persona: The persona of ``examples/questions.yaml`` it was asked as.
        session_settings: The request's ``sessionSettings`` (wire names).
        lines: The stream's lines as served, UTF-8, without ``\n``.
    """

    question: str
    persona: str
    session_settings: dict[str, Any]
    lines: tuple[bytes, ...]

    @property
    def key(self) -> str:
        """The request this transcript answers: :func:`request_key` of question and identity."""
        return request_key(self.question, self.session_settings)

    def to_json(self) -> str:
        """Returns: the fixture line (one JSON object)."""
        lines = [line.decode("utf-8") for line in self.lines]
        data = {
            "question": self.question,
            "persona": self.persona,
            "session_settings": self.session_settings,
            "lines": lines,
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Transcript:
        """Parses a fixture line. Raises ``ValueError`` or ``KeyError`` on a malformed one."""
        data = json.loads(text)
        lines = tuple(line.encode("utf-8") for line in data["lines"])
        return cls(data["question"], data["persona"], data["session_settings"], lines)


def request_key(question: str, session_settings: dict[str, Any]) -> str:
    r"""Returns: ``"<question>\x00<externalId or email or internalId>"``."""
    who = next(
        (
            str(session_settings[k])
            for k in ("externalId", "email", "internalId")
            if session_settings.get(k)
        ),
        "",
    )
    return f"{question}\x00{who}"


def load_transcripts(path: Path = FIXTURE) -> list[Transcript]:
    """Reads the fixture.

    Raises:
        FileNotFoundError: No fixture (record one with ``python -m bench record``).
        ValueError: A line is not a transcript.
    """
    found = [
        Transcript.from_json(text)
        for text in path.read_text(encoding="utf-8").splitlines()
        if text.strip()
    ]
    if not found:
        raise ValueError(f"{path} holds no transcript")
    return found


def save_transcripts(transcripts: Sequence[Transcript], path: Path = FIXTURE) -> None:
    """Writes the fixture, one transcript per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(t.to_json() + "\n" for t in transcripts), encoding="utf-8")


def stamp_line(line: bytes, sent_at: float) -> bytes:
    """Returns: ``line`` (a JSON object) with ``"benchSentAt": sent_at`` as its first member.

    Raises:
        ValueError: ``line`` does not start with ``{``.
    """
    if not line.startswith(b"{"):
        raise ValueError("only JSON object lines can be stamped")
    rest = line[1:].lstrip()
    separator = b"" if rest.startswith(b"}") else b","
    return SENT_AT_PREFIX + f"{sent_at:.6f}".encode() + separator + rest


def sent_at_of(raw: bytes) -> float | None:
    """Returns: the send time :func:`stamp_line` put in ``raw``, or None when it has none."""
    if not raw.startswith(SENT_AT_PREFIX):
        return None
    start = len(SENT_AT_PREFIX)
    end = start
    while end < len(raw) and raw[end] not in b",}":
        end += 1
    try:
        return float(raw[start:end])
    except ValueError:
        return None


def result_size(rng: random.Random) -> int:
    """Returns: a tool result size in bytes, log-uniform in [1 KiB, 100 KiB]."""
    low, high = math.log(TOOL_RESULT_MIN_BYTES), math.log(TOOL_RESULT_MAX_BYTES)
    return round(math.exp(rng.uniform(low, high)))


def pad_tool_result(line: bytes, target_bytes: int) -> bytes:
    """Grows the ``toolCall.result`` of a tool-call line to about ``target_bytes``.

    The result (a JSON text) is decoded and its first non-empty list (the SQL tool's ``data``
    rows, the metadata search's members) repeated until its text reaches ``target_bytes``;
    a result without a list gets a ``padding`` member instead.

    Returns:
        The new line; ``line`` unchanged when it carries no tool result.
    """
    message = json.loads(line)
    call = message.get("toolCall") if isinstance(message, dict) else None
    if not isinstance(call, dict) or not isinstance(call.get("result"), str):
        return line
    result: Any = json.loads(call["result"])
    call["result"] = _grown(result, target_bytes)
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _grown(result: Any, target_bytes: int) -> str:
    items = _first_list(result)
    text = json.dumps(result, separators=(",", ":"))
    if items is None or not items:
        if isinstance(result, dict):
            result["padding"] = "x" * max(target_bytes - len(text), 0)
            return json.dumps(result, separators=(",", ":"))
        return text
    original = list(items)
    item_bytes = max(sum(len(_compact(i)) + 1 for i in original) / len(original), 1.0)
    missing = max(target_bytes - len(text), 0)
    for index in range(int(missing / item_bytes)):
        items.append(original[index % len(original)])
    return json.dumps(result, separators=(",", ":"))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _first_list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for member in ("data", *value):
            found = value.get(member)
            if isinstance(found, list) and found:
                return found
    return None


@dataclass(frozen=True)
class MixLine:
    """A line of the sink benchmark: which job (0-based), its line number (from 1), its bytes."""

    job: int
    line_no: int
    raw: bytes


def sink_mix(transcripts: Sequence[Transcript], lines: int, *, seed: int = 6) -> Iterator[MixLine]:
    """Yields ``lines`` lines of whole jobs (the last one cut short), cycling the transcripts.

    Every tool result is padded to a size from :func:`result_size`; deltas, finals and
    sentinels are kept as recorded. The same arguments give the same lines.
    """
    rng = random.Random(seed)
    produced = job = 0
    while produced < lines:
        transcript = transcripts[job % len(transcripts)]
        for line_no, raw in enumerate(transcript.lines, start=1):
            if produced == lines:
                return
            padded = pad_tool_result(raw, result_size(rng)) if b'"toolCall"' in raw else raw
            yield MixLine(job, line_no, padded)
            produced += 1
        job += 1
