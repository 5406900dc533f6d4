"""Repeated cases, pass^k, flaky flags, threads and partial credit of a run (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.archive.diff import JobSnapshot
from pipeline.runs.accuracy import expectations_of, repeated_pass_rates, score_run
from pipeline.runs.batch import QuestionsFile
from pipeline.runs.scores import pass_hat_k

QUESTIONS = QuestionsFile.model_validate(
    {
        "personas": [{"name": "analyst", "sessionSettings": {"externalId": "a"}}],
        "questions": [
            {"text": "steady", "expected": {"*": {"rows": [[1]]}}},
            {"text": "flip", "expected": {"*": {"rows": [["EWR", 2], ["JFK", 3]]}}},
            {"text": "unscored"},
        ],
    }
)


def _job(
    job_id: str, question: str, rows: list[list[Any]] | None, chat_id: str = ""
) -> JobSnapshot:
    queries = () if rows is None else ({"sql": "SELECT 1", "rows": rows, "error": None},)
    return JobSnapshot(
        job_id, question, "external:a", "analyst", "completed", "ok", "final", queries,
        chat_id=chat_id or job_id,
    )  # fmt: skip


def _repeated(rounds: int, *, flip_right: set[int]) -> list[JobSnapshot]:
    jobs = []
    for n in range(rounds):
        jobs.append(_job(f"s{n}", "steady", [[1]]))
        flip = [["JFK", 3], ["EWR", 2]] if n in flip_right else [["EWR", 2], ["JFK", 4]]
        jobs.append(_job(f"f{n}", "flip", flip))
        jobs.append(_job(f"u{n}", "unscored", [[7]]))
    return jobs


@pytest.mark.parametrize(
    ("runs", "right", "k", "expected"),
    [(5, 5, 5, 1.0), (5, 4, 5, 0.0), (5, 3, 1, 0.6), (4, 3, 2, 0.5), (3, 0, 1, 0.0)],
)
def test_pass_hat_k_is_the_chance_that_k_of_n_runs_are_all_right(
    runs: int, right: int, k: int, expected: float
) -> None:
    assert pass_hat_k(runs, right, k) == pytest.approx(expected)


def test_pass_hat_k_refuses_k_beyond_the_runs() -> None:
    with pytest.raises(ValueError, match="pass"):
        pass_hat_k(3, 1, 4)


def test_a_case_right_in_some_runs_only_is_flaky_and_fails_pass_hat_k() -> None:
    scores = score_run(_repeated(5, flip_right={0, 2, 4}), expectations_of(QUESTIONS))
    assert scores.repeated and scores.k == 5
    steady, flip = scores.cases
    assert (steady.question, steady.right, steady.runs, steady.flaky) == ("steady", 5, 5, False)
    assert (flip.question, flip.right, flip.runs, flip.flaky) == ("flip", 3, 5, True)
    assert flip.outcomes == (True, False, True, False, True)
    assert flip.pass_rate == pytest.approx(0.6)
    assert scores.pass_hat_k == pytest.approx(0.5)  # steady 1.0, flip 0.0
    assert [c.question for c in scores.flaky] == ["flip"]
    lines = scores.lines()
    assert lines[0] == "execution accuracy: 8/10 (80.0%)"
    assert "pass^5 0.500 (1/2 cases right every run), 1 flaky" in lines[2]
    assert lines[3] == "  flaky: 'flip' as analyst: 3/5 right"
    doc = scores.to_json()
    assert doc["pass^k"] == pytest.approx(0.5) and doc["flaky_cases"] == 1
    assert doc["cases"][1]["pass^5"] == 0.0 and doc["cases"][1]["flaky"] is True


def test_partial_credit_is_the_mean_soft_f1_of_the_scored_jobs() -> None:
    scores = score_run(_repeated(2, flip_right={0}), expectations_of(QUESTIONS))
    # steady 1.0 twice; flip 1.0 once and 3/4 cells once (JFK 4 instead of 3)
    assert scores.partial["f1"] == pytest.approx(0.75)
    assert scores.partial_credit == pytest.approx((1 + 1 + 1 + 0.75) / 4)
    assert scores.lines()[1] == "partial credit (soft F1 over cells): 0.938"


def test_a_run_asked_once_reports_no_repeated_line_and_no_threads() -> None:
    scores = score_run(_repeated(1, flip_right=set()), expectations_of(QUESTIONS))
    assert not scores.repeated and scores.threads == ()
    assert len(scores.lines()) == 2


def test_a_thread_is_right_when_every_turn_is_and_keeps_its_first_wrong_turn() -> None:
    jobs = [
        _job("t1", "steady", [[1]], chat_id="c1"),
        _job("t2", "flip", [["EWR", 2], ["JFK", 3]], chat_id="c1"),
        _job("t3", "unscored", [[1]], chat_id="c1"),
        _job("v1", "steady", [[1]], chat_id="c2"),
        _job("v2", "flip", None, chat_id="c2"),
        _job("v3", "steady", [[0]], chat_id="c2"),
        _job("w1", "steady", [[0]], chat_id="c3"),  # one scored turn: not multi-turn
    ]
    scores = score_run(jobs, expectations_of(QUESTIONS))
    by_chat = {t.chat_id: t for t in scores.threads}
    assert set(by_chat) == {"c1", "c2"}
    assert by_chat["c1"].all_right and by_chat["c1"].first_wrong_turn is None
    assert not by_chat["c2"].all_right and by_chat["c2"].first_wrong_turn == 2
    assert scores.lines()[-2:] == [
        "threads: 1/2 right at every turn",
        "  thread c2: first wrong turn 2 of 3",
    ]
    assert scores.to_json()["threads"][1]["first_wrong_turn"] == 2


def test_repeated_runs_compare_by_pass_rate_and_a_fall_regresses() -> None:
    expectations = expectations_of(QUESTIONS)
    before = _repeated(4, flip_right={0, 1, 2})
    after = _repeated(4, flip_right={1})
    changes = repeated_pass_rates(before, after, expectations)
    assert changes is not None
    by_question = {c.question: c for c in changes}
    assert (by_question["steady"].a, by_question["steady"].b) == ((4, 4), (4, 4))
    assert not by_question["steady"].regressed
    assert (by_question["flip"].a, by_question["flip"].b) == ((3, 4), (1, 4))
    assert by_question["flip"].regressed
    assert by_question["flip"].to_json()["b"]["pass_rate"] == 0.25
    assert not any(c.regressed for c in repeated_pass_rates(after, before, expectations) or ())


def test_runs_asked_once_are_not_compared_by_pass_rate() -> None:
    once = _repeated(1, flip_right={0})
    assert repeated_pass_rates(once, once, expectations_of(QUESTIONS)) is None
