"""Pairs split into statements: every item once, in order, at most ``PAIRS_PER_QUERY`` each."""

from __future__ import annotations

from pipeline.archive.engine import PAIRS_PER_QUERY, chunks


def test_chunks_keep_every_pair_once_in_order_at_most_a_statement_each() -> None:
    pairs = [(f"job-{n}", 1) for n in range(2 * PAIRS_PER_QUERY + 1)]
    found = list(chunks(pairs))
    assert [len(c) for c in found] == [PAIRS_PER_QUERY, PAIRS_PER_QUERY, 1]
    assert [p for c in found for p in c] == pairs


def test_no_pairs_make_no_statement() -> None:
    assert list(chunks([], 3)) == []
