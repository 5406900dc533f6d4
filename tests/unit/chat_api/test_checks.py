"""The one validator of every reader's typed query (``chat_api.reader.checks``, issue 23).

Each bad query is refused with its code and a message naming the member; the rule reader's
own readings of the evaluation questions all pass, so putting both readers through the same
checks changes no rule-reader answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from chat_api.errors import InvalidQueryError, UnreadableQuestionError
from chat_api.evaluation.questions import QUESTIONS_FILE, load_questions
from chat_api.reader.checks import check_query
from chat_api.reader.index import ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.query import Query
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

COUNT: dict[str, Any] = {"view": "flights", "measures": ["flights.count"]}


@pytest.fixture(scope="module")
def index(model: SemanticModel, warehouse: Warehouse) -> ModelIndex:
    return build_index(model, warehouse.query_raw)


def _check(raw: dict[str, Any], index: ModelIndex, model: SemanticModel, **user: Any) -> None:
    check_query(Query.from_json(raw), index, model=model, user=UserContext(**user))


def _carrier(operator: str, *values: str) -> dict[str, Any]:
    return {"member": "flights.carrier", "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("raw", "code", "said"),
    [
        ({"view": "tickets", "measures": []}, "unknown_view", "there is no view 'tickets'"),
        (
            {"view": "flights", "measures": ["flights.revenue"]},
            "unknown_member",
            "'flights.revenue' is not a member of view flights",
        ),
        (
            {"view": "flights", "measures": ["weather.avg_temp"]},
            "unknown_member",
            "'weather.avg_temp' is not a member of view flights",
        ),
        (
            {"view": "flights", "measures": ["flights.carrier"]},
            "wrong_type",
            "'flights.carrier' is not a measure",
        ),
        (
            {**COUNT, "dimensions": ["flights.avg_dep_delay"]},
            "wrong_type",
            "'flights.avg_dep_delay' is not a dimension",
        ),
        (
            {**COUNT, "timeDimensions": [{"dimension": "flights.carrier", "granularity": "month"}]},
            "wrong_type",
            "'flights.carrier' is not time",
        ),
        ({**COUNT, "filters": [_carrier("like", "U%")]}, "bad_operator", "operator 'like'"),
        (
            {**COUNT, "filters": [_carrier("equals", "UA' OR 1=1 --")]},
            "value_outside_domain",
            "is not a value of flights.carrier (values such as",
        ),
        (
            {
                **COUNT,
                "filters": [{"member": "flights.dep_delay", "operator": "gt", "values": ["x"]}],
            },
            "bad_value",
            "'x' is not a number",
        ),
        (
            {
                **COUNT,
                "timeDimensions": [
                    {"dimension": "flights.flight_date", "dateRange": ["last year", "2013-02-01"]}
                ],
            },
            "bad_value",
            "'last year' is not an ISO date",
        ),
        ({**COUNT, "order": [["flights.count", "up"]]}, "bad_operator", "order direction 'up'"),
        ({**COUNT, "limit": 0}, "bad_value", "limit must be a whole number"),
    ],
)
def test_bad_query_is_refused_naming_what_is_wrong(
    raw: dict[str, Any], code: str, said: str, index: ModelIndex, model: SemanticModel
) -> None:
    with pytest.raises(InvalidQueryError) as caught:
        _check(raw, index, model)
    assert caught.value.code == code
    assert said in caught.value.reason


def test_a_view_the_user_may_not_query_is_unknown_to_them(
    index: ModelIndex, model: SemanticModel
) -> None:
    _check(COUNT, index, model, attributes={"origin": "JFK"})
    with pytest.raises(InvalidQueryError) as caught:
        _check(COUNT, index, model, attributes={"origin": ""})
    assert caught.value.code == "unknown_view"


def test_good_query_passes(index: ModelIndex, model: SemanticModel) -> None:
    raw = {
        **COUNT,
        "dimensions": ["flights.origin"],
        "filters": [_carrier("equals", "UA", "DL")],
        "timeDimensions": [{"dimension": "flights.flight_date", "granularity": "month",
                            "dateRange": ["2013-01-01", "2013-06-30"]}],
        "order": [["flights.count", "desc"]],
        "limit": 5,
    }  # fmt: skip
    _check(raw, index, model)


def test_every_rule_reader_reading_of_the_base_questions_passes(
    index: ModelIndex, model: SemanticModel
) -> None:
    questions = load_questions(QUESTIONS_FILE, tag="base")
    read_count = 0
    for item in questions.items:
        previous = None
        for turn in item.all_turns():
            try:
                previous = read(turn.q, index, previous=previous)
            except UnreadableQuestionError:
                continue
            check_query(previous, index, model=model, user=UserContext())
            read_count += 1
    assert read_count > 100
