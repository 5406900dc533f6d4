"""Number measures written as expressions of aggregates, as Cube runs them.

Cube runs a ``type: number`` measure's SQL as written, so modellers write weighted averages and
rates as arithmetic between aggregates. Truths are computed in Python from the rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from chat_api.errors import ModelError
from chat_api.semantic.model import load_model
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

ORDERS = [  # id, customer_id, status, amount, qty
    (1, 1, "paid", 5.0, 2),
    (2, 1, "paid", 7.0, 1),
    (3, 2, "open", 1.0, 4),
    (4, 3, "paid", 3.0, 3),
    (5, 3, "void", 2.0, 1),
]

MODEL = """
cubes:
  - name: orders
    sql_table: orders
    dimensions:
      - {name: id, sql: id, type: number, primary_key: true}
      - {name: status, sql: status, type: string}
    measures:
      - {name: count, type: count}
      - name: weighted_price
        type: number
        sql: "SUM({CUBE}.amount * {CUBE}.qty) / NULLIF(SUM({CUBE}.qty), 0)"
      - name: paid_share
        type: number
        sql: "100.0 * COUNT(CASE WHEN {CUBE}.status = 'paid' THEN 1 END) / COUNT(*)"
      - name: customers_per_order
        type: number
        sql: "COUNT(DISTINCT {CUBE}.customer_id) * 1.0 / COUNT(*)"
views:
  - name: sales
    cubes:
      - {join_path: orders, includes: "*"}
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Warehouse]:
    root = tmp_path_factory.mktemp("aggregates")
    (root / "model").mkdir()
    (root / "model" / "shop.yml").write_text(MODEL)
    (root / "data").mkdir()
    with (root / "data" / "orders.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("id", "customer_id", "status", "amount", "qty"))
        writer.writerows(ORDERS)
    return root / "model", Warehouse.from_folder(root / "data")


def _run(shop: tuple[Path, Warehouse], sql: str) -> list[list[object]]:
    model_dir, warehouse = shop
    compiled = compile_semantic_sql(sql, model=load_model(model_dir), user=UserContext())
    return [list(row) for row in warehouse.run(compiled).rows]


def _truths(rows: list[tuple[int, int, str, float, int]]) -> list[object]:
    weighted = sum(a * q for *_, a, q in rows) / sum(q for *_, q in rows)
    paid = 100.0 * sum(1 for r in rows if r[2] == "paid") / len(rows)
    return [weighted, paid, len({r[1] for r in rows}) / len(rows)]


def test_an_expression_of_aggregates_is_computed_as_written(shop: tuple[Path, Warehouse]) -> None:
    ((weighted, paid, per_order),) = _run(
        shop,
        "SELECT MEASURE(weighted_price), MEASURE(paid_share), MEASURE(customers_per_order) "
        "FROM sales",
    )
    assert [weighted, paid, per_order] == pytest.approx(_truths(ORDERS))


def test_grouped_each_group_gets_its_own_expression(shop: tuple[Path, Warehouse]) -> None:
    rows = _run(
        shop,
        "SELECT status, MEASURE(weighted_price), MEASURE(paid_share), "
        "MEASURE(customers_per_order) FROM sales GROUP BY 1 ORDER BY 1",
    )
    for status, *values in rows:
        group = [r for r in ORDERS if r[2] == status]
        assert values == pytest.approx(_truths(group)), status
    assert [r[0] for r in rows] == sorted({r[2] for r in ORDERS})


@pytest.mark.parametrize(
    ("measure_sql", "message"),
    [
        ("SUM({CUBE}.amount) + {CUBE}.qty", "a column is read outside any aggregate"),
        ("SUM(SUM({CUBE}.amount)) / COUNT(*)", "is not an aggregate function over a row-level"),
        ("SUM({CUBE}.amount) / MAX(1)", "is not an aggregate function over a row-level"),
    ],
)
def test_an_expression_that_is_not_over_aggregates_is_a_model_error(
    tmp_path: Path, measure_sql: str, message: str
) -> None:
    odd = f'      - {{name: odd, type: number, sql: "{measure_sql}"}}\n'
    count = "      - {name: count, type: count}\n"
    model = MODEL.replace(count, count + odd)
    (tmp_path / "shop.yml").write_text(model)
    with pytest.raises(ModelError, match=message) as caught:
        load_model(tmp_path)
    assert caught.value.path == "cubes.orders.odd"
