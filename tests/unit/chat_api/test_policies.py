from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from chat_api.errors import AccessDeniedError, ModelError
from chat_api.semantic.conditions import Scope, parse_condition, render_value
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.policies import UserContext, filter_expression, resolve_access

SCOPE = Scope(
    user_attributes={"origin": "JFK", "team": "ops", "level": "5"},
    security={"tenant": {"id": "t1"}, "carriers": ["UA", "DL"], "admin": True},
)


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("{ userAttributes.origin }", True),
        ("{ userAttributes.missing }", False),
        ("{ not userAttributes.missing }", True),
        ("{ !userAttributes.origin }", False),
        ("{ userAttributes.origin == 'JFK' }", True),
        ('{ userAttributes.origin != "JFK" }', False),
        ("{ userAttributes.level == 5 }", True),
        ("{ securityContext.tenant.id === 't1' }", True),
        ("{ securityContext.tenant.missing.deeper }", False),
        ("{ securityContext.admin and userAttributes.team == 'ops' }", True),
        ("{ userAttributes.missing or securityContext.admin }", True),
        ("{ userAttributes.missing || (userAttributes.team == 'x' && true) }", False),
        ("{ not (userAttributes.origin == 'LGA') }", True),
        ("{ userAttributes.missing == null }", True),
    ],
)
def test_conditions_evaluate_without_eval(condition: str, expected: bool) -> None:
    assert parse_condition(condition).evaluate(SCOPE) is expected


@pytest.mark.parametrize(
    "condition",
    [
        "userAttributes.origin",
        "{ __import__('os').system('true') }",
        "{ userAttributes.origin() }",
        "{ userAttributes['origin'] }",
        "{ os.environ }",
        "{ userAttributes.origin + 1 }",
        "{ (userAttributes.origin }",
        "{ }",
    ],
)
def test_conditions_outside_the_grammar_are_model_errors(condition: str) -> None:
    with pytest.raises(ModelError):
        parse_condition(condition)


def test_value_templates_keep_types_and_report_unset_values() -> None:
    assert render_value("{ userAttributes.origin }", SCOPE) == "JFK"
    assert render_value("{ securityContext.carriers }", SCOPE) == ["UA", "DL"]
    assert render_value("tenant-{ securityContext.tenant.id }", SCOPE) == "tenant-t1"
    assert render_value("{ userAttributes.missing }", SCOPE) is None
    assert render_value("constant", SCOPE) == "constant"


def test_origin_user_gets_an_equality_filter_on_the_flights_cube(
    model: SemanticModel, jfk_user: UserContext
) -> None:
    access = resolve_access(model, "flights", jfk_user)
    assert access.allowed
    assert access.row_filter is not None
    assert access.row_filter.sql(dialect="duckdb") == "\"flights\".origin = 'JFK'"
    assert access.filter_cubes == {"flights"}
    assert access.visible == {m.name for m in model.view("flights").members}


def test_users_without_the_origin_attribute_see_all_rows(
    model: SemanticModel, anyone: UserContext
) -> None:
    for view in model.views:
        access = resolve_access(model, view, anyone)
        assert access.allowed and access.row_filter is None


def test_reference_views_are_not_filtered_for_an_origin_user_but_weather_is(
    model: SemanticModel, jfk_user: UserContext
) -> None:
    """Issue 12: weather rows are scoped like flights; reference data is shared.

    Weather rows belong to an origin airport, so they are scoped like flights; planes, airlines and
    airports are shared reference data.
    """
    for view in ("planes", "airlines", "airports"):
        assert resolve_access(model, view, jfk_user).row_filter is None
    weather = resolve_access(model, "weather", jfk_user).row_filter
    assert weather is not None and weather.sql() == "\"weather\".origin = 'JFK'"


def test_attribute_values_become_literals_not_sql(model: SemanticModel) -> None:
    hostile = UserContext(attributes={"origin": "JFK' OR '1'='1"})
    access = resolve_access(model, "flights", hostile)
    assert access.row_filter is not None
    assert isinstance(access.row_filter, exp.EQ)
    assert access.row_filter.expression.this == "JFK' OR '1'='1"
    assert access.row_filter.sql(dialect="duckdb") == "\"flights\".origin = 'JFK'' OR ''1''=''1'"


COLUMN = exp.column("x", table="t", quoted=True)


@pytest.mark.parametrize(
    ("operator", "kind", "values", "sql"),
    [
        ("equals", "string", ["a"], '"t"."x" = \'a\''),
        ("equals", "string", ["a", "b"], "\"t\".\"x\" IN ('a', 'b')"),
        ("equals", "string", [], "FALSE"),
        ("in", "number", ["1", 2], '"t"."x" IN (1, 2)'),
        ("notEquals", "string", ["a"], 'NOT "t"."x" = \'a\' OR "t"."x" IS NULL'),
        ("notIn", "string", ["a", "b"], 'NOT "t"."x" IN (\'a\', \'b\') OR "t"."x" IS NULL'),
        ("contains", "string", ["5%_"], "\"t\".\"x\" ILIKE '%5\\%\\_%' ESCAPE '\\'"),
        ("startsWith", "string", ["ab"], "\"t\".\"x\" ILIKE 'ab%' ESCAPE '\\'"),
        ("endsWith", "string", ["ab"], "\"t\".\"x\" ILIKE '%ab' ESCAPE '\\'"),
        (
            "notContains",
            "string",
            ["a", "b"],
            "NOT (\"t\".\"x\" ILIKE '%a%' ESCAPE '\\' OR \"t\".\"x\" ILIKE '%b%' ESCAPE '\\') "
            'OR "t"."x" IS NULL',
        ),
        ("gt", "number", ["1.5"], '"t"."x" > 1.5'),
        ("gte", "number", [3], '"t"."x" >= 3'),
        ("lt", "number", ["-2"], '"t"."x" < -2'),
        ("lte", "number", ["0"], '"t"."x" <= 0'),
        ("set", "string", [], 'NOT "t"."x" IS NULL'),
        ("notSet", "string", [], '"t"."x" IS NULL'),
        ("equals", "boolean", ["true"], '"t"."x" = TRUE'),
        (
            "inDateRange",
            "time",
            ["2013-01-01", "2013-01-31"],
            '"t"."x" >= CAST(\'2013-01-01\' AS TIMESTAMP) AND "t"."x" < '
            "CAST('2013-01-31' AS TIMESTAMP) + INTERVAL '1' DAY",
        ),
        (
            "notInDateRange",
            "time",
            ["2013-01-01", "2013-01-31 12:00:00"],
            'NOT ("t"."x" >= CAST(\'2013-01-01\' AS TIMESTAMP) AND "t"."x" <= '
            "CAST('2013-01-31 12:00:00' AS TIMESTAMP))",
        ),
        ("beforeDate", "time", ["2013-06-01"], '"t"."x" < CAST(\'2013-06-01\' AS TIMESTAMP)'),
        ("afterDate", "time", ["2013-06-01"], '"t"."x" > CAST(\'2013-06-01\' AS TIMESTAMP)'),
    ],
)
def test_every_filter_operator_renders_to_literal_sql(
    operator: str, kind: str, values: list[Any], sql: str
) -> None:
    rendered = filter_expression(operator, COLUMN.copy(), kind, values)
    assert rendered.sql(dialect="duckdb") == sql


@pytest.mark.parametrize(
    ("operator", "kind", "values", "message"),
    [
        ("gt", "number", ["1", "2"], "takes one value"),
        ("gt", "number", ["ten"], "'ten' is not a number"),
        ("inDateRange", "time", ["2013-01-01"], "takes two values"),
        ("afterDate", "time", ["yesterday"], "Invalid isoformat"),
        ("between", "number", ["1"], "unknown filter operator"),
    ],
)
def test_filter_values_that_do_not_fit_raise_value_error(
    operator: str, kind: str, values: list[Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        filter_expression(operator, COLUMN.copy(), kind, values)


POLICY_CUBE = """
    cubes:
      - name: orders
        sql_table: orders
        dimensions:
          - {name: id, sql: id, type: number, primary_key: true}
          - {name: region, sql: region, type: string}
          - {name: amount, sql: amount, type: number}
          - {name: secret, sql: secret, type: string}
        measures:
          - {name: count, type: count}
        access_policy:
          - group: "*"
            member_level: {includes: "*", excludes: [secret]}
            row_level:
              filters:
                - {member: region, operator: equals, values: ["{ userAttributes.region }"]}
          - group: finance
            row_level:
              filters:
                - {member: amount, operator: gt, values: ["100"]}
          - group: admin
            conditions: [{if: "{ securityContext.admin }"}]
    views:
      - name: sales
        cubes: [{join_path: orders, includes: "*"}]
        access_policy:
          - groups: [sales, finance, admin]
          - group: sales
            member_level: {includes: [region, count, secret]}
    """


@pytest.fixture
def policy_model(write_model: Callable[..., Path]) -> SemanticModel:
    return load_model(write_model(orders=POLICY_CUBE))


def test_no_applying_policy_denies_the_view(policy_model: SemanticModel) -> None:
    access = resolve_access(policy_model, "sales", UserContext(groups=("marketing",)))
    assert not access.allowed
    assert access.visible == frozenset()
    assert access.denied_reason == "no access policy of view sales applies"
    with pytest.raises(AccessDeniedError) as caught:
        access.require()
    assert (caught.value.code, caught.value.view) == ("access_denied", "sales")


def test_an_unset_attribute_in_an_applying_filter_denies_rather_than_matching_nothing(
    policy_model: SemanticModel,
) -> None:
    access = resolve_access(policy_model, "sales", UserContext(groups=("sales",)))
    assert not access.allowed
    assert access.denied_reason is not None
    assert "userAttributes.region" in access.denied_reason


def test_member_levels_intersect_across_view_and_cube(policy_model: SemanticModel) -> None:
    user = UserContext(groups=("sales",), attributes={"region": "EU"})
    access = resolve_access(policy_model, "sales", user)
    assert access.visible == {"id", "region", "amount", "count"}  # view: all; cube: no secret
    assert access.row_filter is not None
    assert access.row_filter.sql() == "\"orders\".region = 'EU'"


def test_row_filters_of_applying_policies_combine_with_or(policy_model: SemanticModel) -> None:
    user = UserContext(groups=("finance",), attributes={"region": "EU"})
    access = resolve_access(policy_model, "sales", user)
    assert access.row_filter is not None
    assert access.row_filter.sql() == '("orders".region = \'EU\') OR ("orders".amount > 100)'


def test_a_policy_without_row_level_allows_all_rows(policy_model: SemanticModel) -> None:
    user = UserContext(
        groups=("admin",), attributes={"region": "EU"}, security_context={"admin": True}
    )
    access = resolve_access(policy_model, "sales", user)
    assert access.allowed and access.row_filter is None
    assert "secret" in access.visible


def test_conditions_gate_policies(policy_model: SemanticModel) -> None:
    user = UserContext(
        groups=("admin",), attributes={"region": "EU"}, security_context={"admin": False}
    )
    access = resolve_access(policy_model, "sales", user)
    assert access.row_filter is not None
    assert access.row_filter.sql() == "\"orders\".region = 'EU'"
    assert "secret" not in access.visible
