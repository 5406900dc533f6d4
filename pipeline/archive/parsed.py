"""Lines the sink already parsed, kept or folded until their attempt is normalised (parse once).

The sink parses each line once, when it decodes the record (:func:`pipeline.sink.decode`,
:meth:`models.records.LineEnvelope.from_record`). The writer keeps every line of a batch as a
:class:`KnownLine`, with the verdict of :func:`parsed_clean` taken once, until the line's
attempt is normalised, within a byte budget (oldest dropped first; a dropped line is read and
parsed again from storage, so the budget bounds memory, never correctness).

Folded (:meth:`ParsedLines.fold`): an attempt's lines that this writer inserted, from line 1 on
without a gap, go into its :class:`~pipeline.transcript.normalise.Fold` as they arrive and leave
the kept lines, so the attempt's end only turns the fold into rows, and a fold holds the merged
messages rather than every line (:class:`FoldedLines`; their own byte budget, oldest fold
dropped first, its attempt then read back).

A line this writer inserted into ``stream_lines`` is kept *as stored*: the redacted bytes when
the redactor changed it, the cleaned chat id, and the redaction mark written with it
(:func:`pipeline.archive.lines.write_lines` says which keys its statement inserted). Normalising
an attempt all of whose lines are kept so reads none of them back
(:func:`pipeline.archive.derived.normalise_ready` states the rule). A line the writer did not
insert (the key was already stored: a redelivered record, another sink, a ``dlq replay``) is
kept as received, and is only used where the stored bytes read back are equal to it.

Entries claiming an insertion are only as good as the transaction that made them: the writer's
:class:`~pipeline.archive.attempt_state.AttemptState` drops them again (:meth:`ParsedLines.drop`)
when that transaction does not commit; its docstring states the rule for both stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from models.archive import storable_as_parsed
from models.records import LineEnvelope
from pipeline.transcript.normalise import Fold

LineKey = tuple[str, int, int]
JobAttempt = tuple[str, int]

MAX_PARSED_BYTES: Final = 32 * 1024 * 1024
"""Raw bytes of parsed lines kept across batches (their parsed form takes a few times more)."""
MAX_FOLDED_BYTES: Final = 128 * 1024 * 1024
"""Raw bytes of the lines folded into open attempts' folds (a fold holds less: the deltas'
text joined, each tool call's latest payloads)."""
Mark = tuple[int, str, datetime | None]
"""A row's redaction mark: (line number, ``redaction``, ``redacted_at``)."""


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


@dataclass(slots=True)
class FoldedLines:
    """An attempt's lines ``1..count``, each inserted by this writer, folded in line order.

    Attributes:
        fold: The attempt's :class:`~pipeline.transcript.normalise.Fold` of those lines.
        clean: Every line folded was :func:`parsed_clean`.
        marks: The redaction marks the rows were inserted with (usually none).
        bytes: Raw bytes folded (what the budget counts).
    """

    fold: Fold
    clean: bool = True
    marks: set[Mark] = field(default_factory=set)
    bytes: int = 0

    @property
    def count(self) -> int:
        """Lines folded: ``1..count``."""
        return self.fold.last_line_no

    def add(self, known: KnownLine) -> None:
        """Folds the next line, inserted by this writer (:meth:`Fold.add`'s errors)."""
        self.fold.add(known.line)
        self.clean = self.clean and known.clean
        if known.redaction is not None:
            self.marks.add((known.line.line_no, known.redaction, known.redacted_at))
        self.bytes += len(known.line.raw)


class ParsedLines:
    """Known lines by (job id, attempt, line number), and folds by attempt, bounded by bytes.

    Args:
        max_bytes: The budget of raw bytes kept as lines.
        max_folded_bytes: The budget of raw bytes folded.
    """

    def __init__(
        self, max_bytes: int = MAX_PARSED_BYTES, max_folded_bytes: int = MAX_FOLDED_BYTES
    ) -> None:
        self._lines: dict[LineKey, KnownLine] = {}
        self._by_attempt: dict[JobAttempt, set[LineKey]] = {}
        self._folds: dict[JobAttempt, FoldedLines] = {}
        self._max_bytes = max_bytes
        self._max_folded_bytes = max_folded_bytes
        self.bytes = 0
        self.folded_bytes = 0

    def __repr__(self) -> str:
        return (
            f"<ParsedLines lines={len(self._lines)} bytes={self.bytes} "
            f"folds={len(self._folds)} folded_bytes={self.folded_bytes}>"
        )

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def known(self) -> Mapping[LineKey, KnownLine]:
        """The lines kept, for :func:`pipeline.archive.derived.normalise_ready`."""
        return self._lines

    @property
    def folds(self) -> Mapping[JobAttempt, FoldedLines]:
        """The open attempts' folds, for :func:`pipeline.archive.derived.normalise_ready`."""
        return self._folds

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
        kept, by_attempt, folds = self._lines, self._by_attempt, self._folds
        claimed: list[LineKey] = []
        for line in lines:
            key = (line.job_id, line.attempt, line.line_no)
            entry = stored.get(key)
            folded = folds.get((line.job_id, line.attempt))
            if folded is not None and line.line_no <= folded.count:
                if entry is None:
                    continue  # the row folded is the one stored; this was a duplicate
                self._drop_fold((line.job_id, line.attempt))  # a second row of a folded line
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

    def fold(self, attempts: Iterable[JobAttempt]) -> None:
        """Folds each attempt's kept lines that continue its fold, in line order.

        A fold starts at a line 1 this writer inserted and takes each next line it inserted;
        it stops at a gap or a line it did not insert (the attempt is then read back when it
        ends). A line folded is no longer kept as a line. Then the oldest folds are dropped
        while the folded bytes exceed the budget.

        Args:
            attempts: The attempts a batch touched, after :meth:`add`.
        """
        kept, folds = self._lines, self._folds
        for attempt in attempts:
            job_id, number = attempt
            folded = folds.get(attempt)
            if folded is None:
                first = kept.get((job_id, number, 1))
                if first is None or not first.inserted:
                    continue
                folded = folds[attempt] = FoldedLines(Fold(job_id, number))
            while True:
                key = (job_id, number, folded.count + 1)
                entry = kept.get(key)
                if entry is None or not entry.inserted:
                    break
                folded.add(entry)
                self.folded_bytes += len(entry.line.raw)
                self._drop(key)
        while self.folded_bytes > self._max_folded_bytes and folds:
            self._drop_fold(next(iter(folds)))

    def drop(self, keys: Iterable[LineKey]) -> None:
        """Drops the lines of ``keys`` and their attempts' folds (rolled back: nothing known)."""
        for key in keys:
            self._drop(key)
            self._drop_fold((key[0], key[1]))

    def forget(self, attempts: Iterable[JobAttempt]) -> None:
        """Drops the lines and folds of ``attempts`` (normalised: not read again)."""
        for attempt in attempts:
            self._drop_fold(attempt)
            for key in self._by_attempt.pop(attempt, ()):
                entry = self._lines.pop(key, None)
                if entry is not None:
                    self.bytes -= len(entry.line.raw)

    def _drop_fold(self, attempt: JobAttempt) -> None:
        folded = self._folds.pop(attempt, None)
        if folded is not None:
            self.folded_bytes -= folded.bytes

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
