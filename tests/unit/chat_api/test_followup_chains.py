"""Issue 11, point 7: follow-ups keep every earlier filter unless the follow-up replaces it.

One thread per pattern ("their/those", "same thing for X", "what about X", "and for Y
instead"), at least six turns each; each turn's number is checked against hand-written DuckDB
SQL with the conditions accumulated by hand.
"""

from __future__ import annotations

import pytest

from chat_api.agent import Toolbox
from chat_api.planner.specs import PlanState
from tests.unit.chat_api.analyst_support import ask, one

Turn = tuple[str, str, str]
"""(question, SQL aggregate, SQL condition)."""

CHAINS: dict[str, list[Turn]] = {
    "their/those": [
        ("How many flights did JetBlue run out of JFK?", "count(*)",
         "carrier='B6' AND origin='JFK'"),
        ("what was their average departure delay?", "avg(dep_delay)",
         "carrier='B6' AND origin='JFK'"),
        ("and for those going to Boston?", "avg(dep_delay)",
         "carrier='B6' AND origin='JFK' AND dest='BOS'"),
        ("what was their maximum arrival delay?", "max(arr_delay)",
         "carrier='B6' AND origin='JFK' AND dest='BOS'"),
        ("and those in March?", "max(arr_delay)",
         "carrier='B6' AND origin='JFK' AND dest='BOS' AND month=3"),
        ("how many of those were there?", "count(*)",
         "carrier='B6' AND origin='JFK' AND dest='BOS' AND month=3"),
    ],
    "same thing for X": [
        ("average arrival delay for Delta to Atlanta", "avg(arr_delay)",
         "carrier='DL' AND dest='ATL'"),
        ("same thing for United", "avg(arr_delay)", "carrier='UA' AND dest='ATL'"),
        ("same thing for Denver", "avg(arr_delay)", "carrier='UA' AND dest='DEN'"),
        ("same thing in July", "avg(arr_delay)", "carrier='UA' AND dest='DEN' AND month=7"),
        ("same for Newark departures", "avg(arr_delay)",
         "carrier='UA' AND dest='DEN' AND month=7 AND origin='EWR'"),
        ("same thing for Southwest", "avg(arr_delay)",
         "carrier='WN' AND dest='DEN' AND month=7 AND origin='EWR'"),
    ],
    "what about X": [
        ("Average arrival delay from Newark in July", "avg(arr_delay)", "origin='EWR' AND month=7"),
        ("what about LaGuardia?", "avg(arr_delay)", "origin='LGA' AND month=7"),
        ("what about August?", "avg(arr_delay)", "origin='LGA' AND month=8"),
        ("what about American?", "avg(arr_delay)", "origin='LGA' AND month=8 AND carrier='AA'"),
        ("what about Miami?", "avg(arr_delay)",
         "origin='LGA' AND month=8 AND carrier='AA' AND dest='MIA'"),
        ("what about the departure delay?", "avg(dep_delay)",
         "origin='LGA' AND month=8 AND carrier='AA' AND dest='MIA'"),
    ],
    "and for Y instead": [
        ("How many American flights went to Miami?", "count(*)", "carrier='AA' AND dest='MIA'"),
        ("and for Fort Lauderdale instead?", "count(*)", "carrier='AA' AND dest='FLL'"),
        ("only in the first quarter", "count(*)", "carrier='AA' AND dest='FLL' AND month<=3"),
        ("and for JetBlue instead", "count(*)", "carrier='B6' AND dest='FLL' AND month<=3"),
        ("and for Q2 instead", "count(*)", "carrier='B6' AND dest='FLL' AND month BETWEEN 4 AND 6"),
        ("and for the average distance instead", "avg(distance)",
         "carrier='B6' AND dest='FLL' AND month BETWEEN 4 AND 6"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("pattern", list(CHAINS))
def test_follow_up_chain_keeps_earlier_filters(analyst_toolbox: Toolbox, pattern: str) -> None:
    previous: PlanState | None = None
    for question, aggregate, where in CHAINS[pattern]:
        asked = ask(analyst_toolbox, question, previous=previous)
        expected = one(analyst_toolbox, f"SELECT {aggregate} FROM flights WHERE {where}")
        assert asked.rows, f"{pattern}: {question!r} -> {asked.answer}"
        assert asked.rows[0][0] == pytest.approx(expected), f"{pattern}: {question!r}"
        previous = asked.state


def test_a_share_carries_into_follow_ups(analyst_toolbox: Toolbox) -> None:
    first = ask(analyst_toolbox, "What share of JFK's flights does JetBlue operate?")
    second = ask(analyst_toolbox, "and for Delta instead", previous=first.state)
    n = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin='JFK' AND carrier='DL'")
    total = one(analyst_toolbox, "SELECT count(*) FROM flights WHERE origin='JFK'")
    assert f"{100.0 * n / total:.2f}%" in second.answer


def test_a_count_after_a_share_counts_the_part(analyst_toolbox: Toolbox) -> None:
    first = ask(analyst_toolbox, "what share of Boston flights were on Delta?")
    second = ask(analyst_toolbox, "how many flights was that?", previous=first.state)
    expected = one(
        analyst_toolbox, "SELECT count(*) FROM flights WHERE dest='BOS' AND carrier='DL'"
    )
    assert second.rows == [[expected]]
