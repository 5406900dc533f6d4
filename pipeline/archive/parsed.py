"""Lines the sink already parsed, kept until their attempt is normalised (parse once).

The sink parses each line once, when it decodes the record (:func:`pipeline.sink.decode`,
:meth:`models.records.LineEnvelope.from_record`). Normalising an attempt reads all its lines
back from ``stream_lines`` (:func:`pipeline.archive.derived.read_lines`); a stored line whose
bytes equal a parsed one's is taken as parsed, not parsed again. The batch's own lines were
always known; this keeps the lines of earlier batches too, until their attempt is normalised,
within a byte budget (oldest dropped first; a dropped line is parsed again from its bytes, so
the budget bounds memory, never correctness).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from models.records import LineEnvelope

LineKey = tuple[str, int, int]
JobAttempt = tuple[str, int]

MAX_PARSED_BYTES: Final = 32 * 1024 * 1024
"""Raw bytes of parsed lines kept across batches (their parsed form takes a few times more)."""


class ParsedLines:
    """Parsed lines by (job id, attempt, line number), bounded by their raw bytes.

    Args:
        max_bytes: The budget of raw bytes kept.
    """

    def __init__(self, max_bytes: int = MAX_PARSED_BYTES) -> None:
        self._lines: dict[LineKey, LineEnvelope] = {}
        self._by_attempt: dict[JobAttempt, set[LineKey]] = {}
        self._max_bytes = max_bytes
        self.bytes = 0

    def __repr__(self) -> str:
        return f"<ParsedLines lines={len(self._lines)} bytes={self.bytes}>"

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def known(self) -> Mapping[LineKey, LineEnvelope]:
        """The lines kept, for :func:`pipeline.archive.derived.normalise_ready`."""
        return self._lines

    def add(self, lines: Iterable[LineEnvelope]) -> None:
        """Keeps ``lines`` (a later line with the same key replaces the earlier one)."""
        for line in lines:
            key = (line.job_id, line.attempt, line.line_no)
            self._drop(key)
            self._lines[key] = line
            self._by_attempt.setdefault((key[0], key[1]), set()).add(key)
            self.bytes += len(line.raw)
        while self.bytes > self._max_bytes and self._lines:
            self._drop(next(iter(self._lines)))

    def forget(self, attempts: Iterable[JobAttempt]) -> None:
        """Drops the lines of ``attempts`` (normalised: their lines are not read again)."""
        for attempt in attempts:
            for key in list(self._by_attempt.get(attempt, ())):
                self._drop(key)

    def _drop(self, key: LineKey) -> None:
        line = self._lines.pop(key, None)
        if line is None:
            return
        self.bytes -= len(line.raw)
        keys = self._by_attempt.get((key[0], key[1]))
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_attempt[(key[0], key[1])]
