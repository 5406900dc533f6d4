"""Issue 11, point 9: the evaluation's questions, truths and scorer.

Truths are checked against hand-written DuckDB SQL on the warehouse (a second independent
computation); the scorer against hand-made answers.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.evaluation.questions import CATEGORIES, FRESH_FILE, QUESTIONS_FILE, load_questions
from chat_api.evaluation.scoring import Answer, close, score, text_numbers
from chat_api.evaluation.truth import ExpectedRow, Truth, compute_truth
from tests.unit.chat_api.analyst_support import hand, one


def test_the_set_has_200_turns_in_every_category_with_personas() -> None:
    questions = load_questions(QUESTIONS_FILE)
    turns = [t for item in questions.items for t in item.all_turns()]
    assert len(turns) >= 200
    assert {item.category for item in questions.items} == set(CATEGORIES[:11])
    chains = [item for item in questions.items if item.category == "followup"]
    assert chains and all(len(item.turns) >= 6 for item in chains)
    rls = [item for item in questions.items if item.category == "rls"]
    assert all(questions.personas[item.persona].attributes for item in rls)
    fresh = load_questions(FRESH_FILE, tag="fresh")
    assert sum(len(i.all_turns()) for i in fresh.items) >= 40
    assert {i.tag for i in fresh.items} == {"fresh"}


@pytest.mark.parametrize(
    ("truth", "sql"),
    [
        ({"value": "count", "where": {"origin": "EWR", "month": 6}},
         "SELECT count(*) FROM flights WHERE origin = 'EWR' AND month = 6"),
        ({"value": "mean", "col": "arr_delay", "where": {"carrier": "B6", "arr_delay": "> 15"}},
         "SELECT avg(arr_delay) FROM flights WHERE carrier = 'B6' AND arr_delay > 15"),
        ({"value": "share", "of": {"cancelled": True}, "where": {"carrier": "EV"}},
         "SELECT 100.0 * count(*) FILTER (WHERE dep_time IS NULL) / count(*) FROM flights "
         "WHERE carrier = 'EV'"),
        ({"value": "count", "where": {"weekday": "Saturday", "day": "1..7"}},
         "SELECT count(*) FROM flights WHERE dayname(time_hour) = 'Saturday' AND day <= 7"),
        ({"value": "median", "col": "arr_delay", "where": {"origin": "JFK"}},
         "SELECT median(arr_delay) FROM flights WHERE origin = 'JFK'"),
        ({"value": "mean", "col": "dep_delay", "where": {"w_visib": "< 1"}},
         "SELECT avg(f.dep_delay) FROM flights f JOIN (SELECT DISTINCT ON (origin, year, month, "
         "day, hour) * FROM weather) w USING (origin, year, month, day, hour) WHERE w.visib < 1"),
    ],
)  # fmt: skip
def test_truths_agree_with_hand_written_sql(
    analyst_toolbox: Toolbox, truth: dict[str, object], sql: str
) -> None:
    assert compute_truth(truth).value == pytest.approx(one(analyst_toolbox, sql))


def test_a_ranking_truth_puts_groups_without_a_value_last(analyst_toolbox: Toolbox) -> None:
    truth = compute_truth(
        {"rows": "mean", "col": "dep_delay", "by": "dest", "where": {"origin": "EWR"},
         "order": "desc", "limit": 1}
    )  # fmt: skip
    ((dest, value),) = hand(
        analyst_toolbox,
        "SELECT dest, avg(dep_delay) FROM flights WHERE origin = 'EWR' GROUP BY 1 "
        "ORDER BY 2 DESC NULLS LAST LIMIT 1",
    )
    assert truth.rows[0].labels[0][0] == dest
    assert truth.rows[0].value == pytest.approx(value)


def test_a_truth_sees_only_the_personas_rows() -> None:
    everyone = compute_truth({"value": "count"})
    jfk = compute_truth({"value": "count"}, sees={"origin": "JFK"})
    assert everyone.value == 336_776 and jfk.value == 111_279


def test_scoring_values_rows_refusals_and_rls() -> None:
    value = Truth("value", value=1234.5)
    assert score(Answer("There were 1,234.5 minutes.", True), value).correct
    assert not score(Answer("There were 1,300 minutes.", True), value).correct
    assert not score(Answer("I can't answer that.", False), value).correct
    ranked = Truth("rows", rows=(ExpectedRow((("UA", "United"),), 10.0),
                                 ExpectedRow((("DL",),), 5.0)), ordered=True)  # fmt: skip
    assert score(Answer("", True, ("carrier", "n"), (("United", 10), ("DL", 5))), ranked).correct
    assert not score(Answer("", True, ("carrier", "n"), (("DL", 5), ("UA", 10))), ranked).correct
    refuse = Truth("refuse")
    invented = score(Answer("There were 12 flights.", True), refuse)
    assert (invented.correct, invented.invented) == (False, True)
    assert score(Answer("I can't answer that.", False), refuse).correct
    leaked = score(Answer("", True, ("origin", "n"), (("LGA", 3),)), Truth("limited"),
                   sees={"origin": "JFK"})  # fmt: skip
    assert leaked.rows_across_rls == 1 and not leaked.correct
    percent = Truth("value", value=2.45, percent=True)
    assert score(Answer("", True, ("r",), ((0.0245,),)), percent).correct


def test_close_and_text_numbers() -> None:
    assert text_numbers("1,234 flights, 12.5% and -3 minutes") == [1234.0, 12.5, -3.0]
    assert close(100_100, 100_000) and not close(101_000, 100_000)


def test_fresh3_is_a_set_of_80_in_every_category_and_tagged_by_its_file_name() -> None:
    from chat_api.evaluation import file_tag

    path = FRESH_FILE.parent / "questions_fresh3.yaml"
    questions = load_questions(path, tag=file_tag(path))
    assert sum(len(i.all_turns()) for i in questions.items) >= 80
    assert {item.category for item in questions.items} == set(CATEGORIES[:11])
    assert {item.tag for item in questions.items} == {"fresh-3"}
    assert all(len(i.turns) >= 4 for i in questions.items if i.category == "followup")
    assert file_tag(QUESTIONS_FILE) == "base" and file_tag(FRESH_FILE) == "fresh"


def test_fresh4_is_25_or_more_turns_tagged_by_its_file_name() -> None:
    from chat_api.evaluation import file_tag

    path = FRESH_FILE.parent / "questions_fresh4.yaml"
    questions = load_questions(path, tag=file_tag(path))
    assert sum(len(i.all_turns()) for i in questions.items) >= 25
    assert {item.tag for item in questions.items} == {"fresh-4"}


def test_fresh5_is_16_turns_half_of_them_medians_tagged_by_its_file_name() -> None:
    from chat_api.evaluation import file_tag

    path = FRESH_FILE.parent / "questions_fresh5.yaml"
    questions = load_questions(path, tag=file_tag(path))
    truths = [turn.truth for item in questions.items for turn in item.all_turns()]
    assert len(truths) == 16
    assert sum("median" in (t.get("value"), t.get("rows"), t.get("compare")) for t in truths) == 8
    assert {item.tag for item in questions.items} == {"fresh-5"}
