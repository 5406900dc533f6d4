"""What the archive writer knows of open attempts between batches, and the rule that keeps it true.

Two stores outlive a batch: the lines parsed and folded until their attempt is normalised
(:class:`~pipeline.archive.parsed.ParsedLines`) and the chain heads already read or stored
(:class:`~pipeline.archive.chain.KnownHeads`). :class:`AttemptState` owns both, and
:meth:`AttemptState.batch` is the only way a batch changes them.

Invariant: everything held describes a row of ``stream_lines`` that is committed or that the
open transaction wrote. So a batch's claims (lines its statement inserted, and the folds they
joined) are dropped when its transaction does not commit; the heads of its rows are learned
only once it has; an attempt it normalised is forgotten by both stores (it takes no more
lines). ``tests/unit/pipeline/test_attempt_state.py`` checks the commit and the rollback.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from models.records import LineEnvelope
from pipeline.archive.chain import KnownHeads
from pipeline.archive.parsed import JobAttempt, KnownLine, LineKey, ParsedLines


class BatchClaims:
    """What one batch adds to an :class:`AttemptState`, applied or undone when it ends.

    Args:
        parsed: The state's parsed lines.
    """

    def __init__(self, parsed: ParsedLines) -> None:
        self._parsed = parsed
        self.claimed: list[LineKey] = []
        self.heads: Mapping[JobAttempt, tuple[int, bytes]] = {}
        self.normalised: list[JobAttempt] = []

    def __repr__(self) -> str:
        return f"<BatchClaims claimed={len(self.claimed)} normalised={len(self.normalised)}>"

    def keep(
        self, lines: Iterable[LineEnvelope], stored: Mapping[LineKey, KnownLine] | None
    ) -> None:
        """Keeps the batch's lines (:meth:`ParsedLines.add`); the ones in ``stored`` are claims."""
        self.claimed += self._parsed.add(lines, stored)

    def committed(
        self, *, heads: Mapping[JobAttempt, tuple[int, bytes]], normalised: Iterable[JobAttempt]
    ) -> None:
        """Records what the committed transaction stored: chain heads and normalised attempts."""
        self.heads = heads
        self.normalised = list(normalised)


class AttemptState:
    """The writer's per-attempt state across batches (module docstring: its invariant).

    Args:
        parsed: Parsed lines and folds (default: :class:`ParsedLines` with its budgets).
        heads: Known chain heads (default: :class:`KnownHeads`).
    """

    def __init__(
        self, *, parsed: ParsedLines | None = None, heads: KnownHeads | None = None
    ) -> None:
        self.parsed = parsed if parsed is not None else ParsedLines()
        self.heads = heads if heads is not None else KnownHeads()

    def __repr__(self) -> str:
        return f"<AttemptState parsed={self.parsed!r} heads={self.heads!r}>"

    @contextmanager
    def batch(self) -> Iterator[BatchClaims]:
        """Opens a batch; enter it around the batch's transaction.

        Yields:
            The batch's claims: :meth:`BatchClaims.keep` inside the transaction,
            :meth:`BatchClaims.committed` once it committed.

        Raises:
            Whatever the body raises, after dropping the batch's claimed lines and their folds.
        """
        claims = BatchClaims(self.parsed)
        try:
            yield claims
        except BaseException:
            self.parsed.drop(claims.claimed)  # rolled back: those rows were never stored
            raise
        self.parsed.forget(claims.normalised)
        self.heads.learn(claims.heads)
        self.heads.forget(claims.normalised)
