from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chat_api.search import search_members, tokens
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.policies import UserContext


def names(result: dict[str, Any]) -> dict[str, list[str]]:
    return {cube["name"]: [m["name"] for m in cube["members"]] for cube in result["cubes"]}


def test_result_has_the_hosted_metadata_shape(model: SemanticModel, anyone: UserContext) -> None:
    result = search_members(model, "departure delay", anyone)
    assert set(result) == {"cubes", "searchQuery"}
    assert result["searchQuery"] == "departure delay"
    flights = result["cubes"][0]
    assert set(flights) == {"name", "type", "title", "description", "members"}
    assert (flights["name"], flights["type"], flights["title"]) == ("flights", "view", "Flights")
    by_name = {m["name"]: m for m in flights["members"]}
    assert by_name["flights.avg_dep_delay"] == {
        "name": "flights.avg_dep_delay",
        "title": "Average departure delay (minutes)",
        "description": "Average departure delay in minutes, over flights that departed.",
        "type": "number",
        "aggType": "avg",
    }
    assert "aggType" not in by_name["flights.dep_delay"]
    assert by_name["flights.dep_delay"]["type"] == "number"


def test_empty_query_lists_every_visible_member(model: SemanticModel, anyone: UserContext) -> None:
    result = names(search_members(model, "", anyone))
    assert list(result) == ["airlines", "airports", "flights", "planes", "weather"]
    assert len(result["flights"]) == 60
    assert sum(len(members) for members in result.values()) == 118


@pytest.mark.parametrize(
    ("query", "view", "first_member"),
    [
        ("average departure delay", "flights", "flights.avg_dep_delay"),
        ("What was the average departure delay by airline?", "flights", "flights.avg_dep_delay"),
        ("arrival delays", "flights", "flights.avg_arr_delay"),
        ("how many flights", "flights", "flights.count"),
        ("temperature", "weather", "weather.avg_temp"),
        ("wind gust", "weather", "weather.avg_wind_gust"),
        ("seats", "planes", "planes.seats"),
        ("airline name", "airlines", "airlines.name"),
        ("number of destinations", "flights", "flights.distinct_destinations"),
    ],
)
def test_the_best_matching_member_comes_first(
    model: SemanticModel, anyone: UserContext, query: str, view: str, first_member: str
) -> None:
    result = search_members(model, query, anyone)
    # The flights view also holds the weather at departure and the plane's seats, so it may
    # rank first for a weather or plane word; within the asked view the best member leads.
    (found,) = [cube for cube in result["cubes"] if cube["name"] == view]
    assert found["members"][0]["name"] == first_member
    assert result["cubes"][0]["name"] in (view, "flights")


def test_views_without_a_hit_are_omitted(model: SemanticModel, anyone: UserContext) -> None:
    assert names(search_members(model, "pressure", anyone)) == {"weather": ["weather.avg_pressure"]}
    assert search_members(model, "xyzzy frobnicate", anyone)["cubes"] == []


def test_tokens_fold_case_plurals_synonyms_and_stop_words() -> None:
    assert tokens("What is the Average of DELAYS per airline?") == {"avg", "delay", "carrier"}
    assert tokens("avg_dep_delay") == {"avg", "dep", "delay"}


HIDDEN = """
    cubes:
      - name: orders
        sql_table: orders
        title: Orders
        description: Customer orders.
        dimensions:
          - {name: status, sql: status, type: string, title: Order status}
          - {name: margin, sql: margin, type: number, title: Order margin}
        measures:
          - {name: count, type: count, title: Number of orders}
        access_policy:
          - group: "*"
            member_level: {excludes: [margin]}
          - group: finance
    views:
      - name: orders
        cubes: [{join_path: orders, includes: "*"}]
      - name: secrets
        cubes: [{join_path: orders, includes: [margin]}]
        access_policy: [{group: finance}]
    """


def test_only_members_and_views_the_user_may_see_appear(write_model: Callable[..., Path]) -> None:
    model = load_model(write_model(orders=HIDDEN))
    everyone = names(search_members(model, "order margin", UserContext()))
    assert everyone == {"orders": ["orders.status", "orders.count"]}
    finance = names(search_members(model, "order margin", UserContext(groups=("finance",))))
    assert finance["orders"][0] == "orders.margin"
    assert finance["secrets"] == ["secrets.margin"]


def test_a_matching_view_name_without_member_hits_lists_all_its_members(
    write_model: Callable[..., Path],
) -> None:
    model = load_model(write_model(orders=HIDDEN))
    finance = UserContext(groups=("finance",))
    assert names(search_members(model, "secrets", finance)) == {"secrets": ["secrets.margin"]}
    assert search_members(model, "secrets", UserContext())["cubes"] == []
