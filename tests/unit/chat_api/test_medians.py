"""Medians: the agent answers "median ..." of delays, distance and air time (evaluation fresh-5).

The model carries them as Cube writes a median (``type: number``, ``MEDIAN({CUBE}.x)``); the
planner reads "median" as an aggregation like "average". Expected numbers are hand-written DuckDB
SQL on the warehouse tables; a metric without a median is refused with what it offers.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.sql.policies import UserContext
from tests.unit.chat_api.analyst_support import ask, hand, one


@pytest.mark.parametrize(
    ("question", "sql"),
    [
        ("what's the median departure delay", "SELECT median(dep_delay) FROM flights"),
        ("median arr delay for flights out of jfk",
         "SELECT median(arr_delay) FROM flights WHERE origin = 'JFK'"),
        ("median air time to LAX in december",
         "SELECT median(air_time) FROM flights WHERE dest = 'LAX' AND month = 12"),
        ("median distance of united flights", "SELECT median(distance) FROM flights "
         "WHERE carrier = 'UA'"),
    ],
)  # fmt: skip
def test_a_median_is_the_median_of_the_rows(
    analyst_toolbox: Toolbox, question: str, sql: str
) -> None:
    asked = ask(analyst_toolbox, question)
    assert asked.sql and "median" in asked.sql[-1].lower(), asked.answer
    expected = float(one(analyst_toolbox, sql))
    assert [float(c) for row in asked.rows for c in row if isinstance(c, int | float)] == [
        pytest.approx(expected)
    ]
    assert "median" in asked.answer.lower()


def test_medians_rank_and_group_like_averages(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "which carrier has the highest median arrival delay")
    best = hand(
        analyst_toolbox,
        "SELECT a.name, median(arr_delay) AS m FROM flights f JOIN airlines a USING (carrier) "
        "GROUP BY 1 ORDER BY m DESC NULLS LAST LIMIT 1",
    )[0]
    assert asked.rows[0][0] == best[0] and float(asked.rows[0][1]) == pytest.approx(best[1])
    by_month = ask(analyst_toolbox, "median dep delay by month")
    expected = hand(
        analyst_toolbox, "SELECT month, median(dep_delay) FROM flights GROUP BY 1 ORDER BY 1"
    )
    assert [(r[0], pytest.approx(float(r[1]))) for r in by_month.rows] == [
        (month, median) for month, median in expected
    ]


def test_a_median_sees_only_the_users_rows(analyst_toolbox: Toolbox) -> None:
    jfk = UserContext(attributes={"origin": "JFK"})
    asked = ask(analyst_toolbox, "median departure delay", user=jfk)
    expected = one(analyst_toolbox, "SELECT median(dep_delay) FROM flights WHERE origin = 'JFK'")
    assert float(asked.rows[0][0]) == pytest.approx(float(expected))


@pytest.mark.parametrize(
    ("question", "offered"),
    [("median temperature at jfk", "average"), ("median seats of the planes", "average")],
)
def test_a_metric_without_a_median_is_refused_with_what_it_offers(
    analyst_toolbox: Toolbox, question: str, offered: str
) -> None:
    asked = ask(analyst_toolbox, question)
    assert not asked.sql
    assert "has no median" in asked.answer and offered in asked.answer, asked.answer


def test_percentiles_are_still_refused(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "95th percentile of departure delay")
    assert not asked.sql and "percentile" in asked.answer


def test_the_answer_names_the_median_and_its_unit(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "median arrival delay for delta")
    expected = one(analyst_toolbox, "SELECT median(arr_delay) FROM flights WHERE carrier = 'DL'")
    assert asked.answer == (
        f"The median arrival delay for Delta Air Lines Inc. (DL) was {float(expected):g} minutes."
    )
