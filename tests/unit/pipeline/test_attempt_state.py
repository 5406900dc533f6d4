"""The writer's per-attempt state: a batch's claims stay only if its transaction commits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.records import LineEnvelope
from pipeline.archive.attempt_state import AttemptState
from pipeline.archive.parsed import KnownLine, known_line

ATTEMPT = ("job-a", 1)


def _lines(*numbers: int) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(
            job_id=ATTEMPT[0],
            attempt=ATTEMPT[1],
            line_no=n,
            raw=b'{"id":"m%d","role":"assistant","content":"hi"}' % n,
            received_at=datetime.now(UTC),
        )
        for n in numbers
    ]


def _inserted(lines: list[LineEnvelope]) -> dict[tuple[str, int, int], KnownLine]:
    return {(x.job_id, x.attempt, x.line_no): known_line(x, inserted=True) for x in lines}


def _commit(state: AttemptState, lines: list[LineEnvelope], head: int) -> None:
    with state.batch() as claims:
        claims.keep(lines, _inserted(lines))
        state.parsed.fold([ATTEMPT])
        claims.committed(heads={ATTEMPT: (head, b"h%d" % head)}, normalised=[])


def test_a_committed_batch_keeps_its_lines_and_learns_its_heads() -> None:
    state = AttemptState()
    _commit(state, _lines(1, 2), head=2)
    assert ATTEMPT in state.parsed.folds and state.parsed.folds[ATTEMPT].count == 2
    assert state.heads.of([ATTEMPT]) == {ATTEMPT: (2, b"h2")}


def test_a_rolled_back_batch_leaves_nothing_of_its_rows_and_no_head() -> None:
    state = AttemptState()
    _commit(state, _lines(1), head=1)

    def failing_batch() -> None:
        with state.batch() as claims:
            claims.keep(_lines(2, 3), _inserted(_lines(2, 3)))
            state.parsed.fold([ATTEMPT])
            assert state.parsed.folds[ATTEMPT].count == 3  # held while the transaction is open
            raise RuntimeError("the transaction did not commit")

    with pytest.raises(RuntimeError):
        failing_batch()
    assert not any(key[2] in (2, 3) for key in state.parsed.known)
    assert ATTEMPT not in state.parsed.folds  # the fold held rows that were never stored
    assert state.heads.of([ATTEMPT]) == {ATTEMPT: (1, b"h1")}  # the committed head only


def test_a_normalised_attempt_is_forgotten_by_both_stores() -> None:
    state = AttemptState()
    _commit(state, _lines(1, 2), head=2)
    with state.batch() as claims:
        claims.committed(heads={}, normalised=[ATTEMPT])
    assert state.parsed.known == {} and state.parsed.folds == {}
    assert state.heads.of([ATTEMPT]) == {}
