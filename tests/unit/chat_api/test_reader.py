"""The model-driven reader: any model, a user's warehouse read-only, typed queries, safety."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import duckdb
import pytest

from chat_api import datasets
from chat_api.agent import Toolbox
from chat_api.errors import ModelError, QueryExecutionError, UnreadableQuestionError
from chat_api.reader import words as words_module
from chat_api.reader.describe import read_as
from chat_api.reader.index import _LEGAL, ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.query import Filter, Query, TimeDimension
from chat_api.reader.sql import semantic_sql
from chat_api.reader.words import CALENDAR_MONTHS, WEEKDAYS
from chat_api.semantic.checks import check_members
from chat_api.semantic.model import load_model
from chat_api.settings import DEFAULT_MODEL_DIR, is_embedded_model, resolve_reader
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.data import default_database_path, ensure_database
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse, open_warehouse


@pytest.fixture(scope="module")
def flights_index() -> ModelIndex:
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        return build_index(load_model(), warehouse.query_raw)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("how many flights in march", {"measures": ("flights.count",)}),
        ("top 5 destinations from JFK", {"dimensions": ("flights.dest",), "limit": 5}),
        (
            "carriers with at least 1000 flights",
            {"having": (Filter("flights.count", "gte", ("1000",)),)},
        ),
        (
            "how many flights did not depart from JFK",
            {"filters": (Filter("flights.origin", "notEquals", ("JFK",)),)},
        ),
        (
            "what percentage of flights were cancelled",
            {"share": (Filter("flights.cancelled", "equals", ("true",)),)},
        ),
        ("busiest destination for each origin", {"dimensions": ("flights.dest", "flights.origin")}),
        (  # the column the measure counts, said again in parentheses: not a breakdown
            "How many distinct planes (tail numbers) did Delta fly?",
            {"measures": ("flights.distinct_planes",), "dimensions": ()},
        ),
    ],
)
def test_the_reader_reads_shapes_into_a_typed_query(
    flights_index: ModelIndex, question: str, expected: dict[str, object]
) -> None:
    query = read(question, flights_index)
    for key, value in expected.items():
        assert getattr(query, key) == value, (question, key)


def test_an_unknown_noun_is_refused_naming_it(flights_index: ModelIndex) -> None:
    with pytest.raises(UnreadableQuestionError, match="'price'"):
        read("what is the average ticket price", flights_index)


def test_a_follow_up_changes_the_previous_query(flights_index: ModelIndex) -> None:
    first = read("avg dep delay for delta by month", flights_index)
    second = read("what about united?", flights_index, previous=first)
    assert second.measures == first.measures and second.dimensions == first.dimensions
    assert second.filters[0].values == ("United Air Lines Inc.",)


def test_the_typed_query_round_trips_through_json(flights_index: ModelIndex) -> None:
    query = read("busiest destination for each origin in july", flights_index)
    assert Query.from_json(query.to_json()) == query


def test_no_dataset_word_lives_in_the_reader_package(flights_index: ModelIndex) -> None:
    source = " ".join(
        path.read_text(encoding="utf-8").lower() for path in Path("chat_api/reader").glob("*.py")
    )
    words = {
        name.rpartition(".")[2].replace("_", " ")
        for view in flights_index.views.values()
        for name in view.members
    }
    words |= {v.value.lower() for hits in flights_index.values.values() for v in hits}
    for folder in sorted(datasets.ROOT.glob("*/model")):  # every shipped model's names and titles
        for view in load_model(folder).views.values():
            words |= {m.name.replace("_", " ") for m in view.members}
            words |= {m.title.lower() for m in view.members} | {view.name.replace("_", " ")}
    # English the grammar itself speaks (calendar, grains, Cube's words) is not a dataset's.
    grammar = (
        set(CALENDAR_MONTHS) | set(WEEKDAYS) | set(words_module.GRAINS) | {"count", "model", "name"}
    )
    grammar |= {w for role in words_module.DIRECTIONS.values() for w in role} | {"weekday"}
    spoken = [t for t in vars(words_module).values() if isinstance(t, Mapping | frozenset)]
    grammar |= {str(w) for table in spoken for w in table} | set(words_module.FUNCTION_WORDS)
    grammar |= set(_LEGAL) | {"date", "number"}  # legal suffixes; link kinds
    found = sorted(w for w in words - grammar if len(w) > 3 and f'"{w}"' in source)
    assert found == []


def test_a_user_duckdb_file_is_never_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "mine.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sales AS SELECT 1 AS amount")
    before = path.read_bytes()
    with pytest.raises(QueryExecutionError, match="never"):
        ensure_database(path)
    with Warehouse(path) as warehouse:
        assert warehouse.query_raw("SELECT SUM(amount) FROM sales") == [(1,)]
    assert path.read_bytes() == before


def test_a_folder_of_parquet_and_csv_files_is_a_warehouse(tmp_path: Path) -> None:
    (tmp_path / "regions.csv").write_text("region,target\nEast,10\nWest,20\n")
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT 'East' AS region, 5 AS amount) TO '{tmp_path / 'sales.parquet'}'"
        )
    with Warehouse.from_folder(tmp_path) as warehouse:
        rows = warehouse.query_raw(
            "SELECT r.region, SUM(s.amount) FROM sales s JOIN regions r USING (region) GROUP BY 1"
        )
        assert rows == [("East", 5)]
        with pytest.raises(QueryExecutionError):
            warehouse.query_raw(f"SELECT * FROM read_csv_auto('{tmp_path / 'regions.csv'}')")


def test_a_member_whose_sql_fails_is_reported_at_start(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(Path("chat_api/data_model/main"), model_dir)
    text = (model_dir / "airlines.yml").read_text().replace('"{CUBE}.name"', '"{CUBE}.nme"')
    (model_dir / "airlines.yml").write_text(text)
    with (
        Warehouse(ensure_database(default_database_path())) as warehouse,
        pytest.raises(ModelError) as caught,
    ):
        check_members(load_model(model_dir), warehouse.query_raw)
    assert caught.value.file == "airlines.yml"
    assert "name" in str(caught.value)


def test_a_branch_is_read_through_its_own_model() -> None:
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        main = Toolbox.build(load_model(), warehouse, reader="rules")
        branch = main.for_model(load_model(Path("chat_api/data_model/dev")))
        assert main.index is not None and branch.index is not None
        assert "flights.median_arr_delay" in main.index.views["flights"].members
        assert "flights.median_arr_delay" not in branch.index.views["flights"].members


def test_an_average_per_bucket_by_group_lists_the_highest_first() -> None:
    query = Query(
        "flights",
        measures=("flights.count",),
        dimensions=("flights.carrier",),
        time_dimensions=(TimeDimension("flights.flight_date"),),
        average_over="day",
    )
    assert semantic_sql(query).endswith("ORDER BY 2 DESC NULLS LAST")


def test_the_reading_ends_with_one_full_stop(flights_index: ModelIndex) -> None:
    reading = read_as(read("avg dep delay for delta", flights_index), flights_index)
    assert reading.endswith("Inc.") and not reading.endswith("..")


def test_a_warehouse_path_without_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(QueryExecutionError, match=r"no \.parquet or \.csv files"):
        open_warehouse(tmp_path, cache=tmp_path / "unused.duckdb")
    with pytest.raises(QueryExecutionError, match="no DuckDB file"):
        open_warehouse(tmp_path / "missing.duckdb", cache=tmp_path / "unused.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_auto_reads_with_the_legacy_planner_only_on_the_embedded_flights_model(
    tmp_path: Path,
) -> None:
    shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / "flights")
    warehouse = tmp_path / "flights.duckdb"
    assert is_embedded_model(None, warehouse)
    assert is_embedded_model(DEFAULT_MODEL_DIR / ".." / "main", warehouse)
    assert is_embedded_model(tmp_path / "flights", None)  # a changed copy on the embedded data
    assert not is_embedded_model(tmp_path / "flights", warehouse)
    assert resolve_reader("auto", embedded=True) == "legacy"
    assert resolve_reader("auto", embedded=False) == "rules"
    assert resolve_reader("rules", embedded=True) == "rules"
    assert resolve_reader("hybrid", embedded=True) == "hybrid"
    with pytest.raises(ValueError, match="auto, rules, legacy, llm or hybrid"):
        resolve_reader("gpt", embedded=False)


@pytest.mark.parametrize(
    ("question", "op", "sql"),
    [
        (
            "how many more flights did JFK have than LGA?",
            "difference",
            "SELECT (SELECT COUNT(*) FROM flights WHERE origin = 'JFK') - "
            "(SELECT COUNT(*) FROM flights WHERE origin = 'LGA')",
        ),
        (
            "ratio of july flights to february flights?",
            "ratio",
            "SELECT (SELECT COUNT(*) FROM flights WHERE month = 7) / "
            "(SELECT COUNT(*) FROM flights WHERE month = 2)",
        ),
    ],
)
def test_arithmetic_between_two_sides_of_one_member(
    flights_index: ModelIndex, question: str, op: str, sql: str
) -> None:
    query = read(question, flights_index)
    assert query.sides is not None and query.sides.op == op
    assert Query.from_json(query.to_json()) == query
    model = load_model()
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        compiled = compile_semantic_sql(semantic_sql(query), model=model, user=UserContext())
        found = warehouse.run(compiled).rows[0][0]
        expected = warehouse.query_raw(sql)[0][0]
    assert found == pytest.approx(expected)


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("How many flights left JFK in 2015?", "2013-01-01 to 2013-12-31"),
        ("How much did United earn from Newark flights?", "quantity to total or average"),
        ("What did a JFK to LAX ticket cost on average?", "quantity to total or average"),
    ],
)
def test_a_question_the_data_cannot_answer_is_refused_not_counted(
    flights_index: ModelIndex, question: str, reason: str
) -> None:
    with pytest.raises(UnreadableQuestionError, match=reason):
        read(question, flights_index)
