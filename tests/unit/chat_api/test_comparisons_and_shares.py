"""Issue 11, points 2 and 3: comparisons (one row per side) and rates, shares, percentages.

Expected values are hand-written DuckDB SQL on the warehouse tables. Cancelled = no actual
departure time; a share's denominator is all flights of the group, cancelled ones included.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from tests.unit.chat_api.analyst_support import ask, hand, one


def _by(rows: list[tuple[object, ...]]) -> dict[object, object]:
    return {row[0]: row[1] for row in rows}


def test_vs_gives_one_row_per_side_with_both_values_and_the_larger(
    analyst_toolbox: Toolbox,
) -> None:
    asked = ask(analyst_toolbox, "JFK vs LGA: average departure delay")
    expected = _by(
        hand(analyst_toolbox, "SELECT origin, avg(dep_delay) FROM flights "
             "WHERE origin IN ('JFK', 'LGA') GROUP BY 1")
    )  # fmt: skip
    got = {r["origin"]: r["avg_dep_delay"] for r in asked.records()}
    assert got.keys() == {"JFK", "LGA"}
    assert got == pytest.approx(expected)
    larger = max(expected, key=lambda k: float(expected[k]))  # type: ignore[arg-type]
    for side, value in expected.items():
        assert f"{value:.2f}" in asked.answer, side
    assert f"**{larger}" in asked.answer


@pytest.mark.parametrize(
    ("question", "column", "sql"),
    [
        ("Compare United and Delta by number of flights", "carrier_name",
         "SELECT a.name, count(*) FROM flights f JOIN airlines a USING (carrier) "
         "WHERE carrier IN ('UA', 'DL') GROUP BY 1"),
        ("Which is busier, Newark or LaGuardia?", "origin",
         "SELECT origin, count(*) FROM flights WHERE origin IN ('EWR', 'LGA') GROUP BY 1"),
        ("more flights in January or February?", "month",
         "SELECT month, count(*) FROM flights WHERE month IN (1, 2) GROUP BY 1"),
        ("Compare Monday and Friday flight counts", "weekday",
         "SELECT dayname(time_hour), count(*) FROM flights "
         "WHERE dayname(time_hour) IN ('Monday', 'Friday') GROUP BY 1"),
        ("flights to Midway vs O'Hare", "dest",
         "SELECT dest, count(*) FROM flights WHERE dest IN ('MDW', 'ORD') GROUP BY 1"),
    ],
)  # fmt: skip
def test_comparisons_count_each_side(
    analyst_toolbox: Toolbox, question: str, column: str, sql: str
) -> None:
    asked = ask(analyst_toolbox, question)
    assert {r[column]: r["count"] for r in asked.records()} == _by(hand(analyst_toolbox, sql))
    larger = max(_by(hand(analyst_toolbox, sql)).values())  # type: ignore[type-var]
    assert " has more (" in asked.answer or " are equal." in asked.answer
    assert f"{larger:,}" in asked.answer


def test_a_comparison_of_weather_sides(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "Is it warmer at JFK or Newark in July on average?")
    expected = _by(
        hand(analyst_toolbox, "SELECT origin, avg(temp) FROM weather "
             "WHERE month = 7 AND origin IN ('JFK', 'EWR') GROUP BY 1")
    )  # fmt: skip
    assert {r["origin"]: r["avg_temp"] for r in asked.records()} == pytest.approx(expected)


def test_a_comparison_without_two_sides_is_refused(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "compare the average arrival delay of JetBlue")
    assert asked.turn.spec is None and "two or more values" in asked.answer


def test_cancellation_rate_states_rule_and_denominator(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "What percentage of flights were cancelled?")
    cancelled, total = hand(
        analyst_toolbox, "SELECT count(*) FILTER (WHERE dep_time IS NULL), count(*) FROM flights"
    )[0]
    record = asked.records()[0]
    assert record["cancellation_rate"] == pytest.approx(100.0 * cancelled / total)
    assert "no actual departure time" in asked.answer
    assert f"{cancelled:,} cancelled of {total:,} flights" in asked.answer


def test_cancellation_rate_by_carrier_in_one_query(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "cancellation rate by carrier")
    expected = _by(
        hand(analyst_toolbox, "SELECT a.name, 100.0 * count(*) FILTER (WHERE dep_time IS NULL) "
             "/ count(*) FROM flights f JOIN airlines a USING (carrier) GROUP BY 1")
    )  # fmt: skip
    got = {r["carrier_name"]: r["cancellation_rate"] for r in asked.records()}
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("question", "part", "whole"),
    [
        ("What share of JFK's flights does JetBlue operate?", "carrier = 'B6'", "origin = 'JFK'"),
        ("percent of flights arriving more than 15 minutes late", "arr_delay > 15", "true"),
        ("what fraction of Delta flights arrived early", "arr_delay < 0", "carrier = 'DL'"),
        ("What percentage of Newark departures went to Chicago O'Hare?", "dest = 'ORD'",
         "origin = 'EWR'"),
        ("percent of flights that departed early from JFK", "dep_delay < 0", "origin = 'JFK'"),
    ],
)  # fmt: skip
def test_shares_are_part_over_whole_from_two_queries(
    analyst_toolbox: Toolbox, question: str, part: str, whole: str
) -> None:
    asked = ask(analyst_toolbox, question)
    n = one(analyst_toolbox, f"SELECT count(*) FROM flights WHERE ({whole}) AND ({part})")
    total = one(analyst_toolbox, f"SELECT count(*) FROM flights WHERE {whole}")
    assert len(asked.sql) == 2
    assert [r[0] for r in (asked.results[0]["data"][0], asked.results[1]["data"][0])] == [n, total]
    assert f"{100.0 * n / total:.2f}% of the {total:,} flights" in asked.answer
    assert "cancelled flights included" in asked.answer


def test_semantic_sql_can_ask_the_new_measures(
    model: SemanticModel, analyst_toolbox: Toolbox
) -> None:
    compiled = compile_semantic_sql(
        "SELECT flights.origin AS origin, MEASURE(flights.cancelled_count) AS c, "
        "MEASURE(flights.departed_count) AS d, MEASURE(flights.cancellation_rate) AS r "
        "FROM flights GROUP BY 1 ORDER BY 1",
        model=model, user=UserContext(),
    )  # fmt: skip
    got = hand(analyst_toolbox, compiled.sql)
    expected = hand(
        analyst_toolbox,
        "SELECT origin, count(*) FILTER (WHERE dep_time IS NULL), count(dep_time), "
        "100.0 * count(*) FILTER (WHERE dep_time IS NULL) / count(*) FROM flights "
        "GROUP BY 1 ORDER BY 1",
    )
    assert [r[:3] for r in got] == [r[:3] for r in expected]
    assert [r[3] for r in got] == pytest.approx([r[3] for r in expected])


def test_a_comparative_with_two_sides_compares_and_without_them_does_not(
    analyst_toolbox: Toolbox,
) -> None:
    asked = ask(analyst_toolbox, "Newark versus JFK: which had more departures?")
    expected = _by(
        hand(analyst_toolbox, "SELECT origin, count(*) FROM flights "
             "WHERE origin IN ('EWR', 'JFK') GROUP BY 1")
    )  # fmt: skip
    assert {r["origin"]: r["count"] for r in asked.records()} == expected
    single = ask(analyst_toolbox, "how many flights had more than 2 hours of departure delay")
    assert single.rows == [
        [one(analyst_toolbox, "SELECT count(*) FROM flights WHERE dep_delay > 120")]
    ]


def test_a_share_per_group_ranks_groups_by_their_share(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "on-time performance by carrier")
    rows = hand(
        analyst_toolbox,
        "SELECT carrier, count(*) FILTER (WHERE arr_delay < 15), count(*) FROM flights "
        "GROUP BY 1 ORDER BY count(*) FILTER (WHERE arr_delay < 15) / count(*) DESC LIMIT 1",
    )
    ((_, n, total),) = rows
    table = asked.answer.split("\n")
    first_row = next(line for line in table if line.startswith("| ") and "share" not in line)
    assert f"| {n:,} | {total:,} | {100.0 * n / total:.2f} |" in first_row
