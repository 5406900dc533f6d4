"""Issue 24, point 8: row-level security without oracles, for both readers.

A JFK user asking about a destination served only from hidden origins (EWR, LGA) hears the
same answer as about one never served (an airport of the airports table no flight reaches, or
a made-up code), modulo the name, in the stream as well as in the answer; weather asked at a
hidden origin says that access is limited instead of a figure. The destinations are found by
hand-written DuckDB SQL on the warehouse; no row of a hidden origin is ever returned.
"""

from __future__ import annotations

import json
import re
from typing import Literal

import pytest

from chat_api.agent import Toolbox
from chat_api.reader.access import visible_values
from chat_api.reader.index import build_index
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse
from tests.unit.chat_api.analyst_support import Asked, ask, one

JFK = UserContext(attributes={"origin": "JFK"})
MADE_UP = "QXZ"
HIDDEN_ONLY = ("TUL", "Tulsa")
"""Tulsa Intl: flown to only from EWR."""
NEVER_SERVED = ("ITH", "Ithaca")
"""Ithaca Tompkins Rgnl: in the airports table, flown to by no flight."""
COUNT, DELAY, LISTED = (
    "How many flights went to {x}?",
    "What was the average arrival delay of flights to {x}?",
    "list the flights to {x}",
)
Reader = Literal["legacy", "rules"]


@pytest.fixture(scope="module", params=["legacy", "rules"])
def toolbox(request: pytest.FixtureRequest, model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    reader: Reader = request.param
    return Toolbox.build(model, warehouse, reader=reader)


def _hidden_only(toolbox: Toolbox, *, limit: int = 3) -> list[str]:
    """The busiest destinations no JFK flight reaches (hand SQL)."""
    found = toolbox.warehouse.query_raw(
        "SELECT dest FROM flights GROUP BY dest HAVING bool_and(origin <> 'JFK') "
        f"ORDER BY count(*) DESC LIMIT {limit}"
    )
    return [str(code) for (code,) in found]


def _served_from(toolbox: Toolbox, code: str) -> set[str]:
    found = toolbox.warehouse.query_raw(
        f"SELECT DISTINCT origin FROM flights WHERE dest = '{code}'"
    )
    return {str(origin) for (origin,) in found}


def _in_airports(toolbox: Toolbox, code: str) -> bool:
    return bool(one(toolbox, f"SELECT count(*) FROM airports WHERE faa = '{code}'"))


def _said(asked: Asked, name: str) -> str:
    """Everything the user is shown, with ``name`` written as ``<X>``."""
    shown = json.dumps([asked.answer, asked.sql, asked.results])
    return re.sub(rf"\b{re.escape(name)}\b", "<X>", shown, flags=re.IGNORECASE)


def test_the_pairs_are_hidden_only_and_never_served(toolbox: Toolbox) -> None:
    assert _served_from(toolbox, HIDDEN_ONLY[0]) == {"EWR"}
    assert _served_from(toolbox, NEVER_SERVED[0]) == set()
    assert _in_airports(toolbox, NEVER_SERVED[0]) and not _in_airports(toolbox, MADE_UP)
    assert all("JFK" not in _served_from(toolbox, code) for code in _hidden_only(toolbox))


@pytest.mark.parametrize("template", [COUNT, DELAY, LISTED])
def test_a_destination_served_only_from_hidden_origins_reads_like_one_never_served(
    toolbox: Toolbox, template: str
) -> None:
    never = [NEVER_SERVED[0], MADE_UP]
    for hidden in [HIDDEN_ONLY[0], *_hidden_only(toolbox)]:
        asked = {x: ask(toolbox, template.format(x=x), user=JFK) for x in [hidden, *never]}
        said = {x: _said(a, x) for x, a in asked.items()}
        assert said[hidden] == said[NEVER_SERVED[0]] == said[MADE_UP], hidden
        assert all(not a.results and a.turn.sql_queries == 0 for a in asked.values())
        hidden_rows = one(toolbox, f"SELECT count(*) FROM flights WHERE dest = '{hidden}'")
        assert f"{hidden_rows:,}" not in asked[hidden].answer
        assert "access is limited" in asked[hidden].answer


@pytest.mark.parametrize("template", [COUNT, DELAY, LISTED])
def test_an_airport_name_served_only_from_hidden_origins_reads_like_one_never_served(
    toolbox: Toolbox, template: str
) -> None:
    asked = {
        w: ask(toolbox, template.format(x=w), user=JFK) for w in (HIDDEN_ONLY[1], NEVER_SERVED[1])
    }
    assert _said(asked[HIDDEN_ONLY[1]], HIDDEN_ONLY[1]) == _said(
        asked[NEVER_SERVED[1]], NEVER_SERVED[1]
    )
    assert "access is limited" in asked[HIDDEN_ONLY[1]].answer


def test_a_destination_jfk_serves_is_still_answered(toolbox: Toolbox) -> None:
    asked = ask(toolbox, COUNT.format(x="LAX"), user=JFK)
    expected = one(toolbox, "SELECT count(*) FROM flights WHERE dest = 'LAX' AND origin = 'JFK'")
    assert asked.rows == [[expected]]
    assert "access is limited" in asked.answer


def test_an_unrestricted_user_still_reads_every_destination(toolbox: Toolbox) -> None:
    hidden = HIDDEN_ONLY[0]
    asked = ask(toolbox, COUNT.format(x=hidden))
    assert asked.rows == [[one(toolbox, f"SELECT count(*) FROM flights WHERE dest = '{hidden}'")]]
    assert "access" not in asked.answer


@pytest.mark.parametrize(
    "question",
    [
        "What was the average temperature at LGA?",
        "How many weather observations at EWR?",
        "average wind speed at LGA in January",
    ],
)
def test_weather_at_a_hidden_origin_says_access_is_limited(toolbox: Toolbox, question: str) -> None:
    asked = ask(toolbox, question, user=JFK)
    assert "access is limited" in asked.answer and "not visible to you" in asked.answer
    assert not asked.results and asked.turn.sql_queries == 0


def test_weather_of_the_visible_origin_says_what_it_covers(toolbox: Toolbox) -> None:
    asked = ask(toolbox, "What was the average temperature?", user=JFK)
    expected = one(toolbox, "SELECT avg(temp) FROM weather WHERE origin = 'JFK'")
    assert asked.rows and asked.rows[0][-1] == pytest.approx(expected)
    assert "access is limited" in asked.answer


def test_a_restricted_index_holds_visible_values_and_every_pinned_one(
    model: SemanticModel, warehouse: Warehouse
) -> None:
    rows = warehouse.query_raw
    index = build_index(model, rows, values=visible_values(model, JFK, rows))
    hidden = HIDDEN_ONLY[0]
    dests = {h.value for hits in index.values.values() for h in hits if h.member == "flights.dest"}
    assert hidden not in dests and "LAX" in dests
    origins = {h.value: h.rows for hits in index.values.values() for h in hits
               if h.member == "flights.origin"}  # fmt: skip
    jfk = one(Toolbox(model, None, warehouse), "SELECT count(*) FROM flights WHERE origin='JFK'")
    assert origins == {"JFK": jfk, "LGA": 0, "EWR": 0}
