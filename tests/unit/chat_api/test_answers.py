"""Answers: markdown with the real numbers, Vega-Lite specs without data, honest refusals."""

from __future__ import annotations

from typing import Any

import pytest

from chat_api.planner.answers import (
    DATA_NAME,
    MAX_TABLE_ROWS,
    VEGA_LITE_SCHEMA,
    compose_answer,
    compose_cannot_answer,
    format_value,
    vega_spec,
)
from chat_api.planner.planner import CannotAnswer, Plan, plan_question
from chat_api.planner.vocabulary import build_vocabulary, load_vocabulary
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

SMALL = build_vocabulary(
    carriers=[("B6", "JetBlue Airways"), ("UA", "United Air Lines Inc.")],
    airports=[("EWR", "Newark Liberty Intl"), ("JFK", "John F Kennedy Intl"),
              ("LGA", "La Guardia"), ("LEX", "Blue Grass"), ("ATL", None)],
    origins=["EWR", "JFK", "LGA"],
    manufacturers=["BOEING"],
    years=[2013],
)  # fmt: skip


def plan(question: str) -> Plan:
    result = plan_question(question, vocabulary=SMALL)
    assert isinstance(result, Plan), getattr(result, "reason", result)
    return result


def answer(question: str, columns: list[tuple[str, str]], rows: list[list[Any]]) -> str:
    return compose_answer(plan(question), columns=columns, rows=rows, total_rows=len(rows))


# -- single numbers --------------------------------------------------------------------------


def test_count_answer_is_one_sentence_with_separators_and_the_filters() -> None:
    text = answer("How many flights were there in March?", [("count", "Int64")], [[28834]])
    assert text == "There were 28,834 flights in March."


def test_count_of_one_is_singular() -> None:
    text = answer("How many JetBlue flights to LEX?", [("count", "Int64")], [[1]])
    assert text == "There was 1 flight for JetBlue Airways (B6) to LEX (Blue Grass)."


def test_planes_are_counted_in_the_present_tense() -> None:
    text = answer("How many planes were built by Boeing?", [("count", "Int64")], [[1630]])
    assert text == "There are 1,630 planes made by BOEING."


def test_average_answer_has_two_decimals_and_the_unit() -> None:
    text = answer("Average wind speed at LGA", [("avg_wind_speed", "Double")], [[10.622838]])
    assert text == "The average wind speed at LGA (La Guardia) was 10.62 mph."


def test_temperature_unit_follows_the_number_without_a_space() -> None:
    text = answer("Minimum temperature at EWR in January", [("min_temp", "Double")], [[10.94]])
    assert text == "The minimum temperature at EWR (Newark Liberty Intl) in January was 10.94°F."


def test_missing_average_says_nothing_matched_instead_of_a_number() -> None:
    text = answer("Average arrival delay to ATL", [("avg_arr_delay", "Double")], [[None]])
    assert "no average arrival delay" in text
    assert "None" not in text


def test_no_rows_says_nothing_matched() -> None:
    text = compose_answer(
        plan("Average arrival delay by carrier from JFK"),
        columns=[("carrier_name", "String"), ("avg_arr_delay", "Double")],
        rows=[],
        total_rows=0,
    )
    assert text == "No flights matched from JFK (John F Kennedy Intl), so there is no result."


# -- rankings and breakdowns -----------------------------------------------------------------


def test_top_row_is_named_with_its_value_and_the_few_flights_it_rests_on() -> None:
    text = answer(
        "Which destination had the lowest average arrival delay?",
        [("dest", "String"), ("dest_name", "String"), ("avg_arr_delay", "Double"),
         ("count", "Int64")],
        [["LEX", "Blue Grass", -22.0, 1]],
    )  # fmt: skip
    assert text == (
        "**LEX (Blue Grass)** had the lowest average arrival delay: -22 minutes "
        "(from only 1 flight)."
    )


def test_most_flights_names_the_top_row() -> None:
    text = answer(
        "Which carrier has the most flights?",
        [("carrier_name", "String"), ("count", "Int64")],
        [["United Air Lines Inc.", 58665]],
    )
    assert text == "**United Air Lines Inc.** had the most flights: 58,665."


def test_top_n_names_the_first_row_and_shows_a_table() -> None:
    text = answer(
        "Which 3 airlines flew the longest total distance?",
        [("carrier_name", "String"), ("total_distance", "Int64"), ("count", "Int64")],
        [["United Air Lines Inc.", 89705524, 58665], ["Delta Air Lines Inc.", 59507317, 48110],
         ["JetBlue Airways", 58384137, 54635]],
    )  # fmt: skip
    first, table = text.split("\n\n", 1)
    assert first == (
        "**United Air Lines Inc.** had the highest total distance: 89,705,524 miles "
        "(58,665 flights)."
    )
    assert "| Carrier | Total distance (miles) | Number of flights |" in table
    assert "| Delta Air Lines Inc. | 59,507,317 | 48,110 |" in table


def test_monthly_breakdown_table_names_the_months() -> None:
    rows = [[month, 9000 + month] for month in range(1, 13)]
    text = answer("Monthly flight counts from EWR", [("month", "Int64"), ("count", "Int64")], rows)
    assert text.startswith("Number of flights from EWR (Newark Liberty Intl) by month:\n\n")
    assert "| Month | Number of flights |" in text
    assert "| March | 9,003 |" in text
    assert "Showing" not in text


def test_long_breakdown_shows_fifteen_rows_and_says_how_many_there_are() -> None:
    rows = [[f"Airline {n}", float(n)] for n in range(20)]
    text = compose_answer(
        plan("Average arrival delay by carrier"),
        columns=[("carrier_name", "String"), ("avg_arr_delay", "Double")],
        rows=rows,
        total_rows=20,
    )
    assert text.count("| Airline ") == MAX_TABLE_ROWS
    assert text.endswith("Showing 15 of 20 rows.")


def test_code_and_name_share_one_cell_and_missing_values_are_marked() -> None:
    text = answer(
        "Average distance per origin",
        [("origin", "String"), ("origin_name", "String"), ("avg_distance", "Double")],
        [["JFK", "John F Kennedy Intl", 1266.249], [None, None, 12.5]],
    )
    assert "| JFK (John F Kennedy Intl) | 1,266.2 |" in text
    assert "| (missing) | 12.50 |" in text


@pytest.mark.parametrize(
    ("member", "value", "unit", "text"),
    [
        ("flights.count", 336776, False, "336,776"),
        ("flights.avg_arr_delay", 6.8951, True, "6.90 minutes"),
        ("flights.avg_distance", 1039.9126, True, "1,039.9 miles"),
        ("flights.total_air_time", 660325.0, True, "660,325 minutes"),
        ("weather.avg_precip", 0.0045, True, "0.0045 inches"),
        ("weather.avg_humid", 62.53, True, "62.53%"),
        ("planes.min_year", 1956, True, "1956"),
        ("planes.avg_year", 2000.48, False, "2000.5"),
        ("flights.avg_arr_delay", None, True, "n/a"),
        ("dest", "ATL", False, "ATL"),
    ],
)
def test_format_value_uses_separators_decimals_and_units(
    member: str, value: Any, unit: bool, text: str
) -> None:
    assert format_value(member, value, unit=unit) == text


# -- Vega-Lite -------------------------------------------------------------------------------


def test_vega_spec_of_a_breakdown_is_a_sorted_bar_chart_without_data() -> None:
    columns = [("carrier_name", "String"), ("avg_arr_delay", "Double")]
    spec = vega_spec(plan("Average arrival delay by carrier"), columns=columns)
    assert spec["$schema"] == VEGA_LITE_SCHEMA
    assert spec["data"] == {"name": DATA_NAME}
    assert "values" not in spec["data"]
    assert spec["mark"]["type"] == "bar"
    assert spec["encoding"]["x"] == {
        "field": "carrier_name", "type": "nominal", "title": "Carrier", "sort": "-y",
    }  # fmt: skip
    assert spec["encoding"]["y"]["field"] == "avg_arr_delay"
    assert spec["encoding"]["y"]["type"] == "quantitative"
    assert [t["field"] for t in spec["encoding"]["tooltip"]] == ["carrier_name", "avg_arr_delay"]


def test_vega_spec_over_months_is_an_ordinal_line() -> None:
    spec = vega_spec(
        plan("Monthly flight counts"), columns=[("month", "Int64"), ("count", "Int64")]
    )
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["x"]["type"] == "ordinal"
    assert spec["encoding"]["y"]["field"] == "count"


def test_vega_spec_of_a_single_number_is_a_text_mark() -> None:
    spec = vega_spec(plan("How many flights were there?"), columns=[("count", "Int64")])
    assert spec["mark"]["type"] == "text"
    assert spec["encoding"] == {
        "text": {"field": "count", "type": "quantitative", "format": ",.2~f"}
    }


def test_vega_spec_fields_are_the_result_column_names() -> None:
    columns = [("dest", "String"), ("dest_name", "String"), ("avg_arr_delay", "Double"),
               ("count", "Int64")]  # fmt: skip
    spec = vega_spec(
        plan("Which destination had the lowest average arrival delay?"), columns=columns
    )
    fields = {spec["encoding"]["x"]["field"], spec["encoding"]["y"]["field"]}
    fields |= {t["field"] for t in spec["encoding"]["tooltip"]}
    assert fields == {name for name, _ in columns}


def test_vega_spec_with_two_breakdowns_colours_the_second() -> None:
    columns = [("origin", "String"), ("origin_name", "String"), ("month", "Int64"),
               ("count", "Int64")]  # fmt: skip
    spec = vega_spec(plan("Number of flights by origin and month"), columns=columns)
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["x"]["field"] == "month"
    assert spec["encoding"]["color"] == {"field": "origin", "type": "nominal", "title": "Origin"}


def test_two_breakdowns_share_one_table() -> None:
    text = answer(
        "Number of flights by origin and month",
        [("origin", "String"), ("origin_name", "String"), ("month", "Int64"), ("count", "Int64")],
        [["EWR", "Newark Liberty Intl", 1, 9893], ["JFK", "John F Kennedy Intl", 1, 9161]],
    )
    assert "| Origin | Month | Number of flights |" in text
    assert "| EWR (Newark Liberty Intl) | January | 9,893 |" in text


# -- refusals --------------------------------------------------------------------------------


def test_cannot_answer_gives_the_reason_and_questions_that_work() -> None:
    refused = plan_question("What was the total revenue by carrier?", vocabulary=SMALL)
    assert isinstance(refused, CannotAnswer)
    text = compose_cannot_answer(refused)
    assert text.startswith("I can't answer that from the data: The data model has no prices")
    assert "\n- How many flights were there in March?" in text


# -- on the real data ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How many flights were there in March?", "There were 28,834 flights in March."),
        ("How many distinct destinations does JetBlue fly to?",
         "There were 42 distinct destinations for JetBlue Airways (B6)."),
        ("How many planes were built by Boeing?", "There are 1,630 planes made by BOEING."),
        ("Average wind speed at LGA",
         "The average wind speed at LGA (La Guardia) was 10.62 mph."),
        ("Which destination had the lowest average arrival delay?",
         "**LEX (Blue Grass)** had the lowest average arrival delay: -22 minutes "
         "(from only 1 flight)."),
    ],
)  # fmt: skip
def test_answers_on_the_real_data_quote_the_real_numbers(
    question: str, expected: str, model: SemanticModel, warehouse: Warehouse
) -> None:
    planned = plan_question(question, vocabulary=load_vocabulary(warehouse.query_raw))
    assert isinstance(planned, Plan)
    compiled = compile_semantic_sql(planned.semantic_sql, model=model, user=UserContext())
    result = warehouse.run(compiled)
    text = compose_answer(
        planned, columns=list(result.columns), rows=result.rows, total_rows=result.total_rows
    )
    assert text == expected
