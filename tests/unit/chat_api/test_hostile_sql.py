"""The hostile-query suite: Semantic SQL is a closed door (issue 3, "Access policies, fully").

Only ``SELECT`` over modelled views; no DuckDB table functions or file access, no physical
tables or catalogs, no DDL or DML, no second statement, and no way around a row filter through
subqueries, CTEs, unions, joins or comments. Each refused query is checked three ways: the
compiler raises ``SemanticSqlError`` with the expected code, the ``svcSqlApi`` tool returns a
result with an ``error`` member, and a whole agent turn streams that tool error and still ends
with a final answer and ``__usage__``. Queries that try to get around the JFK user's row filter
without being refused must return exactly what hand-written DuckDB SQL over the JFK rows gives.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from chat_api import agent
from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.errors import SemanticSqlError
from chat_api.planner.planner import Plan, plan_question
from chat_api.planner.vocabulary import load_vocabulary
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql import compiler
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.executed import check_compiled_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.relations import build_relation
from chat_api.sql.sql_tool import sql_tool_result
from chat_api.sql.warehouse import Warehouse
from models import wire
from models.chat import StreamMessage

JFK = UserContext(attributes={"origin": "JFK"})

HOSTILE: dict[str, list[tuple[str, str]]] = {
    "file access and table functions": [
        ("SELECT * FROM read_csv('/etc/passwd')", "forbidden_function"),
        ("SELECT * FROM read_csv_auto('flights.csv')", "forbidden_function"),
        ("SELECT * FROM read_parquet('s3://bucket/x.parquet')", "forbidden_function"),
        ("SELECT * FROM parquet_scan('x.parquet')", "forbidden_function"),
        ("SELECT * FROM read_json('/etc/passwd')", "forbidden_function"),
        ("SELECT * FROM read_json_auto('x.json')", "forbidden_function"),
        ("SELECT * FROM read_blob('/etc/passwd')", "forbidden_function"),
        ("SELECT read_text('/etc/passwd')", "forbidden_function"),
        ("SELECT * FROM glob('/*')", "parse_error"),
        ("SELECT * FROM sniff_csv('x.csv')", "forbidden_function"),
        ("SELECT * FROM query_table('flights')", "forbidden_function"),
        ("SELECT * FROM query('SELECT 1')", "forbidden_function"),
        ("SELECT * FROM iceberg_scan('x')", "forbidden_function"),
        ("SELECT * FROM 'flights.csv'", "unknown_view"),
        ("SELECT * FROM 'https://example.com/x.csv'", "unknown_view"),
        ('SELECT * FROM "/etc/passwd"', "unknown_view"),
        ("SELECT * FROM range(10)", "forbidden_function"),
        ("SELECT * FROM generate_series(1, 10)", "forbidden_function"),
        ("ATTACH 'other.duckdb' AS other", "parse_error"),
        ("ATTACH DATABASE ':memory:' AS m", "parse_error"),
        ("DETACH other", "not_select"),
        ("COPY flights TO '/tmp/flights.csv'", "not_select"),
        ("COPY (SELECT * FROM flights) TO '/tmp/x.csv'", "not_select"),
        ("COPY flights FROM '/tmp/x.csv'", "not_select"),
        ("EXPORT DATABASE '/tmp/x'", "parse_error"),
        ("IMPORT DATABASE '/tmp/x'", "parse_error"),
        ("INSTALL httpfs", "not_select"),
        ("FORCE INSTALL httpfs", "parse_error"),
        ("LOAD httpfs", "not_select"),
        ("PRAGMA database_list", "not_select"),
        ("CALL pragma_version()", "not_select"),
        ("SET enable_external_access = true", "not_select"),
        ("RESET ALL", "not_select"),
        ("SELECT current_setting('access_mode')", "forbidden_function"),
        ("SELECT getvariable('x')", "forbidden_function"),
        ("SELECT carrier FROM flights WHERE getenv('HOME') IS NOT NULL", "forbidden_function"),
        ("SELECT pg_sleep(10)", "forbidden_function"),
    ],
    "physical tables and catalogs": [
        ("SELECT * FROM main.flights", "unknown_view"),
        ('SELECT * FROM "main"."flights"', "unknown_view"),
        ("SELECT * FROM memory.main.flights", "unknown_view"),
        ("TABLE main.flights", "unknown_view"),
        ("SELECT * FROM information_schema.tables", "unknown_view"),
        ("SELECT * FROM pg_catalog.pg_tables", "unknown_view"),
        ("SELECT * FROM sqlite_master", "unknown_view"),
        ("SELECT * FROM _chatscribe_meta", "unknown_view"),
        ("SELECT * FROM duckdb_tables()", "forbidden_function"),
        ("SELECT * FROM duckdb_settings()", "forbidden_function"),
        ("SELECT * FROM pragma_table_info('flights')", "forbidden_function"),
        ("SELECT * FROM orders", "unknown_view"),
        ("SELECT * FROM origin_airports", "unknown_view"),
        ('SELECT * FROM "FLIGHTS"', "unknown_view"),
        ("SELECT dep_time FROM flights", "unknown_member"),
        ("SELECT flights.dep_time FROM flights", "unknown_member"),
        ('SELECT "__measure__flights__count" FROM flights', "unknown_member"),
        ('SELECT "__row" FROM flights', "unknown_member"),
        ("SELECT COUNT(*) FROM flights WHERE origin IN (SELECT origin FROM main.flights)",
         "unknown_view"),
        ("SELECT carrier FROM flights UNION ALL SELECT carrier FROM main.airlines", "unknown_view"),
        ("WITH raw AS (SELECT * FROM main.flights) SELECT COUNT(*) FROM raw", "unknown_view"),
        ("SELECT * FROM (SELECT * FROM main.flights) AS t", "unknown_view"),
        ("SELECT * FROM flights JOIN main.flights AS r ON TRUE", "unknown_view"),
        ("SELECT * FROM flights WHERE EXISTS (SELECT 1 FROM main.flights)", "unknown_view"),
        ("SELECT (SELECT COUNT(*) FROM main.flights)", "unknown_view"),
        ("SELECT f.carrier FROM flights", "unknown_view"),
    ],
    "DDL, DML and other statements": [
        ("DROP TABLE flights", "not_select"),
        ("DELETE FROM flights", "not_select"),
        ("INSERT INTO flights (flight_id) VALUES (1)", "not_select"),
        ("UPDATE flights SET carrier = 'XX'", "not_select"),
        ("CREATE TABLE stolen AS SELECT * FROM flights", "not_select"),
        ("CREATE VIEW v AS SELECT * FROM flights", "not_select"),
        ("CREATE MACRO m(x) AS x", "not_select"),
        ("CREATE SECRET s (TYPE S3)", "not_select"),
        ("ALTER TABLE flights ADD COLUMN x INT", "not_select"),
        ("TRUNCATE flights", "not_select"),
        ("WITH x AS (DELETE FROM flights RETURNING *) SELECT * FROM x", "not_select"),
        ("SELECT * INTO stolen FROM flights", "unsupported_syntax"),
        ("SELECT * FROM flights FOR UPDATE", "unsupported_syntax"),
        ("BEGIN TRANSACTION", "not_select"),
        ("COMMIT", "not_select"),
        ("CHECKPOINT", "not_select"),
        ("VACUUM", "not_select"),
        ("USE memory", "not_select"),
        ("PREPARE p AS SELECT 1", "not_select"),
        ("EXECUTE p", "not_select"),
        ("DESCRIBE flights", "not_select"),
        ("SHOW TABLES", "not_select"),
        ("SUMMARIZE flights", "not_select"),
        ("EXPLAIN SELECT 1", "not_select"),
        ("EXPLAIN ANALYZE SELECT * FROM flights", "not_select"),
        ("VALUES (1)", "not_select"),
    ],
    "second statements and comments": [
        ("SELECT 1; DROP TABLE flights", "multiple_statements"),
        ("SELECT 1 /* harmless */; SELECT * FROM main.flights", "multiple_statements"),
        ("SELECT carrier FROM flights -- note\n; DELETE FROM flights", "multiple_statements"),
        ("SELECT 1; SELECT 2", "multiple_statements"),
        ("/* only a comment */", "parse_error"),
        ("", "parse_error"),
        ("SELECT FROM WHERE", "parse_error"),
        ("SELECT $1", "unsupported_syntax"),
    ],
    "row-filter escapes by syntax": [
        ("WITH flights AS (SELECT 1 AS origin) SELECT * FROM flights", "forbidden_name"),
        ("WITH origin_airports AS (SELECT 1 AS x) SELECT * FROM origin_airports", "forbidden_name"),
        ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", "unsupported_syntax"),
        ("SELECT * FROM flights, LATERAL (SELECT 1) AS l", "unsupported_syntax"),
        ("SELECT * FROM ONLY flights", "unsupported_syntax"),
        ("SELECT * FROM flights AS f(a, b)", "unsupported_syntax"),
        ("SELECT * FROM (VALUES (1)) AS v(x)", "unsupported_syntax"),
        ("SELECT * FROM UNNEST([1, 2])", "unsupported_syntax"),
        ("SELECT COUNT(*) FROM flights TABLESAMPLE 10%", "unsupported_syntax"),
        ("SELECT COUNT(*) FROM flights NATURAL JOIN flights AS g", "unsupported_syntax"),
    ],
    "model misuse": [
        ("SELECT nope FROM flights", "unknown_member"),
        ("SELECT flights.nope FROM flights", "unknown_member"),
        ("SELECT count FROM flights", "measure_outside_measure"),
        ('SELECT "avg_dep_delay" FROM flights', "measure_outside_measure"),
        ("SELECT AVG(avg_dep_delay) FROM flights", "measure_outside_measure"),
        ("SELECT MEASURE(carrier) FROM flights", "not_a_measure"),
        ("SELECT MEASURE(count, carrier) FROM flights", "not_a_measure"),
        ("SELECT carrier, MEASURE(count) FROM flights", "missing_group_by"),
        ("SELECT carrier_name, MEASURE(count) FROM flights GROUP BY carrier", "missing_group_by"),
        ("SELECT origin FROM flights, weather", "ambiguous_member"),
    ],
    "star modifiers (DuckDB syntax the Postgres reader accepts)": [
        ("SELECT * REPLACE ('LGA' AS origin) FROM flights", "unsupported_syntax"),
        ("SELECT flights.* REPLACE (1 AS flight_id) FROM flights", "unsupported_syntax"),
        ("SELECT * RENAME (origin AS o) FROM flights", "unsupported_syntax"),
        ("SELECT * EXCLUDE (nope) FROM flights", "unknown_member"),
        ("SELECT * EXCLUDE (tailnum_hidden) FROM flights", "unknown_member"),
        ("SELECT COLUMNS('o.*') FROM flights", "unsupported_syntax"),
    ],
}  # fmt: skip
"""Category -> (query, refusal code)."""

REFUSED = [
    pytest.param(sql, code, id=f"{category}: {sql[:60]}")
    for category, cases in HOSTILE.items()
    for sql, code in cases
]

JFK_ROWS = "(SELECT * FROM flights WHERE origin = 'JFK')"
BYPASSES: dict[str, list[tuple[str, str]]] = {
    "subqueries": [
        ("SELECT COUNT(*) FROM (SELECT flight_id FROM flights) AS s", "SELECT count(*) FROM {J}"),
        ("SELECT (SELECT MEASURE(count) FROM flights)", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights WHERE EXISTS (SELECT 1 FROM flights WHERE origin = 'LGA')",
         "SELECT 0"),
        ("SELECT COUNT(*) FROM flights WHERE origin NOT IN "
         "(SELECT origin FROM flights WHERE FALSE)",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights WHERE flight_id > (SELECT MIN(flight_id) FROM flights) "
         "OR TRUE",
         "SELECT count(*) FROM {J}"),
        ("SELECT MAX(n) FROM (SELECT COUNT(*) OVER () AS n FROM flights) AS w",
         "SELECT count(*) FROM {J}"),
    ],
    "CTEs": [
        ("WITH t AS (SELECT * FROM flights) SELECT COUNT(*) FROM t", "SELECT count(*) FROM {J}"),
        ("WITH t AS (SELECT origin FROM flights) SELECT COUNT(*) FROM t "
         "WHERE origin <> 'JFK' OR TRUE",
         "SELECT count(*) FROM {J}"),
        ("WITH a AS (SELECT origin FROM flights), b AS (SELECT origin FROM a) "
         "SELECT COUNT(*) FROM b",
         "SELECT count(*) FROM {J}"),
        ("WITH main AS (SELECT 1 AS flights) SELECT COUNT(*) FROM flights",
         "SELECT count(*) FROM {J}"),
        ("WITH t AS (SELECT DISTINCT origin FROM flights) SELECT origin FROM t", "SELECT 'JFK'"),
    ],
    "unions and set operations": [
        ("SELECT COUNT(*) FROM (SELECT origin FROM flights UNION ALL SELECT origin FROM flights "
         "WHERE FALSE) AS u", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM (SELECT flight_id FROM flights EXCEPT SELECT flight_id FROM flights "
         "WHERE FALSE) AS e", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM (SELECT flight_id FROM flights INTERSECT SELECT flight_id "
         "FROM flights) AS i", "SELECT count(*) FROM {J}"),
        ("SELECT origin FROM flights UNION SELECT origin FROM flights WHERE origin = 'LGA'",
         "SELECT 'JFK'"),
    ],
    "joins": [
        ("SELECT COUNT(*) FROM flights AS a JOIN flights AS b ON a.flight_id = b.flight_id",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights f1, flights f2 WHERE f1.flight_id = f2.flight_id",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights JOIN flights AS g USING (flight_id)",
         "SELECT count(*) FROM {J}"),
        # No row matches (ids are positive); an equality keeps it a hash join, where ``ON
        # FALSE`` made DuckDB compare every pair of rows (12e9: past the 30 s limit under load).
        ("SELECT COUNT(*) FROM flights AS a FULL OUTER JOIN flights AS b "
         "ON a.flight_id = -b.flight_id WHERE a.flight_id IS NOT NULL", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights AS a LEFT JOIN weather AS w ON FALSE",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights CROSS JOIN airlines WHERE airlines.carrier = 'UA'",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM airlines WHERE carrier IN (SELECT carrier FROM flights) AND FALSE "
         "UNION ALL SELECT COUNT(*) FROM flights", "SELECT 0 UNION ALL SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights AS main WHERE main.origin = 'LGA'", "SELECT 0"),
    ],
    "comments and literals": [
        ("SELECT COUNT(*) FROM flights -- WHERE origin = 'LGA'", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights /* ) OR TRUE -- */", "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FROM flights WHERE origin = 'LGA' /*' OR 1=1 */", "SELECT 0"),
        ("SELECT COUNT(*) FROM flights WHERE origin = '''; DROP TABLE flights; --'", "SELECT 0"),
        ("SELECT COUNT(*) /* , (SELECT count(*) FROM main.flights) */ FROM flights",
         "SELECT count(*) FROM {J}"),
        ("SELECT COUNT(*) FILTER (WHERE origin = 'LGA') FROM flights", "SELECT 0"),
    ],
    "weather is scoped like flights": [
        ("SELECT COUNT(*) FROM weather", "SELECT count(*) FROM weather WHERE origin = 'JFK'"),
        ("SELECT DISTINCT origin FROM weather", "SELECT 'JFK'"),
        ("SELECT MEASURE(avg_wind_speed) FROM weather WHERE origin = 'LGA'", "SELECT NULL"),
        ("SELECT COUNT(*) FROM weather AS w JOIN flights AS f ON w.origin = f.origin "
         "WHERE w.origin <> 'JFK'", "SELECT 0"),
        ("SELECT COUNT(*) FROM (SELECT origin FROM weather UNION ALL SELECT origin FROM flights) "
         "AS u WHERE origin = 'EWR'", "SELECT 0"),
    ],
}  # fmt: skip
"""Category -> (query answered for the JFK user, the same over the raw tables; ``{J}`` is the
JFK user's rows)."""

BYPASSED = [
    pytest.param(sql, expected, id=f"{category}: {sql[:60]}")
    for category, cases in BYPASSES.items()
    for sql, expected in cases
]


def test_the_suite_covers_every_category_with_at_least_40_queries() -> None:
    counts = {category: len(cases) for category, cases in {**HOSTILE, **BYPASSES}.items()}
    assert sum(counts.values()) >= 40
    assert all(count >= 4 for count in counts.values()), counts


@pytest.mark.parametrize(("sql", "code"), REFUSED)
def test_hostile_query_is_refused_by_the_compiler(
    model: SemanticModel, sql: str, code: str
) -> None:
    with pytest.raises(SemanticSqlError) as caught:
        compile_semantic_sql(sql, model=model, user=JFK)
    assert caught.value.code == code, caught.value.message


@pytest.mark.parametrize(("sql", "code"), REFUSED)
def test_hostile_query_is_an_error_result_of_the_sql_tool(
    model: SemanticModel, warehouse: Warehouse, sql: str, code: str
) -> None:
    request = {"sqlQuery": sql, "queryTitle": "t", "description": "d", "userRequest": "u"}
    result = sql_tool_result(request, model=model, warehouse=warehouse, user=JFK)
    assert set(result) == {"error", "code"}
    assert result["code"] == code
    assert result["error"]


@pytest.fixture(scope="module")
def toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


@pytest.mark.parametrize(("sql", "code"), REFUSED)
def test_hostile_query_in_an_agent_turn_streams_a_tool_error_and_ends_cleanly(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch, sql: str, code: str
) -> None:
    planned = plan_question(
        "How many flights were there in March?", vocabulary=toolbox.planner_vocabulary
    )
    assert isinstance(planned, Plan)
    hostile = dataclasses.replace(planned, semantic_sql=sql)
    monkeypatch.setattr(agent, "plan_question", lambda *args, **kwargs: hostile)
    request = TurnRequest(chat_id="c", question="q", user=JFK, memory_id="m")
    turn = Turn(request, toolbox=toolbox)
    messages = [StreamMessage.model_validate(line) for line in turn.lines()]
    results = [
        json.loads(m.tool_call.result)
        for m in messages
        if m.tool_call is not None and m.tool_call.name == wire.TOOL_SQL and m.tool_call.result
    ]
    assert results == [{"error": results[0]["error"], "code": code}]
    assert turn.sql_queries == 0
    assert turn.spec is None
    assert any(m.graph_path == (wire.GRAPH_FINAL,) for m in messages)
    assert messages[-1].id == wire.ID_USAGE


@pytest.mark.parametrize(("sql", "expected"), BYPASSED)
def test_row_filter_holds_whatever_the_query_does(
    model: SemanticModel, warehouse: Warehouse, sql: str, expected: str
) -> None:
    compiled = compile_semantic_sql(sql, model=model, user=JFK)
    assert not any(node.comments for node in sqlglot.parse_one(compiled.sql, read="duckdb").walk())
    actual = warehouse.run(compiled, row_limit=1000).rows
    wanted = warehouse.query_raw(expected.format(J=JFK_ROWS))
    assert sorted(map(tuple, actual)) == sorted(map(tuple, wanted))


@pytest.mark.parametrize("value", ["", " ", "\t"])
@pytest.mark.parametrize("view", ["flights", "weather"])
def test_an_empty_attribute_value_is_denied_not_unrestricted(
    model: SemanticModel, value: str, view: str
) -> None:
    empty = UserContext(attributes={"origin": value})
    with pytest.raises(SemanticSqlError) as caught:
        compile_semantic_sql(f"SELECT COUNT(*) FROM {view}", model=model, user=empty)
    assert caught.value.code == "access_denied"


@pytest.mark.parametrize(
    ("sql", "excluded"),
    [
        ("SELECT * EXCLUDE (origin, dest) FROM flights LIMIT 1", {"origin", "dest"}),
        ("SELECT * EXCLUDE origin FROM weather LIMIT 1", {"origin"}),
        ("SELECT f.* EXCLUDE (carrier_name) FROM flights AS f LIMIT 1", {"carrier_name"}),
        ("SELECT * EXCEPT (flight_id) FROM flights LIMIT 1", {"flight_id"}),
    ],
)
def test_star_exclude_is_honoured(
    model: SemanticModel, warehouse: Warehouse, sql: str, excluded: set[str]
) -> None:
    view = model.view(sql.split("FROM ")[1].split()[0])
    everything = [m.name for m in view.members if m.kind == "dimension" and m.public]
    compiled = compile_semantic_sql(sql, model=model, user=JFK)
    names = [name for name, _ in compiled.columns]
    assert names == [name for name in everything if name not in excluded]
    assert [c for c, _ in warehouse.run(compiled, row_limit=1).columns] == names


def test_the_sql_that_runs_is_validated_again_after_transpiling(
    model: SemanticModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQL sent to DuckDB is parsed again and checked against the allow-list.

    Whatever the compiler emits (here a relation it never should).
    """
    real = build_relation  # the function compiler.py imported, restored by monkeypatch

    def leaky(model: SemanticModel, use: Any) -> sqlglot.exp.Subquery:
        relation = real(model, use)
        source = relation.this.args["from_"].this
        source.replace(sqlglot.parse_one("read_csv('/etc/passwd')", read="duckdb"))
        return relation

    monkeypatch.setattr(compiler, "build_relation", leaky)
    with pytest.raises(SemanticSqlError) as caught:
        compile_semantic_sql("SELECT COUNT(*) FROM flights", model=model, user=JFK)
    assert caught.value.code == "forbidden_function"
    assert "executed" in caught.value.message


@pytest.mark.parametrize(
    ("executed", "code"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "forbidden_function"),
        ("SELECT * FROM main.secrets", "unknown_view"),
        ("SELECT * FROM other.main.flights", "unknown_view"),
        ("SELECT getenv('HOME')", "forbidden_function"),
        ("SELECT 1; SELECT 2", "multiple_statements"),
        ("COPY flights TO '/tmp/x.csv'", "not_select"),
        ("SELECT * FROM flights, LATERAL (SELECT 1) AS l", "unsupported_syntax"),
        ("WITH t AS (SELECT * FROM secrets) SELECT * FROM t", "unknown_view"),
    ],
)
def test_the_executed_text_check_refuses_what_the_compiler_never_emits(
    model: SemanticModel, executed: str, code: str
) -> None:
    with pytest.raises(SemanticSqlError) as caught:
        check_compiled_sql(executed, model=model)
    assert caught.value.code == code


def test_every_bypass_and_planned_query_passes_the_executed_text_check(
    model: SemanticModel, toolbox: Toolbox
) -> None:
    queries = [sql for cases in BYPASSES.values() for sql, _ in cases]
    for question in (
        "How many flights were there in March?",
        "Average arrival delay by carrier",
        "Average wind speed at LGA",
        "How many planes were built by Boeing?",
    ):
        planned = plan_question(question, vocabulary=toolbox.planner_vocabulary)
        assert isinstance(planned, Plan), question
        queries.append(planned.semantic_sql)
    for sql in queries:
        check_compiled_sql(compile_semantic_sql(sql, model=model, user=JFK).sql, model=model)


FRAGMENTS = (
    "SELECT", "*", "COUNT(*)", "MEASURE(count)", "origin", "FROM", "flights", "main.flights",
    "WHERE", "origin = 'LGA'", "OR", "TRUE", "UNION ALL", "(", ")", ";", "--", "/*", "*/", "WITH",
    "t AS", "JOIN", "ON", "read_csv('x')", "GROUP BY", "1", ",", "AS", "DROP TABLE flights",
    "ATTACH", "'", '"', "LIMIT", "EXCEPT", "LATERAL", "VALUES",
)  # fmt: skip


def test_random_fragment_soup_is_answered_or_refused_never_crashes(
    model: SemanticModel, warehouse: Warehouse
) -> None:
    """A seeded fuzz: 600 queries made of SQL fragments; each is a result or a tool error."""
    generator = random.Random(20240513)
    outcomes: dict[str, int] = {}
    for _ in range(600):
        sql = " ".join(generator.choice(FRAGMENTS) for _ in range(generator.randint(1, 14)))
        result = sql_tool_result({"sqlQuery": sql}, model=model, warehouse=warehouse, user=JFK)
        key = result.get("code", "answered")
        assert key != "internal_error", sql
        outcomes[key] = outcomes.get(key, 0) + 1
        if key == "answered":
            assert "LGA" not in json.dumps(result["data"]), sql
    assert outcomes.get("parse_error", 0) > 0


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
    views:
      - name: flights
        cubes: [{join_path: flights, includes: "*"}]
    """


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT tailnum FROM flights",
        "SELECT COUNT(*) FROM flights WHERE tailnum = 'N14228'",
        "SELECT origin FROM flights ORDER BY tailnum",
        "SELECT origin, COUNT(*) FROM flights GROUP BY origin, tailnum",
        "SELECT COUNT(*) FROM flights AS a JOIN flights AS b USING (tailnum)",
        "SELECT COUNT(*) FROM flights WHERE origin IN (SELECT origin FROM flights WHERE "
        "tailnum LIKE 'N1%')",
        "WITH t AS (SELECT tailnum AS x FROM flights) SELECT COUNT(*) FROM t",
        "SELECT MAX(LENGTH(tailnum)) FROM flights",
    ],
)
def test_a_hidden_member_cannot_be_read_filtered_ordered_or_joined_on(
    write_model: Callable[..., Path], warehouse: Warehouse, sql: str
) -> None:
    hiding = load_model(write_model(flights=HIDING_MODEL))
    result: dict[str, Any] = sql_tool_result(
        {"sqlQuery": sql}, model=hiding, warehouse=warehouse, user=UserContext()
    )
    assert result["code"] == "hidden_member", result
