"""Issue 11, point 1: reading that tolerates real phrasing, and entity linking.

Each question is answered by the agent in-process; the expected number is hand-written DuckDB
SQL on the warehouse tables.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.planner.vocabulary import load_vocabulary, scan
from chat_api.sql.warehouse import Warehouse
from tests.unit.chat_api.analyst_support import ask, one


@pytest.mark.parametrize(
    ("question", "where"),
    [
        ("How many flights went to Houston Intercontinental?", "dest = 'IAH'"),
        ("flights to Seattle-Tacoma International - how many?", "dest = 'SEA'"),
        ("How many flights landed at Midway?", "dest = 'MDW'"),
        ("how many flights went to O'Hare from Kennedy?", "dest = 'ORD' AND origin = 'JFK'"),
        ("How many flights left LaGuardia for Atlanta?", "origin = 'LGA' AND dest = 'ATL'"),
        ("how many US Airways flights to Charlotte in May", "carrier = 'US' AND dest = 'CLT' "
         "AND month = 5"),
        ("number of Delta's flights from Newark", "carrier = 'DL' AND origin = 'EWR'"),
        ("How many flights departed at least three hours behind schedule?", "dep_delay >= 180"),
        ("How many flights are there across the whole dataset?", "true"),
        ("how many flights left Laguadia in June", "origin = 'LGA' AND month = 6"),
        ("how many Envoy flights in Sept", "carrier = 'MQ' AND month = 9"),
    ],
)  # fmt: skip
def test_counts_read_from_analyst_phrasing(
    analyst_toolbox: Toolbox, question: str, where: str
) -> None:
    asked = ask(analyst_toolbox, question)
    expected = one(analyst_toolbox, f"SELECT count(*) FROM flights WHERE {where}")
    assert asked.rows == [[expected]], asked.answer
    assert f"{expected:,}" in asked.answer


def test_possessive_carrier_and_metric_words(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "What's the average flight time on Hawaiian's flights?")
    expected = one(analyst_toolbox, "SELECT avg(air_time) FROM flights WHERE carrier = 'HA'")
    assert asked.rows[0][0] == pytest.approx(expected)


def test_how_far_with_the_aggregation_after_the_metric(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How far is the average Alaska Airlines flight?")
    expected = one(analyst_toolbox, "SELECT avg(distance) FROM flights WHERE carrier = 'AS'")
    assert asked.rows[0][0] == pytest.approx(expected)


def test_top_ten_as_a_word_keeps_ten_rows(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "top ten destinations by number of flights")
    expected = [
        list(r)
        for r in analyst_toolbox.warehouse.query_raw(
            "SELECT dest, count(*) FROM flights GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
        )
    ]
    assert [[r["dest"], r["count"]] for r in asked.records()] == expected


def test_houston_intercontinental_is_iah_alone(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How many flights went to Houston Intercontinental?")
    assert "'IAH'" in asked.sql[0] and "HOU" not in asked.sql[0]


def test_bare_houston_means_both_of_its_airports(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How many flights went to Houston?")
    expected = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE dest IN ('IAH', 'HOU')")
    assert asked.rows == [[expected]]


def test_refusal_names_the_unknown_content_word(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How many flights were grumpy in March?")
    assert asked.turn.spec is None and not asked.results
    assert "'grumpy'" in asked.answer


@pytest.mark.parametrize(
    ("text", "kind", "values"),
    [
        ("Mondays", "weekday", ("Monday",)),
        ("Laguadia", "airport", ("LGA",)),
        ("Christmas", "holiday", (12, 25)),
        ("Seattle Tacoma", "airport", ("SEA",)),
        ("AirTran", "carrier", ("FL",)),
    ],
)  # fmt: skip
def test_entity_linking_in_the_scan(
    warehouse: Warehouse, text: str, kind: str, values: tuple[object, ...]
) -> None:
    vocabulary = load_vocabulary(warehouse.query_raw)
    (mention,) = scan(text, vocabulary)
    assert getattr(mention.meaning, "kind", None) == kind
    assert getattr(mention.meaning, "values", None) == values


def test_number_words_beyond_twenty_are_numbers(warehouse: Warehouse) -> None:
    vocabulary = load_vocabulary(warehouse.query_raw)
    (mention,) = scan("forty", vocabulary)
    assert getattr(mention.meaning, "value", None) == 40.0


def test_close_spellings_link_values_never_lexicon_words(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "planet count")
    assert asked.turn.spec is None and "'planet'" in asked.answer
    typo = ask(analyst_toolbox, "flights to Bostn")
    assert typo.rows == [[one(analyst_toolbox, "SELECT count(*) FROM flights WHERE dest = 'BOS'")]]
    assert "BOS" in typo.answer
