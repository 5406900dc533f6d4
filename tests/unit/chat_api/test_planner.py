"""The planner: questions -> query specs (pure, hand-made vocabulary) and -> the right numbers.

The numeric tests run the real path (plan -> Semantic SQL -> ``compile_semantic_sql`` ->
``Warehouse.run``) and compare with a hand-written DuckDB query over the raw tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from chat_api.planner.planner import (
    CannotAnswer,
    Filter,
    Plan,
    QuerySpec,
    describe_filter,
    plan_question,
    render_semantic_sql,
)
from chat_api.planner.vocabulary import (
    Vocabulary,
    build_vocabulary,
    load_vocabulary,
    scan,
    tokenize,
)
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

SMALL = build_vocabulary(
    carriers=[
        ("B6", "JetBlue Airways"), ("UA", "United Air Lines Inc."), ("DL", "Delta Air Lines Inc."),
        ("AA", "American Airlines Inc."), ("US", "US Airways Inc."),
        ("WN", "Southwest Airlines Co."),
    ],
    airports=[
        ("EWR", "Newark Liberty Intl"), ("JFK", "John F Kennedy Intl"), ("LGA", "La Guardia"),
        ("ATL", "Hartsfield Jackson Atlanta Intl"), ("ORD", "Chicago Ohare Intl"),
        ("MDW", "Chicago Midway Intl"), ("LAX", "Los Angeles Intl"), ("SFO", "San Francisco Intl"),
        ("PDX", "Portland Intl"), ("PWM", "Portland Intl Jetport"),
        ("RSW", "Southwest Florida Intl"), ("SJU", None),
    ],
    origins=["EWR", "JFK", "LGA"],
    manufacturers=["BOEING", "AIRBUS", "AIRBUS INDUSTRIE", "EMBRAER", "AMERICAN AIRCRAFT INC"],
    years=[2013],
)  # fmt: skip


def plan(question: str, previous: QuerySpec | None = None) -> Plan:
    result = plan_question(question, vocabulary=SMALL, previous=previous)
    assert isinstance(result, Plan), getattr(result, "reason", result)
    return result


def refusal(question: str, previous: QuerySpec | None = None) -> CannotAnswer:
    result = plan_question(question, vocabulary=SMALL, previous=previous)
    assert isinstance(result, CannotAnswer), result.semantic_sql
    return result


def values(mentions_of: str) -> list[tuple[str, tuple[Any, ...]]]:
    return [
        (m.text, m.meaning.values)
        for m in scan(mentions_of, SMALL)
        if m.meaning is not None and hasattr(m.meaning, "values")
    ]


# -- vocabulary ----------------------------------------------------------------------------------


def test_tokenize_keeps_numbers_and_codes_and_drops_apostrophes() -> None:
    assert tokenize("1,000 miles on B6 to O'Hare, 1.5 hours") == [
        "1,000", "miles", "on", "B6", "to", "OHare", "1.5", "hours",
    ]  # fmt: skip


def test_vocabulary_recognises_carrier_codes_names_and_short_forms() -> None:
    assert values("JetBlue and United Air Lines and DL and ua") == [
        ("JetBlue", ("B6",)), ("United Air Lines", ("UA",)), ("DL", ("DL",)), ("ua", ("UA",)),
    ]  # fmt: skip


def test_vocabulary_ignores_lower_case_codes_that_are_english_words() -> None:
    assert values("show us the flights") == []
    assert values("flights on US") == [("US", ("US",))]


def test_vocabulary_maps_cities_to_airports_longest_phrase_first() -> None:
    assert values("Chicago OHare, Chicago, Newark, Southwest Florida, Southwest") == [
        ("Chicago OHare", ("ORD",)), ("Chicago", ("ORD", "MDW")), ("Newark", ("EWR",)),
        ("Southwest Florida", ("RSW",)), ("Southwest", ("WN",)),
    ]  # fmt: skip


def test_vocabulary_groups_manufacturer_names() -> None:
    assert values("Airbus and Boeing") == [
        ("Airbus", ("AIRBUS", "AIRBUS INDUSTRIE")), ("Boeing", ("BOEING",)),
    ]  # fmt: skip


def test_carrier_wins_over_a_manufacturer_with_the_same_short_name() -> None:
    assert values("American") == [("American", ("AA",))]


def test_may_is_a_month_only_after_a_preposition() -> None:
    assert values("flights in May") == [("May", (5,))]
    assert values("may I see flights") == []


def test_load_vocabulary_reads_through_a_query_callable() -> None:
    answers: dict[str, list[tuple[Any, ...]]] = {
        "airlines": [("B6", "JetBlue Airways")],
        "LEFT JOIN": [("JFK", "John F Kennedy Intl"), ("SJU", None)],
        "DISTINCT origin": [("JFK",)],
        "manufacturer": [("BOEING",)],
        "UNION SELECT year": [(2013,)],
    }

    def query(sql: str) -> list[tuple[Any, ...]]:
        return next(rows for key, rows in answers.items() if key in sql)

    vocabulary = load_vocabulary(query)
    assert vocabulary.carriers == {"B6": "JetBlue Airways"}
    assert vocabulary.airport_label("SJU") == "SJU"
    assert vocabulary.origins == frozenset({"JFK"})
    assert vocabulary.years == frozenset({2013})


# -- rendering -----------------------------------------------------------------------------------


def test_render_semantic_sql_groups_orders_by_position_and_quotes_literals() -> None:
    spec = QuerySpec(
        view="flights",
        measures=("flights.avg_arr_delay", "flights.count"),
        dimensions=("flights.dest", "flights.dest_name"),
        filters=(
            Filter("flights.dest_name", "equals", ("Martha's Vineyard",)),
            Filter("flights.carrier", "notEquals", ("UA", "DL")),
            Filter("flights.distance", "gt", (1000.0,)),
        ),
        order=(("flights.avg_arr_delay", "asc"),),
        limit=1,
    )
    assert render_semantic_sql(spec) == (
        "SELECT flights.dest AS dest, flights.dest_name AS dest_name, "
        "MEASURE(flights.avg_arr_delay) AS avg_arr_delay, MEASURE(flights.count) AS count "
        "FROM flights WHERE flights.dest_name = 'Martha''s Vineyard' "
        "AND flights.carrier NOT IN ('UA', 'DL') AND flights.distance > 1000 "
        "GROUP BY 1, 2 ORDER BY 3 ASC NULLS LAST LIMIT 1"
    )


def test_render_semantic_sql_of_a_single_number_has_no_group_by() -> None:
    spec = QuerySpec("weather", ("weather.avg_wind_speed",), filters=(
        Filter("weather.origin", "in", ("JFK", "LGA")),
    ))  # fmt: skip
    assert render_semantic_sql(spec) == (
        "SELECT MEASURE(weather.avg_wind_speed) AS avg_wind_speed FROM weather "
        "WHERE weather.origin IN ('JFK', 'LGA')"
    )


# -- measures and aggregations ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "measure"),
    [
        ("How many flights were there?", "flights.count"),
        ("What was the total distance flown?", "flights.total_distance"),
        ("Average departure delay", "flights.avg_dep_delay"),
        ("What was the mean air time?", "flights.avg_air_time"),
        ("Minimum arrival delay", "flights.min_arr_delay"),
        ("What was the longest flight?", "flights.max_distance"),
        ("What was the shortest air time?", "flights.min_air_time"),
        ("How many distinct destinations are there?", "flights.distinct_destinations"),
        ("How many different airlines fly from JFK?", "flights.distinct_carriers"),
        ("How many airlines are there?", "airlines.count"),
        ("How many airports are there?", "airports.count"),
        ("How many planes are there?", "planes.count"),
        ("How many planes did United fly?", "flights.distinct_planes"),
        ("How many manufacturers are there?", "planes.distinct_manufacturers"),
        ("Average temperature", "weather.avg_temp"),
        ("Highest wind gust", "weather.max_wind_gust"),
        ("How much rain at JFK?", "weather.total_precip"),
        ("Average seats", "planes.avg_seats"),
        ("How many seats do Boeing planes have?", "planes.total_seats"),
        ("What is the oldest plane?", "planes.min_year"),
        ("Average altitude of airports", "airports.avg_alt"),
        ("How many weather observations are there?", "weather.count"),
    ],
)
def test_measure_and_aggregation_words_pick_the_measure(question: str, measure: str) -> None:
    assert plan(question).spec.measures == (measure,)


def test_delay_without_a_direction_is_read_as_arrival_delay_and_says_so() -> None:
    result = plan("Average delay")
    assert result.spec.measures == ("flights.avg_arr_delay",)
    assert any("arrival delay" in note for note in result.reasoning)


def test_metric_without_an_aggregation_uses_the_average_and_says_so() -> None:
    result = plan("arrival delay by carrier")
    assert result.spec.measures == ("flights.avg_arr_delay",)
    assert any("using the average" in note for note in result.reasoning)


def test_two_measures_share_one_query() -> None:
    result = plan("average arrival delay and distance by carrier")
    assert result.spec.measures == ("flights.avg_arr_delay", "flights.avg_distance")


# -- breakdowns, ranking ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "dimensions"),
    [
        ("Average arrival delay by carrier", ("flights.carrier_name",)),
        ("Average distance per origin", ("flights.origin", "flights.origin_name")),
        ("Flight counts for each destination", ("flights.dest", "flights.dest_name")),
        ("Monthly flight counts", ("flights.month",)),
        ("Number of flights by hour", ("flights.hour",)),
        ("Average seats by manufacturer", ("planes.manufacturer",)),
        ("Average temperature by month at JFK", ("weather.month",)),
        ("Total precipitation by airport", ("weather.origin",)),
        ("Number of flights by plane manufacturer", ("flights.plane_manufacturer",)),
    ],
)
def test_breakdown_phrases_group_by_dimensions(question: str, dimensions: tuple[str]) -> None:
    assert plan(question).spec.dimensions == dimensions


def test_breakdown_by_category_is_sorted_by_the_measure_and_by_month_in_month_order() -> None:
    assert plan("Average arrival delay by carrier").spec.order == (
        ("flights.avg_arr_delay", "desc"),
    )
    by_month = plan("Monthly flight counts")
    assert by_month.spec.order == (("flights.month", "asc"),)
    assert by_month.chart.mark == "line"


def test_which_n_with_a_superlative_ranks_and_limits() -> None:
    spec = plan("Which 3 airlines flew the longest total distance?").spec
    assert spec.dimensions == ("flights.carrier_name",)
    assert spec.measures[0] == "flights.total_distance"
    assert (spec.order, spec.limit) == ((("flights.total_distance", "desc"),), 3)


def test_which_singular_with_lowest_keeps_one_row_and_adds_the_count() -> None:
    spec = plan("Which destination had the lowest average arrival delay?").spec
    assert spec.dimensions == ("flights.dest", "flights.dest_name")
    assert spec.measures == ("flights.avg_arr_delay", "flights.count")
    assert (spec.order, spec.limit) == ((("flights.avg_arr_delay", "asc"),), 1)


@pytest.mark.parametrize(
    ("question", "dimension", "direction", "limit"),
    [
        ("Top 5 destinations by number of flights", "flights.dest", "desc", 5),
        ("Which carrier has the most flights?", "flights.carrier_name", "desc", 1),
        ("Which carrier had the fewest flights?", "flights.carrier_name", "asc", 1),
        ("What's the busiest airport?", "flights.origin", "desc", 1),
        ("Top destinations by number of flights", "flights.dest", "desc", 10),
        ("Which 5 planes flew the most flights?", "flights.tailnum", "desc", 5),
    ],
)
def test_counts_are_ranked_by_most_fewest_busiest_and_top(
    question: str, dimension: str, direction: str, limit: int
) -> None:
    spec = plan(question).spec
    assert spec.dimensions[0] == dimension
    assert spec.measures == ("flights.count",)
    assert (spec.order, spec.limit) == ((("flights.count", direction),), limit)


# -- filters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "filters"),
    [
        ("How many flights were there in March?", [("flights.month", "equals", (3,))]),
        ("How many JetBlue flights?", [("flights.carrier", "equals", ("B6",))]),
        ("How many flights from JFK?", [("flights.origin", "equals", ("JFK",))]),
        ("How many flights departing LGA?", [("flights.origin", "equals", ("LGA",))]),
        ("How many flights to Atlanta?", [("flights.dest", "equals", ("ATL",))]),
        ("How many flights into ATL?", [("flights.dest", "equals", ("ATL",))]),
        ("How many flights at LGA?", [("flights.origin", "equals", ("LGA",))]),
        ("How many flights to Chicago?", [("flights.dest", "in", ("ORD", "MDW"))]),
        ("How many flights from JFK or LGA?", [("flights.origin", "in", ("JFK", "LGA"))]),
        ("How many flights not from JFK?", [("flights.origin", "notEquals", ("JFK",))]),
        ("Number of flights excluding Delta", [("flights.carrier", "notEquals", ("DL",))]),
        (
            "How many flights between JFK and LAX?",
            [("flights.origin", "equals", ("JFK",)), ("flights.dest", "equals", ("LAX",))],
        ),
        ("Average wind speed at LGA", [("weather.origin", "equals", ("LGA",))]),
        ("How many flights in 2013?", [("flights.year", "equals", (2013,))]),
        ("How many flights in June and July?", [("flights.month", "in", (6, 7))]),
        ("How many flights after June?", [("flights.month", "gt", (6,))]),
        (
            "How many flights between March and May?",
            [("flights.month", "gte", (3,)), ("flights.month", "lte", (5,))],
        ),
        (
            "How many flights on March 3rd?",
            [("flights.day", "equals", (3,)), ("flights.month", "equals", (3,))],
        ),
        ("How many flights on Airbus planes?", [
            ("flights.plane_manufacturer", "in", ("AIRBUS", "AIRBUS INDUSTRIE")),
        ]),
        ("How many planes were built by Boeing?", [("planes.manufacturer", "equals", ("BOEING",))]),
        ("How many planes were built before 2000?", [("planes.year", "lt", (2000,))]),
    ],
)  # fmt: skip
def test_values_in_the_question_become_filters(
    question: str, filters: list[tuple[str, str, tuple[Any, ...]]]
) -> None:
    got = [(f.member, f.operator, f.values) for f in plan(question).spec.filters]
    assert sorted(got) == sorted(filters)


@pytest.mark.parametrize(
    ("question", "member", "operator", "value"),
    [
        ("How many flights were delayed by more than 30 minutes?", "flights.arr_delay", "gt", 30),
        ("How many flights were delayed by more than an hour?", "flights.arr_delay", "gt", 60),
        ("How many flights were delayed by over half an hour?", "flights.arr_delay", "gt", 30),
        ("How many flights departed more than 2 hours late?", "flights.dep_delay", "gt", 120),
        ("How many flights had a departure delay over 45?", "flights.dep_delay", "gt", 45),
        ("How many flights arrived more than 10 minutes early?", "flights.arr_delay", "lt", -10),
        ("How many flights were delayed?", "flights.arr_delay", "gt", 0),
        ("How many flights were not delayed?", "flights.arr_delay", "lte", 0),
        ("How many flights arrived early?", "flights.arr_delay", "lt", 0),
        ("How many flights longer than 1000 miles?", "flights.distance", "gt", 1000),
        ("How many flights longer than 5 hours?", "flights.air_time", "gt", 300),
        ("How many flights under 200 miles?", "flights.distance", "lt", 200),
        ("How many planes have more than 200 seats?", "planes.seats", "gt", 200),
        ("How many planes have 300 seats or more?", "planes.seats", "gte", 300),
        ("Number of weather observations above 90 degrees", "weather.temp", "gt", 90),
        ("Number of weather observations with wind over 30 mph", "weather.wind_speed", "gt", 30),
    ],
)
def test_thresholds_become_comparisons_on_the_right_dimension(
    question: str, member: str, operator: str, value: float
) -> None:
    (only,) = plan(question).spec.filters
    assert (only.member, only.operator, only.values) == (member, operator, (value,))


def test_by_before_a_named_value_is_not_a_breakdown() -> None:
    spec = plan("How many flights by Boeing planes?").spec
    assert spec.dimensions == ()
    assert spec.filters == (Filter("flights.plane_manufacturer", "equals", ("BOEING",)),)


def test_a_second_noun_after_and_continues_the_breakdown() -> None:
    result = plan("Number of flights by origin and month")
    assert result.spec.dimensions == ("flights.origin", "flights.origin_name", "flights.month")
    assert (result.chart.mark, result.chart.x, result.chart.color) == ("line", "month", "origin")


def test_a_measure_before_of_and_a_threshold_is_the_threshold_subject() -> None:
    spec = plan("How many flights had a delay of more than 2 hours?").spec
    assert spec.measures == ("flights.count",)
    assert spec.filters == (Filter("flights.arr_delay", "gt", (120.0,)),)


def test_a_measure_with_its_aggregation_is_not_taken_as_a_threshold_subject() -> None:
    spec = plan(
        "What is the average departure delay of flights that arrived over an hour late?"
    ).spec
    assert spec.measures == ("flights.avg_dep_delay",)
    assert spec.filters == (Filter("flights.arr_delay", "gt", (60.0,)),)


def test_a_plane_filter_on_a_flight_count_uses_the_flights_view() -> None:
    spec = plan("How many Boeing planes flew in July?").spec
    assert spec.view == "flights"
    assert spec.measures == ("flights.distinct_planes",)


# -- follow-ups ------------------------------------------------------------------------------


def test_follow_up_adds_a_filter_and_keeps_the_measure_and_breakdown() -> None:
    first = plan("Average arrival delay by carrier")
    second = plan("and only from JFK?", previous=first.spec)
    assert second.spec.measures == first.spec.measures
    assert second.spec.dimensions == first.spec.dimensions
    assert second.spec.filters == (Filter("flights.origin", "equals", ("JFK",)),)


def test_follow_up_now_by_month_replaces_the_breakdown_and_its_order() -> None:
    first = plan("Average arrival delay from JFK by carrier")
    second = plan("now by month", previous=first.spec)
    assert second.spec.dimensions == ("flights.month",)
    assert second.spec.order == (("flights.month", "asc"),)
    assert second.spec.filters == first.spec.filters


def test_follow_up_what_about_replaces_the_carrier_filter() -> None:
    first = plan("Average departure delay of United flights by month")
    second = plan("what about Delta?", previous=first.spec)
    assert second.spec.filters == (Filter("flights.carrier", "equals", ("DL",)),)
    assert second.spec.measures == ("flights.avg_dep_delay",)


def test_follow_up_with_a_new_measure_keeps_the_filters() -> None:
    first = plan("How many flights from LGA by carrier?")
    second = plan("and the average distance?", previous=first.spec)
    assert second.spec.measures == ("flights.avg_distance",)
    assert second.spec.filters == first.spec.filters


def test_follow_up_top_three_ranks_the_previous_breakdown() -> None:
    first = plan("How many flights by destination?")
    second = plan("only the top 3", previous=first.spec)
    assert (second.spec.order, second.spec.limit) == ((("flights.count", "desc"),), 3)


def test_a_new_full_question_ignores_the_previous_one() -> None:
    first = plan("Average arrival delay from JFK by carrier")
    assert plan("How many planes are there?", previous=first.spec).spec.filters == ()


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "reason_part"),
    [
        ("What was the total revenue by carrier?", "revenue"),
        ("How many passengers flew from JFK?", "passenger"),
        ("Average ticket price to Boston?", "prices"),
        ("How many flights to Paris?", "'Paris'"),
        ("How many Lufthansa flights were there?", "'Lufthansa'"),
        ("Which airline is the best?", "'best'"),
        ("How many flights were there in 2019?", "2013"),
        ("flights to Portland", "PDX"),
        ("average temperature and average arrival delay", "separate views"),
        ("what is the highest average arrival delay", "needs something to rank"),
        ("average number of flights per month", "second aggregation"),
        ("How many flights with more than 30?", "which measure"),
        ("How many flights with 45?", "'45'"),
        ("Average temperature at ATL", "Weather is recorded only at"),
        ("Average temperature for Delta", "no carrier"),
        ("Minimum humidity", "no minimum relative humidity"),
        ("Show me something interesting", "'interesting'"),
        ("Which flight had the longest delay?", "individual flights"),
        ("How many flights per day?", "day-by-day"),
        ("How many flights did JetBlue and Delta each have?", "'each'"),
        ("How many flights from Atlanta?", "departing New York City"),
        ("How many carriers have more than 1000 flights?", "Conditions on counts"),
        (
            "Which carrier has the highest average arrival delay with more than 1000 flights?",
            "Conditions on counts",
        ),
        ("How many flights last week?", "relative dates"),
    ],
)
def test_questions_outside_the_model_get_an_honest_refusal(question: str, reason_part: str) -> None:
    refused = refusal(question)
    assert reason_part in refused.reason
    assert refused.suggestions


def test_a_follow_up_without_a_previous_question_is_refused() -> None:
    assert "measure" in refusal("what about Delta?").reason


# -- plan text -------------------------------------------------------------------------------


def test_plan_has_title_description_search_words_chart_and_reasoning() -> None:
    result = plan("Which destination had the lowest average arrival delay?")
    assert result.title == "Average arrival delay by destination (bottom 1)"
    assert result.description.startswith("Average arrival delay (minutes) of flights")
    assert result.search_query == "flights average arrival delay destination"
    assert (result.chart.mark, result.chart.x, result.chart.y) == ("bar", "dest", "avg_arr_delay")
    assert result.semantic_sql == render_semantic_sql(result.spec)
    assert any("flights.avg_arr_delay" in note for note in result.reasoning)
    assert any("asc" in note for note in result.reasoning)


def test_single_number_plan_charts_as_text_and_says_its_conditions() -> None:
    result = plan("Number of United flights to Chicago OHare in March")
    assert result.chart.mark == "text"
    assert result.conditions == (
        "for United Air Lines Inc. (UA)", "to ORD (Chicago Ohare Intl)", "in March",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("f", "words"),
    [
        (
            Filter("flights.origin", "in", ("JFK", "LGA")),
            "from JFK (John F Kennedy Intl) or LGA (La Guardia)",
        ),
        (Filter("flights.carrier", "notEquals", ("DL",)), "not for Delta Air Lines Inc. (DL)"),
        (Filter("flights.month", "gte", (3,)), "from March"),
        (Filter("flights.arr_delay", "gt", (30,)), "with arrival delay over 30 minutes"),
        (Filter("planes.year", "lt", (2000,)), "built before 2000"),
        (Filter("planes.year", "equals", (2004,)), "built in 2004"),
        (Filter("weather.origin", "equals", ("EWR",)), "at EWR (Newark Liberty Intl)"),
    ],
)  # fmt: skip
def test_describe_filter_says_filters_in_words(f: Filter, words: str) -> None:
    assert describe_filter(f, SMALL) == words


# -- the right numbers, through the compiler and the warehouse ------------------------------


@pytest.fixture(scope="session")
def vocabulary(warehouse: Warehouse) -> Vocabulary:
    return load_vocabulary(warehouse.query_raw)


def run_plan(
    question: str,
    vocabulary: Vocabulary,
    model: SemanticModel,
    warehouse: Warehouse,
    previous: QuerySpec | None = None,
) -> tuple[Plan, list[tuple[Any, ...]]]:
    planned = plan_question(question, vocabulary=vocabulary, previous=previous)
    assert isinstance(planned, Plan), getattr(planned, "reason", planned)
    compiled = compile_semantic_sql(planned.semantic_sql, model=model, user=UserContext())
    result = warehouse.run(compiled, row_limit=1000)
    assert result.total_rows == len(result.rows)
    return planned, [tuple(row) for row in result.rows]


def same_rows(actual: Sequence[tuple[Any, ...]], expected: Sequence[tuple[Any, ...]]) -> bool:
    if len(actual) != len(expected):
        return False
    for got, want in zip(actual, expected, strict=True):
        if len(got) != len(want):
            return False
        for a, b in zip(got, want, strict=True):
            if isinstance(b, float) and not math.isclose(float(a), b, rel_tol=1e-9, abs_tol=1e-9):
                return False
            if not isinstance(b, float) and a != b:
                return False
    return True


NUMERIC_CASES = [
    ("How many flights were there in March?",
     "SELECT count(*) FROM flights WHERE month = 3", True),
    ("Average arrival delay by carrier",
     "SELECT a.name, avg(f.arr_delay) FROM flights f LEFT JOIN airlines a USING (carrier) "
     "GROUP BY 1 ORDER BY 2 DESC", True),
    ("Which 3 airlines flew the longest total distance?",
     "SELECT a.name, sum(f.distance), count(*) FROM flights f LEFT JOIN airlines a "
     "USING (carrier) GROUP BY 1 ORDER BY 2 DESC LIMIT 3", True),
    ("Which destination had the lowest average arrival delay?",
     "SELECT f.dest, p.name, avg(f.arr_delay), count(*) FROM flights f "
     "LEFT JOIN airports p ON p.faa = f.dest GROUP BY 1, 2 ORDER BY 3 ASC LIMIT 1", True),
    ("How many distinct destinations does JetBlue fly to?",
     "SELECT count(DISTINCT dest) FROM flights WHERE carrier = 'B6'", True),
    ("Monthly flight counts from EWR",
     "SELECT month, count(*) FROM flights WHERE origin = 'EWR' GROUP BY 1 ORDER BY 1", True),
    ("Average wind speed at LGA",
     "SELECT avg(wind_speed) FROM weather WHERE origin = 'LGA'", True),
    ("How many planes were built by Boeing?",
     "SELECT count(*) FROM planes WHERE manufacturer = 'BOEING'", True),
    ("What was the maximum departure delay from JFK in July?",
     "SELECT max(dep_delay) FROM flights WHERE origin = 'JFK' AND month = 7", True),
    ("How many flights were delayed by more than 30 minutes?",
     "SELECT count(*) FROM flights WHERE arr_delay > 30", True),
    ("Average distance per origin",
     "SELECT f.origin, p.name, avg(f.distance) FROM flights f "
     "LEFT JOIN airports p ON p.faa = f.origin GROUP BY 1, 2", False),
    ("Number of United flights to Chicago O'Hare",
     "SELECT count(*) FROM flights WHERE carrier = 'UA' AND dest = 'ORD'", True),
    ("Total air time by month for Delta",
     "SELECT month, sum(air_time) FROM flights WHERE carrier = 'DL' GROUP BY 1 ORDER BY 1", True),
    ("How many airports are there?", "SELECT count(*) FROM airports", True),
    ("Average seats by manufacturer",
     "SELECT manufacturer, avg(seats) FROM planes GROUP BY 1", False),
    ("Top 5 destinations by number of flights",
     "SELECT f.dest, p.name, count(*) FROM flights f LEFT JOIN airports p ON p.faa = f.dest "
     "GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 5", True),
    ("Which carrier has the most flights?",
     "SELECT a.name, count(*) FROM flights f LEFT JOIN airlines a USING (carrier) "
     "GROUP BY 1 ORDER BY 2 DESC LIMIT 1", True),
    ("Minimum temperature at EWR in January",
     "SELECT min(temp) FROM weather WHERE origin = 'EWR' AND month = 1", True),
    ("How many flights longer than 1000 miles departed from LGA?",
     "SELECT count(*) FROM flights WHERE distance > 1000 AND origin = 'LGA'", True),
    ("How many planes have more than 200 seats?",
     "SELECT count(*) FROM planes WHERE seats > 200", True),
    ("Which month had the highest average departure delay?",
     "SELECT month, avg(dep_delay), count(*) FROM flights GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
     True),
    ("How many different airlines fly out of Newark?",
     "SELECT count(DISTINCT carrier) FROM flights WHERE origin = 'EWR'", True),
    ("How many flights were on Airbus planes?",
     "SELECT count(*) FROM flights f JOIN planes p USING (tailnum) "
     "WHERE p.manufacturer IN ('AIRBUS', 'AIRBUS INDUSTRIE')", True),
    ("How many flights departed more than 2 hours late?",
     "SELECT count(*) FROM flights WHERE dep_delay > 120", True),
    ("How many flights went to Chicago?",
     "SELECT count(*) FROM flights WHERE dest IN ('ORD', 'MDW')", True),
    ("Average temperature by month at JFK",
     "SELECT month, avg(temp) FROM weather WHERE origin = 'JFK' GROUP BY 1 ORDER BY 1", True),
    ("How many planes were built before 1990?",
     "SELECT count(*) FROM planes WHERE year < 1990", True),
    ("Total precipitation by airport",
     "SELECT origin, sum(precip) FROM weather GROUP BY 1", False),
    ("How many planes did United fly?",
     "SELECT count(DISTINCT tailnum) FROM flights WHERE carrier = 'UA'", True),
    ("Average arrival delay of flights from JFK to LAX",
     "SELECT avg(arr_delay) FROM flights WHERE origin = 'JFK' AND dest = 'LAX'", True),
]  # fmt: skip


@pytest.mark.parametrize(("question", "expected_sql", "ordered"), NUMERIC_CASES)
def test_planned_query_returns_the_numbers_of_a_hand_written_query(
    question: str,
    expected_sql: str,
    ordered: bool,
    vocabulary: Vocabulary,
    model: SemanticModel,
    warehouse: Warehouse,
) -> None:
    _, actual = run_plan(question, vocabulary, model, warehouse)
    expected = [tuple(row) for row in warehouse.query_raw(expected_sql)]
    if not ordered:
        actual, expected = sorted(actual, key=repr), sorted(expected, key=repr)
    assert same_rows(actual, expected), (actual[:5], expected[:5])


def test_follow_up_chain_returns_the_numbers_of_hand_written_queries(
    vocabulary: Vocabulary, model: SemanticModel, warehouse: Warehouse
) -> None:
    steps = [
        ("Average arrival delay by carrier", "WHERE true GROUP BY a.name ORDER BY 2 DESC"),
        ("and only from JFK?", "WHERE f.origin = 'JFK' GROUP BY a.name ORDER BY 2 DESC"),
        ("now by month", "WHERE f.origin = 'JFK' GROUP BY f.month ORDER BY 1"),
        ("what about Delta?", "WHERE f.origin = 'JFK' AND f.carrier = 'DL' GROUP BY f.month "
         "ORDER BY 1"),
    ]  # fmt: skip
    previous: QuerySpec | None = None
    for question, tail in steps:
        planned, actual = run_plan(question, vocabulary, model, warehouse, previous)
        group = "a.name" if "a.name" in tail else "f.month"
        expected = warehouse.query_raw(
            f"SELECT {group}, avg(f.arr_delay) FROM flights f LEFT JOIN airlines a "
            f"USING (carrier) {tail}"
        )
        assert same_rows(actual, [tuple(row) for row in expected]), question
        previous = planned.spec
