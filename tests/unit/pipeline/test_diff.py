from __future__ import annotations

from typing import Any

from pipeline.archive.diff import JobSnapshot, diff_runs
from pipeline.runs.accuracy import accuracy_line, expectations_of, score
from pipeline.runs.batch import QuestionsFile


def _job(
    job_id: str,
    question: str,
    rows: list[list[Any]] | None,
    *,
    identity: str = "external:a",
    status: str = "completed",
    answer: str = "ok",
    sql: str = "SELECT origin, MEASURE(count) FROM flights GROUP BY 1",
    persona: str = "analyst",
) -> JobSnapshot:
    query = {"sql": sql, "rows": rows, "total_rows": len(rows or ()), "error": None}
    return JobSnapshot(job_id, question, identity, persona, status, answer, "final", (query,))


def test_diff_counts_same_changed_new_missing_and_flags_regressions() -> None:
    a = [
        _job("a1", "q1", [["EWR", 1], ["JFK", 2]]),
        _job("a2", "q2", [["x", 1]]),
        _job("a3", "q3", [["y", 1]]),
        _job("a4", "q4", [["z", 1]], answer="old words"),
    ]
    b = [
        _job("b1", "q1", [["JFK", 2], ["EWR", 1]]),  # same bag, other order
        _job("b2", "q2", [["x", 2]]),  # result changed
        _job("b4", "q4", [["z", 1]], answer="new words"),  # answer only
        _job("b5", "q5", [["n", 1]]),  # new
    ]
    result = diff_runs("A", a, "B", b)
    assert result.counts == {"same": 1, "changed": 2, "new": 1, "missing": 1}
    by_question = {case.question: case for case in result.cases}
    assert by_question["q2"].result_changed and by_question["q2"].regressed
    assert by_question["q4"].answer_changed and not by_question["q4"].regressed
    assert by_question["q3"].state == "missing" and by_question["q3"].regressed
    assert not by_question["q5"].regressed
    assert result.regressed
    doc = result.to_json()
    assert doc["summary"]["regressed"] == 2 and "a" not in doc["cases"][0]


def test_same_question_as_other_identities_is_paired_by_identity() -> None:
    a = [
        _job("a1", "q", [[1]], identity="external:x"),
        _job("a2", "q", [[2]], identity="external:y"),
    ]
    b = [
        _job("b2", "q", [[2]], identity="external:y"),
        _job("b1", "q", [[1]], identity="external:x"),
    ]
    assert diff_runs("A", a, "B", b).counts["same"] == 2


def test_losing_the_result_or_completion_regresses() -> None:
    a = [_job("a1", "q", [[1]])]
    assert diff_runs("A", a, "B", [_job("b1", "q", None)]).regressed
    assert diff_runs("A", a, "B", [_job("b1", "q", [[1]], status="failed")]).regressed
    assert not diff_runs("A", a, "B", [_job("b1", "q", [[1]])]).regressed


def test_execution_accuracy_uses_expected_rows_per_persona() -> None:
    questions = QuestionsFile.model_validate(
        {
            "personas": [
                {"name": "analyst", "sessionSettings": {"externalId": "a"}},
                {"name": "ops", "sessionSettings": {"externalId": "o"}},
            ],
            "questions": [
                {
                    "text": "q1",
                    "expected": {
                        "analyst": {"rows": [[2, "JFK"], [1, "EWR"]]},
                        "*": {"rows": [[9]]},
                    },
                },
                {"text": "q2"},
            ],
        }
    )
    expectations = expectations_of(questions)
    assert set(expectations) == {("q1", "analyst"), ("q1", "ops")}
    jobs = [
        _job("j1", "q1", [["EWR", 1], ["JFK", 2]]),
        _job("j2", "q1", [[8]], persona="ops"),
        _job("j3", "q2", [[1]]),
    ]
    scores = score(jobs, expectations)
    assert scores == {"j1": True, "j2": False}
    assert accuracy_line(scores) == "execution accuracy: 1/2 (50.0%)"
