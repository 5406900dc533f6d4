"""Views over one_to_many joins: each cube's measures count its own rows once.

Cube calls these "multiplied measures". Truths are computed in Python from the rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from chat_api.agent import Toolbox
from chat_api.errors import ModelError
from chat_api.http.app import create_app
from chat_api.reader.index import build_index
from chat_api.reader.interpret import read
from chat_api.reader.sql import semantic_sql
from chat_api.semantic.model import load_model, policy_attributes
from chat_api.settings import ChatApiSettings
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse
from models import wire

CUSTOMERS = [(1, "Ada", "north", 10.0), (2, "Bo", "south", 20.0), (3, "Cy", "north", 40.0)]
ORDERS = [(1, 1, "paid", 5.0), (2, 1, "paid", 7.0), (3, 1, "open", 1.0), (4, 2, "paid", 3.0)]

MODEL = """
cubes:
  - name: customers
    sql_table: customers
    joins:
      - name: orders
        relationship: one_to_many
        sql: "{CUBE}.id = {orders}.customer_id"
    dimensions:
      - {name: id, sql: id, type: number, primary_key: true}
      - {name: name, sql: name, type: string}
      - {name: region, sql: region, type: string}
    measures:
      - {name: count, type: count}
      - {name: total_credit, sql: credit, type: sum}
      - {name: average_credit, sql: credit, type: avg}
      - {name: top_credit, sql: credit, type: max}
  - name: orders
    sql_table: orders
    joins:
      - name: customers
        relationship: many_to_one
        sql: "{CUBE}.customer_id = {customers}.id"
    dimensions:
      - {name: id, sql: id, type: number, primary_key: true}
      - {name: status, sql: status, type: string}
    measures:
      - {name: count, type: count}
      - {name: revenue, sql: amount, type: sum}
views:
  - name: customer_orders
    cubes:
      - join_path: customers
        includes: "*"
        prefix: true
      - join_path: customers.orders
        includes: [status, count, revenue]
        prefix: true
  - name: order_lines
    cubes:
      - join_path: orders
        includes: [status, count, revenue]
        prefix: false
      - join_path: orders.customers
        includes: [region, count, total_credit]
        prefix: true
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Warehouse]:
    root = tmp_path_factory.mktemp("shop")
    (root / "model").mkdir()
    (root / "model" / "shop.yml").write_text(MODEL)
    data = root / "data"
    data.mkdir()
    for name, header, rows in (
        ("customers", ("id", "name", "region", "credit"), CUSTOMERS),
        ("orders", ("id", "customer_id", "status", "amount"), ORDERS),
    ):
        with (data / f"{name}.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
    return root / "model", Warehouse.from_folder(data)


def _run(shop: tuple[Path, Warehouse], sql: str) -> list[list[object]]:
    model_dir, warehouse = shop
    compiled = compile_semantic_sql(sql, model=load_model(model_dir), user=UserContext())
    return [list(row) for row in warehouse.run(compiled).rows]


def test_the_one_side_of_a_one_to_many_join_counts_each_row_once(
    shop: tuple[Path, Warehouse],
) -> None:
    rows = _run(
        shop,
        "SELECT MEASURE(customers_count), MEASURE(customers_total_credit), "
        "MEASURE(customers_average_credit), MEASURE(customers_top_credit), "
        "MEASURE(orders_count), MEASURE(orders_revenue) FROM customer_orders",
    )
    credits = [credit for *_, credit in CUSTOMERS]
    assert rows == [
        [len(CUSTOMERS), sum(credits), sum(credits) / len(credits), max(credits), len(ORDERS),
         sum(amount for *_, amount in ORDERS)]
    ]  # fmt: skip


def test_grouped_by_the_many_side_each_group_counts_its_customers_once(
    shop: tuple[Path, Warehouse],
) -> None:
    rows = _run(
        shop,
        "SELECT orders_status, MEASURE(customers_count), MEASURE(customers_total_credit) "
        "FROM customer_orders WHERE orders_status IS NOT NULL GROUP BY 1 ORDER BY 1",
    )
    credit = {cid: c for cid, _, _, c in CUSTOMERS}
    expected = []
    for status in sorted({s for _, _, s, _ in ORDERS}):
        buyers = {cid for _, cid, s, _ in ORDERS if s == status}
        expected.append([status, len(buyers), sum(credit[c] for c in buyers)])
    assert rows == expected


def test_a_customer_without_orders_has_no_orders_not_one(shop: tuple[Path, Warehouse]) -> None:
    rows = _run(
        shop,
        "SELECT customers_name, MEASURE(orders_count) FROM customer_orders GROUP BY 1 ORDER BY 1",
    )
    assert rows == [
        [name, sum(1 for _, c, _, _ in ORDERS if c == cid)] for cid, name, _, _ in CUSTOMERS
    ]


def test_the_far_side_of_a_many_to_one_join_counts_each_row_once(
    shop: tuple[Path, Warehouse],
) -> None:
    rows = _run(
        shop, "SELECT MEASURE(count), MEASURE(customers_count), MEASURE(customers_total_credit) "
        "FROM order_lines",
    )  # fmt: skip
    buyers = {c for _, c, _, _ in ORDERS}
    credit = {cid: c for cid, _, _, c in CUSTOMERS}
    assert rows == [[len(ORDERS), len(buyers), sum(credit[c] for c in buyers)]]


def test_a_repeated_cube_without_a_primary_key_is_a_model_error(tmp_path: Path) -> None:
    (tmp_path / "shop.yml").write_text(MODEL.replace(", primary_key: true}", "}", 1))
    with pytest.raises(ModelError, match="primary_key") as caught:
        load_model(tmp_path)
    assert caught.value.file == "shop.yml"
    assert "customer_orders" in (caught.value.path or "")


def test_the_executed_sql_of_a_repeated_cube_is_still_checked(shop: tuple[Path, Warehouse]) -> None:
    model_dir, _ = shop
    compiled = compile_semantic_sql(
        "SELECT MEASURE(customers_total_credit) FROM customer_orders",
        model=load_model(model_dir),
        user=UserContext(),
    )
    assert "LIST_SUM" in compiled.sql
    with pytest.raises(Exception, match="LIST_SUM"):
        compile_semantic_sql(
            "SELECT LIST_SUM(customers_id) FROM customer_orders",
            model=load_model(model_dir),
            user=UserContext(),
        )


def test_a_model_of_cubes_only_is_read_through_one_view_per_cube(
    shop: tuple[Path, Warehouse], tmp_path: Path
) -> None:
    (tmp_path / "cubes.yml").write_text(MODEL.split("views:")[0])
    model = load_model(tmp_path)
    assert set(model.views) == {"customers", "orders"}
    assert model.files["views.orders"] == "cubes.yml"
    orders = [m.name for m in model.views["orders"].members]
    assert "customers_region" in orders and "customers_count" not in orders
    index = build_index(model, shop[1].query_raw)
    query = read("revenue by region", index)
    assert query.view == "orders" and query.dimensions == ("orders.customers_region",)
    compiled = compile_semantic_sql(semantic_sql(query), model=model, user=UserContext())
    got = {row[0]: row[1] for row in shop[1].run(compiled).rows}
    region = {cid: r for cid, _, r, _ in CUSTOMERS}
    expected: dict[str, float] = {}
    for _, cid, _, amount in ORDERS:
        expected[region[cid]] = expected.get(region[cid], 0.0) + amount
    assert got == expected


async def test_the_attributes_the_model_policies_read_are_declared_by_the_server(
    shop: tuple[Path, Warehouse], tmp_path: Path
) -> None:
    policy = """
    access_policy:
      - group: "*"
        row_level:
          filters:
            - {member: customers_region, operator: equals, values: ["{ userAttributes.region }"]}
"""
    (tmp_path / "shop.yml").write_text(
        MODEL.replace("\n  - name: order_lines", policy + "  - name: order_lines", 1)
    )
    model = load_model(tmp_path)
    assert policy_attributes(model) == ("region",)
    settings = ChatApiSettings(
        api_keys=(SecretStr("k"),), api_database_url=f"sqlite:///{tmp_path}/state.sqlite3"
    )
    app = create_app(settings, toolbox=Toolbox.build(model, shop[1], reader="rules"))
    url = wire.CHAT_PATH_TEMPLATE.format(cloud_region="local", account_name="demo", agent_id="1")
    transport = httpx.ASGITransport(app=app)
    statuses = []
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for attributes in ({"region": "north"}, {"colour": "red"}):
            session = {"externalId": "ada", "userAttributes": [
                {"name": k, "value": v} for k, v in attributes.items()
            ]}  # fmt: skip
            body = {"input": "how many customers", "sessionSettings": session}
            response = await client.post(url, json=body, headers={"Authorization": "Api-Key k"})
            statuses.append(response.status_code)
    assert statuses == [200, 400]
