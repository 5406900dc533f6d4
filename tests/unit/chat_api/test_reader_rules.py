"""Every row of the reader's grammar tables, run on its own example question.

The tables (``chat_api/reader/words.py``) are the reader's grammar: each row is a phrase, what it
means and an example. Each example is read against a neutral model (``tests/data/depot_model``)
and the typed query must show the row's meaning: an ordering orders, a comparator compares with
its operator, a negation negates, a grain groups by it, and so on (the way sqlglot tests its
dialects as tables of input and output). A follow-up row is read after
``orders by supplier in March`` (one that moves the year, after ``... in 2017``).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

from chat_api.errors import UnreadableQuestionError
from chat_api.reader import words as words_module
from chat_api.reader.index import ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.query import Query
from chat_api.reader.sql import semantic_sql
from chat_api.semantic.model import load_model
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

MODEL = Path(__file__).resolve().parents[2] / "data" / "depot_model"
VALUES = {
    "supplier": ["Acme", "Globex", "Initech"],
    "region": ["North", "South", "East"],
    "warehouse": ["Harbor Depot", "Hill Depot"],
    "store": ["Main Street", "Station Road"],
    "product": ["Bolts", "Gears"],
    "lane": ["Lane 1", "Lane 2"],
    "serial_number": ["SN-1", "SN-2"],
}
FOLLOWED = "orders by supplier in March"
DATED = "orders by supplier in 2017"
TABLES = {
    name: table
    for name, table in vars(words_module).items()
    if isinstance(table, dict) and table and all(hasattr(w, "example") for w in table.values())
}
ROWS = [
    pytest.param(phrase, word, id=f"{name}:{phrase}")
    for name, table in TABLES.items()
    for phrase, word in table.items()
]


@pytest.fixture(scope="module")
def depot(tmp_path_factory: pytest.TempPathFactory) -> ModelIndex:
    folder = tmp_path_factory.mktemp("depot")
    quantities = ["wait", "arrival_wait", "weight", "duration", "units", "items", "price", "cost"]
    columns = ["order_id", *VALUES, "ordered_at", *quantities, "basket_size", "cancelled", "late",
               "returned"]  # fmt: skip
    with (folder / "orders.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for i in range(12):
            labels = [values[i % len(values)] for values in VALUES.values()]
            numbers = [i * 7 % 60, i * 5 % 40, 100 + i, 30 + i, i % 4, 1 + i % 3, 9.5 + i, 4 + i]
            flags = [i % 5 == 0, i % 3 == 0, i % 4 == 0]
            writer.writerow([i, *labels, f"2017-{i + 1:02d}-0{1 + i % 7} {i + 6:02d}:00:00",
                             *numbers, i % 6 + 1, *flags])  # fmt: skip
    with Warehouse.from_folder(folder) as warehouse:
        return build_index(load_model(MODEL), warehouse.query_raw)


def _agg(query: Query, value: str, index: ModelIndex) -> bool:
    types = {index.info(m).member.agg_type for m in query.measures}
    aggregates = {a.agg for a in query.aggregates}
    over = {query.over_agg} if query.average_over else set()
    ordered = {"max": "desc", "min": "asc"}.get(value) in {d for _, d in query.order}
    return value in types | aggregates | over or ordered


def _cmp(query: Query, value: str) -> bool:
    operators = {f.operator for f in (*query.filters, *query.having)}
    if value == "between":
        return {"gte", "lte"} <= operators or {"gt", "lt"} <= operators
    dated = any(td.date_range for td in query.time_dimensions) or bool(query.time_parts)
    return value in operators or (value != "equals" and dated)


def _negated(query: Query) -> bool:
    filters = (*query.filters, *query.share)
    negated = any(f.operator in ("notEquals", "notSet") for f in filters)
    false = any(f.values == ("false",) for f in filters)
    return negated or false or any(p.negate for p in query.time_parts)


CHECKS: dict[str, Callable[[Query, str, ModelIndex], bool]] = {
    "agg": _agg,
    "order": lambda q, v, i: (bool(q.order) and q.order[0][1] == v) or bool(q.per_group),
    "cmp": lambda q, v, i: _cmp(q, v),
    "not": lambda q, v, i: _negated(q),
    "by": lambda q, v, i: q.grouped,
    "grain": lambda q, v, i: (
        q.grouped
        and (
            any(td.granularity == v for td in q.time_dimensions)
            or any(v in d for d in q.dimensions)
        )
    ),
    "share": lambda q, v, i: (
        bool(q.share or q.share_parts)
        if v == "share"
        else q.ratio or (q.sides is not None and q.sides.op == "ratio")
    ),
    "arith": lambda q, v, i: q.ratio if v == "ratio" else q.difference,
    "versus": lambda q, v, i: q.grouped or any(len(f.values) > 1 for f in q.filters),
    "whole": lambda q, v, i: not q.grouped,
    "change": lambda q, v, i: q.sides is not None and q.sides.part == "year",
}
"""What a row of each kind must show in the typed query of its example."""


def _followup_check(query: Query, value: str, previous: Query) -> bool:
    if value in ("earlier", "later"):
        years = {td.date_range[0][:4] for td in query.time_dimensions if td.date_range}
        return years == {"2016" if value == "earlier" else "2018"}
    if value == "drop":
        return len(query.filters) < len(previous.filters) or not query.time_dimensions
    if value == "overall":
        return not query.dimensions
    if value == "there":
        return set(previous.filters) <= set(query.filters)
    return query != previous


@pytest.mark.parametrize(("phrase", "word"), ROWS)
def test_every_grammar_row_reads_its_example(
    depot: ModelIndex, phrase: str, word: words_module.Word
) -> None:
    assert word.example, f"row {phrase!r} has no example"
    if word.kind == "followup":
        previous = read(DATED if word.value in ("earlier", "later") else FOLLOWED, depot)
        query = read(word.example, depot, previous=previous)
        assert _followup_check(query, word.value, previous), query.to_json()
        return
    query = read(word.example, depot)
    assert CHECKS[word.kind](query, word.value, depot), query.to_json()


def test_every_kind_has_a_check() -> None:
    kinds = {word.kind for table in TABLES.values() for word in table.values()}
    assert kinds <= {*CHECKS, "followup"}, kinds - {*CHECKS, "followup"}


def _filters(query: Query) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(f.member, f.operator, f.values) for f in query.filters}


CLASS_ROWS = [
    pytest.param(
        "how many orders did Harbor ship out of North",
        lambda q: {m for m, _, _ in _filters(q)} == {"depot.warehouse", "depot.region"},
        id="a value keeps its filter when a value of another member follows apart from it",
    ),
    pytest.param(
        "which suppliers ship to North",
        lambda q: (
            q.dimensions == ("depot.supplier",)
            and _filters(q) == {("depot.region", "equals", ("North",))}
        ),
        id="a verb after its plural subject is passed over",
    ),
    pytest.param(
        "how many orders were scheduled to leave before 6am",
        lambda q: bool(q.time_parts) or any(f.operator == "lt" for f in q.filters),
        id="a verb after the infinitive's to is passed over",
    ),
    pytest.param(
        "how many orders sat at North",
        lambda q: not q.time_parts and _filters(q) == {("depot.region", "equals", ("North",))},
        id="a short weekday that is an English verb, in lower case, is the verb",
    ),
    pytest.param(
        "how many orders on Sat",
        lambda q: [p.values for p in q.time_parts] == [(6,)],
        id="a short weekday, capitalised, is the day",
    ),
    pytest.param(
        "how many orders on sat and sun",
        lambda q: [p.values for p in q.time_parts] == [(6, 7)],
        id="a short weekday after a calendar word is the day",
    ),
    pytest.param(
        "how many orders at SR",
        lambda q: _filters(q) == {("depot.store", "equals", ("Station Road",))},
        id="a value's initials in capitals name it",
    ),
    pytest.param(
        "Acme units as a fraction of Globex units",
        lambda q: (
            q.sides is not None and (q.sides.values, q.sides.op) == (("Acme", "Globex"), "ratio")
        ),
        id="as a fraction of two values of one member divides the first by the second",
    ),
    pytest.param(
        "retail sales at North",
        lambda q: (
            q.measures == ("depot.sales",)
            and _filters(q) == {("depot.region", "equals", ("North",))}
        ),
        id="a word the member's description puts before its name is part of the member",
    ),
    pytest.param(
        "orders in the northern zone",
        lambda q: _filters(q) == {("depot.region", "equals", ("North",))},
        id="a value's gloss in its dimension's description names the value",
    ),
    pytest.param(
        "% change in revenue from 2016 to 2017",
        lambda q: (
            q.sides is not None and (q.sides.values, q.sides.op) == (("2016", "2017"), "change")
        ),
        id="a percent change runs from the first year to the second",
    ),
    pytest.param(
        "by how much did revenue grow between 2016 and 2017",
        lambda q: (
            q.sides is not None and (q.sides.values, q.sides.op) == (("2017", "2016"), "difference")
        ),
        id="a change without a percent word is the later year minus the earlier",
    ),
]


DATE_ROWS = [
    ("how many orders in the week of March 6th 2017", ("2017-03-06", "2017-03-12")),
    ("orders the week of Monday, March 6th 2017 (Mon-Sun)", ("2017-03-06", "2017-03-12")),
    (
        "orders in the week of Mon 6 Mar 2017 (through Sunday the 12th)",
        ("2017-03-06", "2017-03-12"),
    ),
    ("orders on June 10-16", ("2017-06-10", "2017-06-16")),
    ("orders between 3/1 and 3/5", ("2017-03-01", "2017-03-05")),
    ("orders from Jan 5 to Jan 9, 2017", ("2017-01-05", "2017-01-09")),
]
CLASS_ROWS += [
    pytest.param(
        question,
        lambda q, dates=dates: (
            [td.date_range for td in q.time_dimensions] == [dates] and not q.time_parts
        ),
        id=f"a date range in words: {question}",
    )
    for question, dates in DATE_ROWS
]


@pytest.mark.parametrize(("question", "check"), CLASS_ROWS)
def test_question_classes_read_into_their_shape(
    depot: ModelIndex, question: str, check: Callable[[Query], bool]
) -> None:
    query = read(question, depot)
    assert check(query), query.to_json()


@pytest.mark.parametrize(
    "question", ["how many orders at HD", "how many orders at sr", "retail orders at North"]
)
def test_initials_and_qualifiers_out_of_place_name_nothing(
    depot: ModelIndex, question: str
) -> None:
    with pytest.raises(UnreadableQuestionError):
        read(question, depot)


def test_never_is_refused_naming_it(depot: ModelIndex) -> None:
    with pytest.raises(UnreadableQuestionError) as raised:
        read("how many suppliers never had a late order", depot)
    assert "never" in raised.value.words


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("% change in revenue from 2016 to 2017", 50.0),
        ("how much did revenue grow from 2016 to 2017", 15.0),
    ],
)
def test_a_change_between_two_years_is_computed_from_both(
    tmp_path: Path, question: str, expected: float
) -> None:
    rows = [("2016-03-01", 10.0), ("2016-05-01", 20.0), ("2017-02-01", 45.0)]
    with (tmp_path / "orders.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["order_id", "supplier", "ordered_at", "price"])
        writer.writerows((i, "Acme", day, price) for i, (day, price) in enumerate(rows))
    model = load_model(MODEL)
    with Warehouse.from_folder(tmp_path) as warehouse:
        index = build_index(model, warehouse.query_raw)
        query = read(question, index)
        compiled = compile_semantic_sql(semantic_sql(query), model=model, user=UserContext())
        assert warehouse.run(compiled).rows[0][0] == pytest.approx(expected)
