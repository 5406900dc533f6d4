"""Issue 11, point 8: row-level security said out loud, never crossed.

A JFK user asking about LaGuardia hears that access is limited instead of "0 flights"; an
attribute value matching no row (``jfk`` in lower case) is reported; rows shown are always the
user's own (hand-written DuckDB SQL with the policy's condition written by hand).
"""

from __future__ import annotations

import dataclasses

from chat_api.agent import Toolbox
from chat_api.planner.access import access_check
from chat_api.planner.specs import Filter, QuerySpec
from chat_api.sql.policies import UserContext
from tests.unit.chat_api.analyst_support import ask, hand, one

JFK = UserContext(attributes={"origin": "JFK"})


def test_a_hidden_origin_is_said_not_counted(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How many flights left LaGuardia?", user=JFK)
    assert "access is limited to flights from JFK" in asked.answer
    assert "LGA are not visible to you" in asked.answer
    assert not asked.results and asked.turn.sql_queries == 0
    hidden = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin = 'LGA'")
    assert f"{hidden:,}" not in asked.answer and " 0 flights" not in asked.answer


def test_a_comparison_across_the_policy_answers_the_visible_side(
    analyst_toolbox: Toolbox,
) -> None:
    asked = ask(analyst_toolbox, "Compare JFK and LGA flight counts", user=JFK)
    assert "not visible to you" in asked.answer
    visible = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin = 'JFK'")
    assert asked.rows == [["JFK", visible]]


def test_an_attribute_matching_no_row_is_reported(analyst_toolbox: Toolbox) -> None:
    user = UserContext(attributes={"origin": "jfk"})
    asked = ask(analyst_toolbox, "How many flights are there?", user=user)
    assert "origin = 'jfk'" in asked.answer and "matches no flights" in asked.answer
    assert not asked.results


def test_a_restricted_users_rows_are_their_own(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "top 3 destinations", user=JFK)
    expected = hand(
        analyst_toolbox,
        "SELECT dest, count(*) FROM flights WHERE origin = 'JFK' "
        "GROUP BY 1 ORDER BY 2 DESC LIMIT 3",
    )
    assert [[r["dest"], r["count"]] for r in asked.records()] == [list(r) for r in expected]
    assert "access is limited to flights from JFK" in asked.answer


def test_flights_by_origin_show_only_the_visible_origin(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "flight counts by origin airport", user=JFK)
    assert {r["origin"] for r in asked.records()} == {"JFK"}


def test_an_unrestricted_user_hears_nothing_about_access(analyst_toolbox: Toolbox) -> None:
    asked = ask(analyst_toolbox, "How many flights left LaGuardia?")
    assert "access" not in asked.answer
    assert asked.rows == [[one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin='LGA'")]]


def test_access_check_narrows_a_share_and_keeps_other_views() -> None:
    spec = QuerySpec(
        "flights", ("flights.count",), filters=(Filter("flights.origin", "in", ("JFK", "LGA")),),
        share_of=(Filter("flights.carrier", "equals", ("B6",)),),
    )  # fmt: skip
    origins = frozenset({"EWR", "JFK", "LGA"})
    check = access_check(spec, visible=frozenset({"JFK"}), origins=origins, attributes={})
    assert check.spec is not None
    assert check.spec.filters == (Filter("flights.origin", "equals", ("JFK",)),)
    planes = QuerySpec("planes", ("planes.count",))  # no origin: nothing to check
    assert access_check(planes, visible=frozenset(), origins=origins, attributes={}).spec == planes
    weather = QuerySpec(
        "weather", ("weather.avg_temp",), filters=(Filter("weather.origin", "equals", ("LGA",)),)
    )
    hidden = access_check(weather, visible=frozenset({"JFK"}), origins=origins, attributes={})
    assert hidden.spec is None and "not visible to you" in hidden.note


def test_the_safety_rules_hold_whichever_reader_read_the_question(
    analyst_toolbox: Toolbox,
) -> None:
    """Any QuestionReader gets the same access check, policy and SQL guard as the rule reader.

    Here a fake reader that always asks for LGA's flights by origin.
    """

    def lga_reader(
        question: str, *, vocabulary: object, previous: object
    ) -> tuple[QuerySpec, list[str]]:
        spec = QuerySpec(
            "flights", ("flights.count",), ("flights.origin",),
            (Filter("flights.origin", "equals", ("LGA",)),),
        )  # fmt: skip
        return spec, ["fake reader"]

    toolbox = dataclasses.replace(analyst_toolbox, reader=lga_reader)
    asked = ask(toolbox, "anything at all", user=JFK)
    assert "not visible to you" in asked.answer and not asked.results
    everyone = ask(toolbox, "anything at all")
    lga = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin = 'LGA'")
    assert everyone.rows == [["LGA", lga]]
