from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chat_api.errors import ModelError
from chat_api.semantic.model import SemanticModel, load_model

CONTRACT = {
    "flights": (
        "count total_distance avg_distance min_distance max_distance avg_arr_delay "
        "total_arr_delay min_arr_delay max_arr_delay avg_dep_delay total_dep_delay min_dep_delay "
        "max_dep_delay avg_air_time total_air_time min_air_time max_air_time "
        "distinct_destinations distinct_origins distinct_carriers distinct_planes "
        "cancelled_count departed_count cancellation_rate median_distance median_arr_delay "
        "median_dep_delay median_air_time",
        "flight_id year month day hour flight_date carrier carrier_name flight tailnum origin "
        "origin_name dest dest_name dep_delay arr_delay distance air_time plane_manufacturer "
        "plane_model plane_year weekday quarter route cancelled plane_seats dep_temp dep_humid "
        "dep_wind_speed dep_wind_gust dep_precip dep_visib",
    ),
    "weather": (
        "count avg_temp min_temp max_temp avg_humid avg_wind_speed min_wind_speed max_wind_speed "
        "avg_wind_gust max_wind_gust total_precip avg_precip avg_visib avg_pressure",
        "origin year month day hour observed_at temp humid wind_speed precip visib",
    ),
    "planes": (
        "count avg_seats min_seats max_seats total_seats avg_year min_year max_year "
        "distinct_manufacturers distinct_models",
        "tailnum manufacturer model year type engines engine seats",
    ),
    "airlines": ("count", "carrier name"),
    "airports": ("count avg_alt min_alt max_alt", "faa name lat lon alt tz dst tzone"),
}

SMALL_CUBE = """
    cubes:
      - name: orders
        sql_table: orders
        meta: {owner: sales}
        pre_aggregations: []
        joins:
          - name: customers
            relationship: many_to_one
            sql: "{CUBE}.customer_id = {customers}.id"
        dimensions:
          - name: id
            sql: id
            type: number
            primary_key: true
          - name: status
            sql: "{CUBE}.status"
            type: string
          - name: customer_city
            sql: "{customers.city}"
            type: string
        measures:
          - name: count
            type: count
          - name: completed
            type: count
            filters:
              - sql: "{status} = 'completed'"
          - name: completed_share
            type: number
            sql: "{completed} / NULLIF({count}, 0)"
    """
CUSTOMERS = """
    cubes:
      - name: customers
        sql: SELECT * FROM customers WHERE active
        dimensions:
          - name: id
            sql: id
            type: number
            primary_key: true
          - name: city
            sql: city
            type: string
    """


def test_views_expose_exactly_the_contract_members(model: SemanticModel) -> None:
    for view_name, (measures, dimensions) in CONTRACT.items():
        view = model.view(view_name)
        assert sorted(m.name for m in view.members if m.kind == "measure") == sorted(
            measures.split()
        )
        assert sorted(m.name for m in view.members if m.kind == "dimension") == sorted(
            dimensions.split()
        )


def test_flights_members_know_their_type_cube_and_join_path(model: SemanticModel) -> None:
    carrier_name = model.member("flights.carrier_name")
    assert (carrier_name.type, carrier_name.cube, carrier_name.cube_member) == (
        "string",
        "airlines",
        "name",
    )
    assert carrier_name.join_path == ("flights", "airlines")
    assert model.member("flights.flight_date").type == "time"
    assert model.member("flights.month").type == "number"
    assert model.member("flights.flight_id").primary_key
    assert model.member("flights.distinct_planes").agg_type == "countDistinct"
    assert model.member("flights.count").agg_type == "count"
    assert model.member("flights.avg_arr_delay").type == "number"
    assert model.member("flights.plane_year").join_path == ("flights", "planes")
    assert model.member("flights.dest_name").cube == "dest_airports"


def test_every_cube_view_and_member_has_a_title_and_description(model: SemanticModel) -> None:
    for cube in model.cubes.values():
        assert cube.title and cube.description, cube.name
        for member in cube.members:
            assert member.title and member.description, f"{cube.name}.{member.name}"
    for view in model.views.values():
        assert view.title and view.description, view.name


def test_flights_cube_carries_the_origin_access_policy(model: SemanticModel) -> None:
    policies = model.cubes["flights"].access_policy
    assert [p.group for p in policies] == ["*", "*"]
    assert policies[0].row_level is not None
    assert policies[0].row_level.filters[0].values == ("{ userAttributes.origin }",)
    assert policies[1].row_level is not None and policies[1].row_level.allow_all


def test_unknown_view_and_member_raise_key_error(model: SemanticModel) -> None:
    with pytest.raises(KeyError, match="unknown view"):
        model.view("orders")
    with pytest.raises(KeyError, match="unknown member"):
        model.member("flights.nope")


def test_member_sql_is_rendered_over_cube_aliases(model: SemanticModel) -> None:
    rendered = model.rendered
    assert rendered.dimensions["airlines", "name"].expression.sql() == '"airlines".name'
    join = rendered.joins["flights", "origin_airports"].expression.sql()
    assert join == '"flights".origin = "origin_airports".faa'
    assert rendered.sources["dest_airports"].sql() == "main.airports"


def test_small_model_renders_filters_formulas_and_cross_cube_references(
    write_model: Callable[..., Path],
) -> None:
    folder = write_model(orders=SMALL_CUBE, customers=CUSTOMERS, views=VIEWS_WITH_PREFIX)
    model = load_model(folder)
    rendered = model.rendered
    completed = rendered.measures["orders", "completed"].input
    assert completed is not None
    assert completed.expression.sql() == "CASE WHEN (\"orders\".status) = 'completed' THEN 1 END"
    assert rendered.measures["orders", "completed_share"].formula_measures == ("completed", "count")
    city = rendered.dimensions["orders", "customer_city"]
    assert city.cubes == {"orders", "customers"}
    assert rendered.sources["customers"].sql() == "(SELECT * FROM main.customers WHERE active)"
    assert [m.name for m in model.view("sales").members] == [
        "orders_status",
        "orders_count",
        "city",
    ]


VIEWS_WITH_PREFIX = """
    views:
      - name: sales
        cubes:
          - join_path: orders
            prefix: true
            includes: [status, count]
          - join_path: orders.customers
            includes: [city]
    """


@pytest.mark.parametrize(
    ("files", "message", "where"),
    [
        (
            {"views": "views: [{name: v, cubes: [{join_path: orders, includes: [nope]}]}]"},
            "cube orders has no member nope",
            ("views.yml", "views.v.cubes.0"),
        ),
        (
            {"views": "views: [{name: v, cubes: [{join_path: orders.planes, includes: '*'}]}]"},
            "unknown cube planes",
            ("views.yml", "views.v.cubes.0"),
        ),
        (
            {"views": "views: [{name: v, cubes: [{join_path: customers.orders, includes: '*'}]}]"},
            "cube customers has no join to orders",
            ("views.yml", "views.v.cubes.0"),
        ),
        (
            {"extra": "cubes: [{name: orders, sql_table: x}]"},
            "duplicate name",
            ("orders.yml", "cubes.orders"),
        ),
        (
            {
                "views": "views: [{name: v, cubes: [{join_path: orders, includes: [count]}, "
                "{join_path: orders.customers, includes: [{name: id, alias: count}]}]}]"
            },
            "duplicate member count",
            ("views.yml", "views.v"),
        ),
    ],
)
def test_invalid_models_raise_model_error_with_file_and_path(
    write_model: Callable[..., Path], files: dict[str, str], message: str, where: tuple[str, str]
) -> None:
    folder = write_model(orders=SMALL_CUBE, customers=CUSTOMERS, **files)
    with pytest.raises(ModelError, match=message) as caught:
        load_model(folder)
    assert (caught.value.file, caught.value.path) == where


@pytest.mark.parametrize(
    ("dimension_sql", "message"),
    [
        ("{customers.nope}", "cube customers has no member nope"),
        ("{nowhere}", "names no cube or member"),
        ("{loop}", "circular reference"),
        ("{count} + 1", "is a measure"),
        ("CASE WHEN", "does not parse"),
    ],
)
def test_bad_member_sql_is_a_model_error(
    write_model: Callable[..., Path], dimension_sql: str, message: str
) -> None:
    cube = f"""
        cubes:
          - name: orders
            sql_table: orders
            joins:
              - {{name: customers, relationship: many_to_one, sql: "{{CUBE}}.c = {{customers}}.id"}}
            dimensions:
              - {{name: loop, sql: "{dimension_sql}", type: string}}
            measures: [{{name: count, type: count}}]
        """
    folder = write_model(orders=cube, customers=CUSTOMERS)
    with pytest.raises(ModelError, match=message) as caught:
        load_model(folder)
    assert caught.value.file == "orders.yml"


@pytest.mark.parametrize(
    ("measure_sql", "message"),
    [
        ("{CUBE}.amount * 2", "a column is read outside any aggregate"),
        ("MEDIAN(MEDIAN({CUBE}.amount))", "is not an aggregate function over a row-level"),
        ("QUANTILE_CONT({CUBE}.amount, {CUBE}.share)", "is not an aggregate function over a row"),
        ("{count} + MEDIAN({amount})", "may only reference measures of its cube"),
    ],
)
def test_a_number_measure_is_a_formula_or_aggregates_over_rows(
    write_model: Callable[..., Path], measure_sql: str, message: str
) -> None:
    cube = f"""
        cubes:
          - name: orders
            sql_table: orders
            dimensions: [{{name: amount, sql: amount, type: number}}]
            measures:
              - {{name: count, type: count}}
              - {{name: odd, type: number, sql: "{measure_sql}"}}
        """
    folder = write_model(orders=cube, customers=CUSTOMERS)
    with pytest.raises(ModelError, match=message) as caught:
        load_model(folder)
    assert (caught.value.file, caught.value.path) == ("orders.yml", "cubes.orders.odd")


def test_an_aggregate_number_measure_keeps_its_function_over_the_input(
    write_model: Callable[..., Path],
) -> None:
    cube = """
        cubes:
          - name: orders
            sql_table: orders
            dimensions: [{name: amount, sql: amount, type: number}]
            measures:
              - {name: p90, type: number, sql: "QUANTILE_CONT({amount}, 0.9)"}
        """
    model = load_model(write_model(orders=cube, customers=CUSTOMERS))
    rendered = model.rendered.measures["orders", "p90"]
    assert rendered.input is not None
    assert rendered.input.expression.sql(dialect="duckdb") == '("orders".amount)'
    assert rendered.aggregate is not None and rendered.formula is None
    assert rendered.aggregate.sql(dialect="duckdb") == (
        'QUANTILE_CONT("__measure__"."__input__", 0.9)'
    )


def test_view_member_needing_an_unjoined_cube_is_refused(write_model: Callable[..., Path]) -> None:
    views = "views: [{name: v, cubes: [{join_path: orders, includes: [customer_city]}]}]"
    folder = write_model(orders=SMALL_CUBE, customers=CUSTOMERS, views=views)
    with pytest.raises(ModelError, match="reads cube customers, which the view does not join"):
        load_model(folder)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("{group: '*', conditions: [{if: '{ __import__(\"os\") }'}]}", "unexpected"),
        ("{group: '*', conditions: [{if: 'userAttributes.x'}]}", "one expression in braces"),
        ("{conditions: [{if: '{ userAttributes.x }'}]}", "needs group, groups or role"),
        (
            "{group: '*', row_level: {filters: [{member: nope, operator: equals, values: [a]}]}}",
            "unknown member nope",
        ),
        (
            "{group: '*', row_level: {filters: [{member: status, operator: btw, values: [a]}]}}",
            "operator",
        ),
        (
            "{group: '*', row_level: {filters: [{member: status, operator: set, values: [a]}]}}",
            "takes no values",
        ),
    ],
)
def test_bad_access_policies_are_model_errors(
    write_model: Callable[..., Path], policy: str, message: str
) -> None:
    cube = SMALL_CUBE.rstrip() + f"\n        access_policy: [{policy}]\n"
    folder = write_model(orders=cube, customers=CUSTOMERS)
    with pytest.raises(ModelError, match=message) as caught:
        load_model(folder)
    assert caught.value.file == "orders.yml"


def test_an_empty_folder_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no YAML files"):
        load_model(tmp_path)


def test_malformed_yaml_is_a_model_error(write_model: Callable[..., Path]) -> None:
    folder = write_model(orders="cubes: [name: orders")
    with pytest.raises(ModelError, match="cannot read YAML") as caught:
        load_model(folder)
    assert caught.value.file == "orders.yml"
