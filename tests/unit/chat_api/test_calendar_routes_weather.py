"""Issue 11, points 4, 5 and 6: calendar and clock, routes, weather at departure.

Expected values are hand-written DuckDB SQL on the warehouse tables. Times of day are on the
scheduled hour; a holiday is its 2013 date; weather at departure is the observation at the
origin in the flight's year, month, day and scheduled hour.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.planner.calendar import ClockCondition, read_clock
from tests.unit.chat_api.analyst_support import ask, hand, one


@pytest.mark.parametrize(
    ("question", "where"),
    [
        ("How many flights on Christmas Day?", "month = 12 AND day = 25"),
        ("flights on Thanksgiving", "month = 11 AND day = 28"),
        ("How many flights on New Year's Day?", "month = 1 AND day = 1"),
        ("How many flights on Memorial Day?", "month = 5 AND day = 27"),
        ("How many flights departed in the first week of March?", "month = 3 AND day <= 7"),
        ("How many flights between June 10 and June 16?", "month = 6 AND day BETWEEN 10 AND 16"),
        ("flights during the last week of February", "month = 2 AND day BETWEEN 22 AND 28"),
        ("count flights on Saturdays", "dayname(time_hour) = 'Saturday'"),
        ("How many departures from JFK before 6 in the morning?", "origin = 'JFK' AND hour < 6"),
        ("How many evening departures (6pm or later) from Newark?",
         "origin = 'EWR' AND hour >= 18"),
        ("How many morning departures were there, scheduled before noon?", "hour < 12"),
        ("how many flights in the afternoon from LGA", "origin = 'LGA' AND hour BETWEEN 12 AND 16"),
        ("How many flights in the second half of the year?", "month >= 7"),
        ("flights from LaGuardia to Atlanta in the first quarter",
         "origin = 'LGA' AND dest = 'ATL' "
         "AND month <= 3"),
        ("How many flights in Q4?", "month >= 10"),
    ],
)  # fmt: skip
def test_calendar_and_clock_counts(analyst_toolbox: Toolbox, question: str, where: str) -> None:
    asked = ask(analyst_toolbox, question)
    assert asked.rows == [[one(analyst_toolbox, f"SELECT count(*) FROM flights WHERE {where}")]]


def test_average_on_a_named_holiday(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "average departure delay on Independence Day")
    expected = one(
        analyst_toolbox, "SELECT avg(dep_delay) FROM flights WHERE month = 7 AND day = 4"
    )
    assert asked.rows[0][0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("question", "column", "sql"),
    [
        ("number of flights by day of week", "weekday",
         "SELECT dayname(time_hour), count(*) FROM flights GROUP BY 1"),
        ("average departure delay by quarter", "quarter",
         "SELECT quarter(time_hour), avg(dep_delay) FROM flights GROUP BY 1"),
        ("flights by hour of departure for JFK", "hour",
         "SELECT hour, count(*) FROM flights WHERE origin = 'JFK' GROUP BY 1"),
    ],
)  # fmt: skip
def test_calendar_breakdowns(
    analyst_toolbox: Toolbox, question: str, column: str, sql: str
) -> None:
    asked = ask(analyst_toolbox, question)
    expected = {row[0]: row[1] for row in hand(analyst_toolbox, sql)}
    got = {r[column]: r[asked.columns[-1]] for r in asked.records()}
    assert got == pytest.approx(expected)


def test_read_clock_keeps_the_rest_of_the_question_in_place() -> None:
    text, found = read_clock("How many departures from JFK before 6 in the morning?")
    assert found == [ClockCondition("hour", "lt", 6, "before 6 in the morning")]
    assert text.split() == ["How", "many", "departures", "from", "JFK", "?"]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("after 9pm", [("hour", "gte", 21)]),
        ("between 5 pm and 8 pm", [("hour", "gte", 17), ("hour", "lt", 20)]),
        ("before midnight", [("hour", "lt", 0)]),
        ("in the summer", [("month", "gte", 6), ("month", "lte", 8)]),
        ("June 10-16", [("month", "equals", 6), ("day", "gte", 10), ("day", "lte", 16)]),
    ],
)  # fmt: skip
def test_read_clock_phrases(question: str, expected: list[tuple[str, str, int]]) -> None:
    _, found = read_clock(question)
    assert [(c.slot, c.operator, c.value) for c in found] == expected


def test_busiest_routes(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "busiest routes, top five")
    expected = hand(
        analyst_toolbox,
        "SELECT origin || '-' || dest, count(*) FROM flights GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
    )
    assert [[r["route"], r["count"]] for r in asked.records()] == [list(r) for r in expected]


def test_longest_routes_rank_by_the_longest_flight(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "What are the 3 longest routes?")
    expected = hand(
        analyst_toolbox,
        "SELECT max(distance) FROM flights GROUP BY origin, dest ORDER BY 1 DESC LIMIT 3",
    )
    assert [r["max_distance"] for r in asked.records()] == [r[0] for r in expected]


_JOIN = (
    "FROM flights f LEFT JOIN weather w ON f.origin = w.origin AND f.year = w.year "
    "AND f.month = w.month AND f.day = w.day AND f.hour = w.hour"
)


@pytest.mark.parametrize(
    ("question", "select", "where"),
    [
        ("average departure delay when visibility was under 1 mile", "avg(f.dep_delay)",
         "w.visib < 1"),
        ("How many flights left in hours with wind over 30 mph?", "count(*)", "w.wind_speed > 30"),
        ("how many flights departed when the temperature was below 32 degrees", "count(*)",
         "w.temp < 32"),
        ("How many flights departed from LGA during hours with gusts above 40 mph?", "count(*)",
         "f.origin = 'LGA' AND w.wind_gust > 40"),
        ("How many flights took off with more than 0.3 inches of precipitation in the hour?",
         "count(*)", "w.precip > 0.3"),
    ],
)  # fmt: skip
def test_weather_at_departure(
    analyst_toolbox: Toolbox, question: str, select: str, where: str
) -> None:
    asked = ask(analyst_toolbox, question)
    expected = one(analyst_toolbox, f"SELECT {select} {_JOIN} WHERE {where}")
    assert asked.rows[0][0] == pytest.approx(expected)
