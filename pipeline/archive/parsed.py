"""Lines the sink already parsed, kept until their attempt is normalised (parse once).

The sink parses each line once, when it decodes the record (:func:`pipeline.sink.decode`,
:meth:`models.records.LineEnvelope.from_record`). The writer keeps every line of a batch as a
:class:`KnownLine`, with the verdict of :func:`parsed_clean` taken once, until the line's
attempt is normalised, within a byte budget (oldest dropped first; a dropped line is read and
parsed again from storage, so the budget bounds memory, never correctness).

A line this writer inserted into ``stream_lines`` is kept *as stored*: the redacted bytes when
the redactor changed it, the cleaned chat id, and the redaction mark written with it
(:func:`pipeline.archive.lines.write_lines` says which keys its statement inserted). Normalising
an attempt all of whose lines are kept so reads none of them back
(:func:`pipeline.archive.derived.normalise_ready` states the rule). A line the writer did not
insert (the key was already stored: a redelivered record, another sink, a ``dlq replay``) is
kept as received, and is only used where the stored bytes read back are equal to it.

Entries claiming an insertion are only as good as the transaction that made them: the writer
drops them again (:meth:`ParsedLines.drop`) when that transaction does not commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from models.archive import storable_as_parsed
from models.records import LineEnvelope

LineKey = tuple[str, int, int]
JobAttempt = tuple[str, int]

MAX_PARSED_BYTES: Final = 32 * 1024 * 1024
"""Raw bytes of parsed lines kept across batches (their parsed form takes a few times more)."""


def parsed_clean(line: LineEnvelope) -> bool:
    """Returns: True when the line parsed and nothing in it needs cleaning to be stored.

    :func:`models.archive.storable_as_parsed` of its bytes: derived rows of an attempt whose
    every line is clean skip the text and JSON cleaning
    (:func:`pipeline.archive.derived.replace_rows`).
    """
    return line.message is not None and storable_as_parsed(line.raw)


@dataclass(frozen=True, slots=True)
class KnownLine:
    """A parsed line the writer holds, and what it knows of its row in ``stream_lines``.

    Attributes:
        line: The envelope, parsed; when ``inserted``, the row as stored (``raw`` redacted when
            the redactor changed it, ``chat_id`` cleaned).
        clean: :func:`parsed_clean` of ``line``.
        inserted: This writer's own statement inserted the row (:func:`known_line`), in the
            current transaction or a committed one.
        redaction, redacted_at: The redaction mark the row was inserted with (None: none).
    """

    line: LineEnvelope
    clean: bool
    inserted: bool = False
    redaction: str | None = None
    redacted_at: datetime | None = None


def known_line(
    line: LineEnvelope,
    *,
    inserted: bool = False,
    redaction: str | None = None,
    redacted_at: datetime | None = None,
) -> KnownLine:
    """Returns: ``line`` as a :class:`KnownLine`, its :func:`parsed_clean` verdict taken now.

    Args:
        line: A parsed envelope; with ``inserted``, exactly as its row was stored.
        inserted: The caller's statement inserted the row.
        redaction: The row's redaction mark, when inserted with one.
        redacted_at: When it was redacted.
    """
    return KnownLine(line, parsed_clean(line), inserted, redaction, redacted_at)


class ParsedLines:
    """Known lines by (job id, attempt, line number), bounded by their raw bytes.

    Args:
        max_bytes: The budget of raw bytes kept.
    """

    def __init__(self, max_bytes: int = MAX_PARSED_BYTES) -> None:
        self._lines: dict[LineKey, KnownLine] = {}
        self._by_attempt: dict[JobAttempt, set[LineKey]] = {}
        self._max_bytes = max_bytes
        self.bytes = 0

    def __repr__(self) -> str:
        return f"<ParsedLines lines={len(self._lines)} bytes={self.bytes}>"

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def known(self) -> Mapping[LineKey, KnownLine]:
        """The lines kept, for :func:`pipeline.archive.derived.normalise_ready`."""
        return self._lines

    def add(
        self, lines: Iterable[LineEnvelope], stored: Mapping[LineKey, KnownLine] | None = None
    ) -> list[LineKey]:
        """Keeps a batch's lines.

        A line in ``stored`` replaces whatever was kept for its key. Any other line is kept as
        received, unless an inserted line is already kept for its key: that row is still the
        one stored (the new line was a duplicate it absorbed).

        Args:
            lines: The batch's lines as received.
            stored: The lines the batch's own statement inserted, as stored
                (:func:`pipeline.archive.lines.write_lines`).

        Returns:
            The keys now kept as inserted by this batch, for :meth:`drop` should its
            transaction not commit.
        """
        stored = stored or {}
        kept, by_attempt = self._lines, self._by_attempt
        claimed: list[LineKey] = []
        for line in lines:
            key = (line.job_id, line.attempt, line.line_no)
            entry = stored.get(key)
            if entry is not None:
                claimed.append(key)
            else:
                held = kept.get(key)
                if held is not None and held.inserted:
                    continue
                entry = known_line(line)
            if key in kept:
                self._drop(key)
            kept[key] = entry
            attempt = (key[0], key[1])
            keys = by_attempt.get(attempt)
            if keys is None:
                by_attempt[attempt] = {key}
            else:
                keys.add(key)
            self.bytes += len(entry.line.raw)
        while self.bytes > self._max_bytes and self._lines:
            self._drop(next(iter(self._lines)))
        return claimed

    def drop(self, keys: Iterable[LineKey]) -> None:
        """Drops the lines of ``keys`` (their insertion was rolled back: nothing is known)."""
        for key in keys:
            self._drop(key)

    def forget(self, attempts: Iterable[JobAttempt]) -> None:
        """Drops the lines of ``attempts`` (normalised: their lines are not read again)."""
        for attempt in attempts:
            for key in self._by_attempt.pop(attempt, ()):
                entry = self._lines.pop(key, None)
                if entry is not None:
                    self.bytes -= len(entry.line.raw)

    def _drop(self, key: LineKey) -> None:
        entry = self._lines.pop(key, None)
        if entry is None:
            return
        self.bytes -= len(entry.line.raw)
        keys = self._by_attempt.get((key[0], key[1]))
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_attempt[(key[0], key[1])]
