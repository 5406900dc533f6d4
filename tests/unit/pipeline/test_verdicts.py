"""Reviewers' verdicts: the hash chain's checks, the expected values typed, the scores (pure)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.archive import verdicts
from pipeline.archive.reviews import parse_expected
from pipeline.archive.verdicts import GENESIS, StoredVerdict, Verdict, link
from pipeline.errors import ReviewRefusedError
from pipeline.runs.accuracy import AccuracyScores

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _chain(n: int) -> list[StoredVerdict]:
    out: list[StoredVerdict] = []
    prev = GENESIS
    for seq in range(1, n + 1):
        verdict = Verdict("q1", f"job-{seq}", 1, "ana", "correct", ("sql",), "ok", None)
        unhashed = StoredVerdict(seq, verdict, None, T0 + timedelta(seconds=seq), prev, b"")
        stored = dataclasses.replace(unhashed, hash=link(prev, unhashed.document()))
        out.append(stored)
        prev = stored.hash
    return out


def _findings(chain: list[StoredVerdict]) -> list[tuple[int | None, str]]:
    found = []
    previous = None
    for stored in chain:
        found += [(f[2], f[3]) for f in verdicts._compare(previous, stored)]
        previous = stored
    return found


def test_an_untouched_verdict_chain_has_no_finding() -> None:
    assert _findings(_chain(4)) == []


def test_a_verdict_edited_in_place_is_reported_at_its_row() -> None:
    chain = _chain(4)
    edited = dataclasses.replace(chain[1].verdict, verdict="incorrect")
    chain[1] = dataclasses.replace(chain[1], verdict=edited)
    assert _findings(chain) == [(2, "verdict_changed")]


def test_a_verdict_edited_and_rehashed_breaks_the_next_link() -> None:
    chain = _chain(4)
    edited = dataclasses.replace(
        chain[1], verdict=dataclasses.replace(chain[1].verdict, comment="x")
    )
    chain[1] = dataclasses.replace(edited, hash=link(edited.prev_hash, edited.document()))
    assert _findings(chain) == [(3, "verdict_chain_broken")]


def test_a_deleted_verdict_leaves_a_gap_and_a_broken_link() -> None:
    chain = _chain(4)
    del chain[2]
    assert _findings(chain) == [(4, "verdict_missing"), (4, "verdict_chain_broken")]


def test_the_document_covers_every_hashed_field_and_the_time_to_the_microsecond() -> None:
    stored = _chain(1)[0]
    later = dataclasses.replace(stored, created_at=stored.created_at + timedelta(microseconds=1))
    assert later.document() != stored.document()
    v = stored.verdict
    for changed in (
        dataclasses.replace(v, labels=("other",)),
        dataclasses.replace(v, expected={"rows": [[1]]}),
        dataclasses.replace(v, pair_job_id="b"),
        dataclasses.replace(v, attempt=2),
    ):
        assert dataclasses.replace(stored, verdict=changed).document() != stored.document()


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("", None),
        ("28834", {"rows": [[28834]]}),
        ("EWR", {"rows": [["EWR"]]}),
        ('["EWR", 3]', {"rows": [["EWR", 3]]}),
        ('[["EWR", 1], ["JFK", 2]]', {"rows": [["EWR", 1], ["JFK", 2]]}),
        ('{"rows": [[1]], "ordered": true}', {"rows": [[1]], "ordered": True}),
    ],
)
def test_an_expected_value_is_read_as_rows(typed: str, expected: object) -> None:
    assert parse_expected(typed) == expected


@pytest.mark.parametrize("typed", ['{"rowz": [[1]]}', "[[NaN]]", "Infinity"])
def test_an_expected_value_postgresql_cannot_hold_or_no_expected_result_is_refused(
    typed: str,
) -> None:
    with pytest.raises(ReviewRefusedError) as caught:
        parse_expected(typed)
    assert caught.value.field == "expected"


def test_run_scores_report_automatic_reviewed_and_agreement() -> None:
    scores = AccuracyScores(
        automatic={"a": True, "b": False, "c": True},
        reviewed={"a": True, "b": True, "d": False},
        from_reviews=2,
    )
    assert scores.agreement == (1, 2)
    assert scores.lines() == [
        "execution accuracy: 2/3 (66.7%) (2 against reviewed truths)",
        "reviewed accuracy: 2/3 (66.7%)",
        "agreement: 1/2",
    ]
    assert scores.to_json()["agreement"] == {"hits": 1, "of": 2}
