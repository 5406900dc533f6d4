"""Follow-up planning: a question continues the previous query of its thread.

Each step runs the real path (plan -> Semantic SQL -> compiler -> DuckDB) with the previous
step's query passed as a JSON :data:`~chat_api.planner.specs.PlanState` (as threads keep it), and is
compared with a hand-written DuckDB query over the raw tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pytest

from chat_api.planner.planner import CannotAnswer, Plan, plan_question
from chat_api.planner.specs import PlanState, plan_state, spec_from_state
from chat_api.planner.vocabulary import Vocabulary, load_vocabulary
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse


@pytest.fixture(scope="module")
def vocabulary(warehouse: Warehouse) -> Vocabulary:
    return load_vocabulary(warehouse.query_raw)


def ask(
    question: str,
    state: PlanState | None,
    *,
    vocabulary: Vocabulary,
    model: SemanticModel,
    warehouse: Warehouse,
) -> tuple[PlanState, list[tuple[Any, ...]]]:
    """One turn: plan against the JSON state of the previous one; returns the new state, rows."""
    previous = spec_from_state(json.loads(json.dumps(state)) if state else None)
    planned = plan_question(question, vocabulary=vocabulary, previous=previous)
    assert isinstance(planned, Plan), getattr(planned, "reason", planned)
    compiled = compile_semantic_sql(planned.semantic_sql, model=model, user=UserContext())
    rows = warehouse.run(compiled, row_limit=1000).rows
    return plan_state(planned.spec), [tuple(row) for row in rows]


def same(actual: Sequence[tuple[Any, ...]], expected: Sequence[tuple[Any, ...]]) -> bool:
    if len(actual) != len(expected):
        return False
    for got, want in zip(actual, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            if isinstance(b, float):
                if not math.isclose(float(a), b, rel_tol=1e-9):
                    return False
            elif a != b:
                return False
    return True


BY_CARRIER = (
    "SELECT a.name, {agg}(f.{column}) FROM flights f LEFT JOIN airlines a USING (carrier) "
    "WHERE {where} GROUP BY 1 ORDER BY 2 DESC"
)
BY_MONTH = "SELECT month, {agg}({column}) FROM flights WHERE {where} GROUP BY 1 ORDER BY 1"

CHAIN = [
    ("Average arrival delay by carrier", BY_CARRIER, "avg", "arr_delay", "TRUE"),
    ("and only from JFK?", BY_CARRIER, "avg", "arr_delay", "f.origin = 'JFK'"),
    ("what about LGA?", BY_CARRIER, "avg", "arr_delay", "f.origin = 'LGA'"),
    ("now by month", BY_MONTH, "avg", "arr_delay", "origin = 'LGA'"),
    ("only for United", BY_MONTH, "avg", "arr_delay", "origin = 'LGA' AND carrier = 'UA'"),
    ("and the maximum?", BY_MONTH, "max", "arr_delay", "origin = 'LGA' AND carrier = 'UA'"),
    ("and the average distance?", BY_MONTH, "avg", "distance",
     "origin = 'LGA' AND carrier = 'UA'"),
    ("what about Delta and American?", BY_MONTH, "avg", "distance",
     "origin = 'LGA' AND carrier IN ('DL', 'AA')"),
]  # fmt: skip


def test_a_chain_of_follow_ups_returns_the_numbers_of_hand_written_queries(
    vocabulary: Vocabulary, model: SemanticModel, warehouse: Warehouse
) -> None:
    state: PlanState | None = None
    for question, template, agg, column, where in CHAIN:
        state, actual = ask(
            question, state, vocabulary=vocabulary, model=model, warehouse=warehouse
        )
        sql = template.format(agg=agg, column=column, where=where)
        expected = [tuple(row) for row in warehouse.query_raw(sql)]
        assert same(actual, expected), (question, actual[:3], expected[:3])


def test_a_follow_up_to_another_view_keeps_the_conditions_that_exist_there(
    vocabulary: Vocabulary, model: SemanticModel, warehouse: Warehouse
) -> None:
    state, _ = ask(
        "How many United flights from LGA in August?", None,
        vocabulary=vocabulary, model=model, warehouse=warehouse,
    )  # fmt: skip
    state, actual = ask(
        "and the average temperature?", state,
        vocabulary=vocabulary, model=model, warehouse=warehouse,
    )  # fmt: skip
    expected = warehouse.query_raw(
        "SELECT avg(temp) FROM weather WHERE origin = 'LGA' AND month = 8"
    )
    assert same(actual, [tuple(row) for row in expected])
    spec = spec_from_state(state)
    assert spec is not None and spec.view == "weather"
    assert {f.member for f in spec.filters} == {"weather.origin", "weather.month"}


@pytest.mark.parametrize(
    ("first", "follow_up", "reason_part"),
    [
        ("How many flights by carrier?", "what about weather?", "what to change"),
        ("How many flights by carrier?", "and the maximum?", "of a count"),
        ("Average humidity at JFK", "and the maximum?", "no maximum relative humidity"),
    ],
)
def test_follow_ups_that_cannot_be_applied_are_refused(
    vocabulary: Vocabulary, first: str, follow_up: str, reason_part: str
) -> None:
    planned = plan_question(first, vocabulary=vocabulary)
    assert isinstance(planned, Plan)
    refused = plan_question(follow_up, vocabulary=vocabulary, previous=planned.spec)
    assert isinstance(refused, CannotAnswer)
    assert reason_part in refused.reason


def test_plan_state_survives_json_and_a_bad_state_is_ignored(vocabulary: Vocabulary) -> None:
    planned = plan_question(
        "Top 3 destinations by number of flights from JFK in July", vocabulary=vocabulary
    )
    assert isinstance(planned, Plan)
    state = json.loads(json.dumps(plan_state(planned.spec)))
    assert spec_from_state(state) == planned.spec
    assert spec_from_state({"version": 99, "spec": state["spec"]}) is None
    assert spec_from_state({"version": 1, "spec": {"view": "flights"}}) is None
    broken = {**state["spec"], "order": [["flights.count", "sideways"]]}
    assert spec_from_state({"version": 1, "spec": broken}) is None
