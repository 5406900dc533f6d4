from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from chat_api.errors import AccessDeniedError, QueryExecutionError, SemanticSqlError
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.compiler import CompiledQuery, compile_semantic_sql
from chat_api.sql.data import META_TABLE, ensure_database
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

ALL_FLIGHTS = 336_776

Runner = Callable[..., list[list[Any]]]


@pytest.fixture
def run(model: SemanticModel, warehouse: Warehouse) -> Runner:
    """Compile for a user and return every row (up to 10,000)."""

    def run_query(sql: str, user: UserContext) -> list[list[Any]]:
        compiled = compile_semantic_sql(sql, model=model, user=user)
        return warehouse.run(compiled, row_limit=10_000).rows

    return run_query


def raw(warehouse: Warehouse, sql: str) -> list[list[Any]]:
    return [list(row) for row in warehouse.query_raw(sql)]


# --- row-level security -------------------------------------------------------------------


def test_origin_user_counts_only_flights_from_that_origin(
    run: Runner, warehouse: Warehouse, jfk_user: UserContext
) -> None:
    expected = raw(warehouse, "SELECT count(*) FROM flights WHERE origin = 'JFK'")
    assert run("SELECT MEASURE(count) FROM flights", jfk_user) == expected
    assert run("SELECT COUNT(*) FROM flights", jfk_user) == expected
    assert expected == [[111_279]]


def test_users_without_the_attribute_see_every_flight(run: Runner, anyone: UserContext) -> None:
    assert run("SELECT MEASURE(count) FROM flights", anyone) == [[ALL_FLIGHTS]]
    grouped = UserContext(groups=("analysts",), attributes={"team": "ops"})
    assert run("SELECT MEASURE(count) FROM flights", grouped) == [[ALL_FLIGHTS]]


def test_origin_user_sees_only_their_origin_whatever_the_where_clause(
    run: Runner, jfk_user: UserContext
) -> None:
    assert run("SELECT DISTINCT origin FROM flights", jfk_user) == [["JFK"]]
    assert run("SELECT MEASURE(count) FROM flights WHERE origin = 'LGA'", jfk_user) == [[0]]
    rows = run(
        "SELECT origin, MEASURE(count) FROM flights WHERE 1 = 1 OR TRUE GROUP BY 1", jfk_user
    )
    assert rows == [["JFK", 111_279]]


@pytest.mark.parametrize(
    "sql",
    [
        "WITH t AS (SELECT * FROM flights) SELECT COUNT(*) FROM t",
        "WITH t AS (SELECT origin FROM flights) "
        "SELECT COUNT(*) FROM t WHERE origin <> 'JFK' OR TRUE",
        "SELECT COUNT(*) FROM (SELECT flight_id FROM flights) AS s",
        "SELECT COUNT(*) FROM (SELECT origin FROM flights UNION ALL SELECT origin FROM flights "
        "WHERE FALSE) AS u",
        "SELECT (SELECT MEASURE(count) FROM flights)",
        "SELECT COUNT(*) FROM flights AS a JOIN flights AS b ON a.flight_id = b.flight_id",
        "SELECT COUNT(*) FROM airlines WHERE carrier IN (SELECT carrier FROM flights) AND FALSE "
        "UNION ALL SELECT COUNT(*) FROM flights",
        "SELECT MAX(n) FROM (SELECT COUNT(*) OVER () AS n FROM flights) AS w",
    ],
)
def test_ctes_subqueries_unions_and_joins_over_the_view_keep_the_row_filter(
    run: Runner, jfk_user: UserContext, sql: str
) -> None:
    assert [111_279] in run(sql, jfk_user)


def test_the_row_filter_sits_in_the_select_that_reads_the_physical_table(
    model: SemanticModel, jfk_user: UserContext
) -> None:
    sql = (
        "WITH t AS (SELECT carrier, MEASURE(count) AS n FROM flights GROUP BY 1) "
        "SELECT * FROM t WHERE n > (SELECT MEASURE(count) / 100 FROM flights)"
    )
    compiled = compile_semantic_sql(sql, model=model, user=jfk_user)
    tree = sqlglot.parse_one(compiled.sql, read="duckdb")
    flights_tables = [t for t in tree.find_all(exp.Table) if t.name == "flights" and t.db == "main"]
    assert len(flights_tables) == 2
    for table in flights_tables:
        select = table.find_ancestor(exp.Select)
        assert select is not None
        assert select.args["where"].this.sql() == '"flights"."origin" = \'JFK\''


def test_a_hostile_attribute_value_matches_nothing_instead_of_injecting(
    run: Runner,
) -> None:
    hostile = UserContext(attributes={"origin": "JFK' OR '1'='1"})
    assert run("SELECT MEASURE(count) FROM flights", hostile) == [[0]]


# --- compiled SQL against hand-written SQL -------------------------------------------------


def test_carrier_name_by_count_equals_hand_written_join(
    run: Runner, warehouse: Warehouse, anyone: UserContext
) -> None:
    expected = raw(
        warehouse,
        "SELECT a.name, count(*) AS n FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier "
        "GROUP BY 1 ORDER BY n DESC, 1",
    )
    sql = "SELECT carrier_name, MEASURE(count) AS n FROM flights GROUP BY 1 ORDER BY n DESC, 1"
    assert run(sql, anyone) == expected
    assert len(expected) == 16


def test_origin_user_carrier_counts_equal_hand_written_filtered_sql(
    run: Runner, warehouse: Warehouse, jfk_user: UserContext
) -> None:
    expected = raw(
        warehouse,
        "SELECT a.name, count(*) FROM flights f JOIN airlines a USING (carrier) "
        "WHERE f.origin = 'JFK' GROUP BY 1 ORDER BY 2 DESC, 1",
    )
    sql = (
        "SELECT flights.carrier_name, MEASURE(flights.count) FROM flights "
        "GROUP BY 1 ORDER BY 2 DESC, 1"
    )
    assert run(sql, jfk_user) == expected


@pytest.mark.parametrize(
    ("semantic", "hand_written"),
    [
        (
            "SELECT month, MEASURE(avg_dep_delay), MEASURE(max_arr_delay), MEASURE(total_distance) "
            "FROM flights GROUP BY month ORDER BY month",
            "SELECT month, avg(dep_delay), max(arr_delay), sum(distance) FROM flights "
            "GROUP BY month ORDER BY month",
        ),
        (
            "SELECT MEASURE(distinct_planes), MEASURE(distinct_destinations), "
            "MEASURE(distinct_carriers), MEASURE(min_air_time), MEASURE(avg_air_time) FROM flights",
            "SELECT count(DISTINCT tailnum), count(DISTINCT dest), count(DISTINCT carrier), "
            "min(air_time), avg(air_time) FROM flights",
        ),
        (
            "SELECT DATE_TRUNC('month', flight_date) AS m, MEASURE(count) FROM flights "
            "GROUP BY 1 ORDER BY 1",
            "SELECT make_timestamp(2013, month, 1, 0, 0, 0), count(*) FROM flights "
            "GROUP BY month ORDER BY month",
        ),
        (
            "SELECT plane_manufacturer, MEASURE(count) AS n FROM flights "
            "WHERE plane_manufacturer IS NOT NULL GROUP BY 1 ORDER BY n DESC, 1 LIMIT 5",
            "SELECT p.manufacturer, count(*) AS n FROM flights f JOIN planes p USING (tailnum) "
            "GROUP BY 1 ORDER BY n DESC, 1 LIMIT 5",
        ),
        (
            "SELECT dest_name, MEASURE(avg_arr_delay) FROM flights WHERE origin_name = "
            "'La Guardia' AND dest IN ('ATL', 'ORD') GROUP BY dest_name ORDER BY dest_name",
            "SELECT d.name, avg(f.arr_delay) FROM flights f JOIN airports d ON f.dest = d.faa "
            "WHERE f.origin = 'LGA' AND f.dest IN ('ATL', 'ORD') GROUP BY 1 ORDER BY 1",
        ),
        (
            "SELECT origin, MEASURE(avg_temp), MEASURE(max_wind_gust), MEASURE(total_precip) "
            "FROM weather GROUP BY origin ORDER BY origin",
            "SELECT origin, avg(temp), max(wind_gust), sum(precip) FROM weather "
            "GROUP BY 1 ORDER BY 1",
        ),
        (
            "SELECT carrier, MEASURE(count) AS n FROM flights GROUP BY carrier "
            "HAVING MEASURE(count) > 20000 ORDER BY n DESC LIMIT 3 OFFSET 1",
            "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier HAVING count(*) > 20000 "
            "ORDER BY n DESC LIMIT 3 OFFSET 1",
        ),
        (
            "SELECT carrier, MEASURE(median_arr_delay), MEASURE(median_dep_delay), "
            "MEASURE(median_air_time), MEASURE(median_distance) FROM flights "
            "WHERE origin = 'JFK' GROUP BY carrier ORDER BY carrier",
            "SELECT carrier, median(arr_delay), median(dep_delay), median(air_time), "
            "median(distance) FROM flights WHERE origin = 'JFK' GROUP BY 1 ORDER BY 1",
        ),
        (
            "SELECT MEASURE(avg_seats), MEASURE(max_year), MEASURE(distinct_models) FROM planes",
            "SELECT avg(seats), max(year), count(DISTINCT model) FROM planes",
        ),
        (
            "SELECT tzone, MEASURE(count) FROM airports GROUP BY 1 ORDER BY 2 DESC, 1 NULLS LAST "
            "LIMIT 3",
            "SELECT tzone, count(*) FROM airports GROUP BY 1 ORDER BY 2 DESC, 1 NULLS LAST LIMIT 3",
        ),
    ],
)
def test_semantic_sql_equals_hand_written_duckdb_sql(
    run: Runner, warehouse: Warehouse, anyone: UserContext, semantic: str, hand_written: str
) -> None:
    assert run(semantic, anyone) == [
        [value.isoformat() if hasattr(value, "isoformat") else value for value in row]
        for row in raw(warehouse, hand_written)
    ]


def test_only_the_joins_the_query_needs_are_compiled(
    model: SemanticModel, anyone: UserContext
) -> None:
    plain = compile_semantic_sql(
        "SELECT carrier, MEASURE(count) FROM flights GROUP BY 1", model=model, user=anyone
    )
    assert "JOIN" not in plain.sql
    named = compile_semantic_sql(
        "SELECT carrier_name FROM flights WHERE plane_year > 2000", model=model, user=anyone
    )
    assert named.sql.count("JOIN") == 2
    assert '"main"."airlines"' in named.sql and '"main"."planes"' in named.sql


def test_compiled_query_reports_views_members_and_column_types(
    model: SemanticModel, anyone: UserContext
) -> None:
    compiled = compile_semantic_sql(
        "SELECT f.carrier_name, DATE_TRUNC('month', f.flight_date) AS m, MEASURE(f.count), "
        "MEASURE(avg_distance) AS d, a.name FROM flights f "
        "JOIN airlines a ON a.carrier = f.carrier GROUP BY 1, 2, 5",
        model=model,
        user=anyone,
    )
    assert compiled.views == ("flights", "airlines")
    assert set(compiled.members) == {
        "flights.carrier_name",
        "flights.flight_date",
        "flights.count",
        "flights.avg_distance",
        "flights.carrier",
        "airlines.name",
        "airlines.carrier",
    }
    assert compiled.columns == (
        ("carrier_name", "String"),
        ("m", "Timestamp"),
        ("count", "Int64"),
        ("d", "Double"),
        ("name", "String"),
    )


def test_select_star_over_a_view_lists_its_dimensions(
    model: SemanticModel, anyone: UserContext
) -> None:
    compiled = compile_semantic_sql("SELECT * FROM airports LIMIT 1", model=model, user=anyone)
    assert [name for name, _ in compiled.columns] == [
        "faa", "name", "lat", "lon", "alt", "tz", "dst", "tzone",
    ]  # fmt: skip


def test_identifiers_fold_to_lower_case_like_postgres(run: Runner, anyone: UserContext) -> None:
    assert run("SELECT MEASURE(Count) AS \"N\" FROM Flights WHERE ORIGIN = 'EWR'", anyone) == [
        [120_835]
    ]


# --- refusals (the hostile-query suite is tests/unit/chat_api/test_hostile_sql.py) ----------


def test_measure_without_measure_explains_the_fix(
    model: SemanticModel, anyone: UserContext
) -> None:
    with pytest.raises(SemanticSqlError, match=r"MEASURE\(avg_dep_delay\)"):
        compile_semantic_sql("SELECT carrier, avg_dep_delay FROM flights", model=model, user=anyone)


def test_unknown_member_suggests_close_names(model: SemanticModel, anyone: UserContext) -> None:
    with pytest.raises(SemanticSqlError, match="did you mean carrier_name"):
        compile_semantic_sql("SELECT carrier_nam FROM flights", model=model, user=anyone)


def test_missing_group_by_names_the_dimension(model: SemanticModel, anyone: UserContext) -> None:
    with pytest.raises(SemanticSqlError, match="add carrier_name to GROUP BY"):
        compile_semantic_sql(
            "SELECT carrier_name, MEASURE(count) FROM flights GROUP BY carrier",
            model=model,
            user=anyone,
        )


HIDING_MODEL = """
    cubes:
      - name: flights
        sql_table: flights
        dimensions:
          - {name: flight_id, sql: flight_id, type: number, primary_key: true}
          - {name: origin, sql: origin, type: string}
          - {name: tailnum, sql: tailnum, type: string}
        measures:
          - {name: count, type: count}
        access_policy:
          - group: "*"
            member_level: {excludes: [tailnum]}
          - group: staff
    views:
      - name: flights
        cubes: [{join_path: flights, includes: "*"}]
        access_policy:
          - groups: [staff, guests]
    """


@pytest.fixture
def hiding_model(write_model: Callable[..., Path]) -> SemanticModel:
    return load_model(write_model(flights=HIDING_MODEL))


def test_hidden_members_are_refused_and_left_out_of_star(hiding_model: SemanticModel) -> None:
    guest = UserContext(groups=("guests",))
    with pytest.raises(SemanticSqlError) as caught:
        compile_semantic_sql("SELECT tailnum FROM flights", model=hiding_model, user=guest)
    assert caught.value.code == "hidden_member"
    star = compile_semantic_sql("SELECT * FROM flights", model=hiding_model, user=guest)
    assert [name for name, _ in star.columns] == ["flight_id", "origin"]
    staff = UserContext(groups=("staff",))
    assert compile_semantic_sql("SELECT tailnum FROM flights", model=hiding_model, user=staff).sql


def test_users_outside_every_policy_are_denied_the_view(hiding_model: SemanticModel) -> None:
    with pytest.raises(AccessDeniedError) as caught:
        compile_semantic_sql("SELECT origin FROM flights", model=hiding_model, user=UserContext())
    assert caught.value.code == "access_denied"


# --- the warehouse ------------------------------------------------------------------------


def compiled(model: SemanticModel, sql: str, user: UserContext | None = None) -> CompiledQuery:
    return compile_semantic_sql(sql, model=model, user=user or UserContext())


def test_run_returns_the_first_rows_and_the_exact_total(
    model: SemanticModel, warehouse: Warehouse
) -> None:
    result = warehouse.run(
        compiled(model, "SELECT dest, MEASURE(count) FROM flights GROUP BY 1"), row_limit=10
    )
    assert len(result.rows) == 10
    assert (
        result.total_rows == raw(warehouse, "SELECT count(DISTINCT dest) FROM flights")[0][0] == 105
    )
    assert result.columns == (("dest", "String"), ("count", "Int64"))
    assert result.elapsed_ms > 0
    small = warehouse.run(compiled(model, "SELECT carrier FROM airlines"), row_limit=100)
    assert small.total_rows == len(small.rows) == 16


def test_rows_are_json_safe(model: SemanticModel, warehouse: Warehouse) -> None:
    sql = (
        "SELECT flight_date, dep_delay, distance, carrier, MEASURE(total_distance) AS t, "
        "MEASURE(avg_arr_delay) AS a FROM flights WHERE flight_id = 1 GROUP BY 1, 2, 3, 4"
    )
    result = warehouse.run(compiled(model, sql))
    assert result.rows == [["2013-01-01T05:00:00", 2.0, 1400, "UA", 1400, 11.0]]
    assert [t for _, t in result.columns] == [
        "Timestamp",
        "Double",
        "Int64",
        "String",
        "Int64",
        "Double",
    ]


def test_a_slow_query_is_interrupted_at_the_timeout(
    model: SemanticModel, warehouse: Warehouse
) -> None:
    slow = compiled(
        model, "SELECT COUNT(*) FROM flights AS a, flights AS b WHERE a.dep_delay < b.arr_delay"
    )
    with pytest.raises(QueryExecutionError) as caught:
        warehouse.run(slow, timeout_s=0.2)
    assert caught.value.timed_out
    assert warehouse.run(compiled(model, "SELECT MEASURE(count) FROM airlines")).rows == [[16]]


def test_duckdb_errors_become_query_execution_errors(
    model: SemanticModel, warehouse: Warehouse
) -> None:
    with pytest.raises(QueryExecutionError) as caught:
        warehouse.run(compiled(model, "SELECT CAST(carrier AS INTEGER) FROM flights"))
    assert not caught.value.timed_out
    assert "CAST" in caught.value.sql


def test_the_warehouse_is_read_only_and_cannot_read_files(warehouse: Warehouse) -> None:
    with pytest.raises(QueryExecutionError):
        warehouse.query_raw("CREATE TABLE x (a INTEGER)")
    with pytest.raises(QueryExecutionError):
        warehouse.query_raw("SELECT * FROM read_csv('/etc/passwd')")


def test_ensure_database_reuses_a_current_file_and_rebuilds_a_stale_one(
    tmp_path: Path, warehouse_path: Path
) -> None:
    before = warehouse_path.stat().st_mtime_ns
    assert ensure_database(warehouse_path) == warehouse_path
    assert warehouse_path.stat().st_mtime_ns == before
    stale = tmp_path / "stale.duckdb"
    with duckdb.connect(str(stale)) as connection:
        connection.execute(f"CREATE TABLE {META_TABLE} (key VARCHAR, value VARCHAR)")
        connection.execute(f"INSERT INTO {META_TABLE} VALUES ('schema_version', '0')")
    ensure_database(stale)
    with Warehouse(stale) as rebuilt:
        assert rebuilt.query_raw("SELECT count(*), max(flight_id) FROM flights") == [
            (ALL_FLIGHTS, ALL_FLIGHTS)
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stale.duckdb"]


def test_having_and_order_by_may_use_output_names(
    run: Runner, warehouse: Warehouse, anyone: UserContext
) -> None:
    sql = (
        "SELECT origin AS o, MEASURE(count) AS n FROM flights GROUP BY o "
        "HAVING n > 110000 ORDER BY n * -1"
    )
    expected = raw(
        warehouse,
        "SELECT origin, count(*) AS n FROM flights GROUP BY 1 HAVING n > 110000 ORDER BY n DESC",
    )
    assert run(sql, anyone) == expected


CALCULATED = """
    cubes:
      - name: flights
        sql_table: flights
        dimensions:
          - {name: flight_id, sql: flight_id, type: number, primary_key: true}
          - {name: origin, sql: origin, type: string}
          - {name: dep_delay, sql: dep_delay, type: number}
        measures:
          - {name: count, type: count}
          - name: delayed
            type: count
            filters: [{sql: "{dep_delay} > 15"}]
          - name: delayed_minutes
            type: sum
            sql: dep_delay
            filters: [{sql: "{CUBE}.dep_delay > 15"}]
          - name: delayed_share
            type: number
            sql: "1.0 * {delayed} / NULLIF({count}, 0)"
    views:
      - name: punctuality
        cubes: [{join_path: flights, includes: [origin, delayed, delayed_minutes, delayed_share]}]
    """


def test_filtered_and_calculated_measures_equal_hand_written_sql(
    write_model: Callable[..., Path], warehouse: Warehouse, anyone: UserContext
) -> None:
    calculated = load_model(write_model(flights=CALCULATED))
    query = compile_semantic_sql(
        "SELECT origin, MEASURE(delayed), MEASURE(delayed_minutes), MEASURE(delayed_share) "
        "FROM punctuality GROUP BY 1 ORDER BY 1",
        model=calculated,
        user=anyone,
    )
    expected = raw(
        warehouse,
        "SELECT origin, count(*) FILTER (WHERE dep_delay > 15), "
        "sum(dep_delay) FILTER (WHERE dep_delay > 15), "
        "1.0 * count(*) FILTER (WHERE dep_delay > 15) / count(*) "
        "FROM flights GROUP BY 1 ORDER BY 1",
    )
    assert warehouse.run(query).rows == [
        [o, d, float(m), pytest.approx(s)] for o, d, m, s in expected
    ]


def test_one_warehouse_serves_many_threads(model: SemanticModel, warehouse: Warehouse) -> None:
    users = [UserContext(attributes={"origin": o}) for o in ("JFK", "LGA", "EWR")] * 4
    queries = [compiled(model, "SELECT MEASURE(count) FROM flights", user) for user in users]
    with ThreadPoolExecutor(max_workers=6) as pool:
        counts = list(pool.map(lambda q: warehouse.run(q).rows[0][0], queries))
    assert counts == [111_279, 104_662, 120_835] * 4
