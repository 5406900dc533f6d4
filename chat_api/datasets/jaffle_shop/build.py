"""Build the Jaffle Shop warehouse: a fictional café chain's orders, generated offline.

The data comes from the ``jafgen`` package (the Jaffle Shop generator, pinned at 0.4.14),
run in-process for three simulated years (2018-09-01 to 2021-08-31) at a reduced market size,
then lightly cleaned (ids renamed, cents turned into dollars, text timestamps typed) with
DuckDB and written as one Parquet file per table into the target folder:

- ``stores``: ``store_id``, ``store_name``, ``opened_at`` (timestamp), ``tax_rate`` (fraction).
  Six stores; Los Angeles opens after the simulated period and so has no orders.
- ``customers``: ``customer_id``, ``customer_name``.
- ``orders``: ``order_id``, ``customer_id``, ``store_id``, ``ordered_at`` (timestamp),
  ``subtotal``, ``tax_paid``, ``order_total`` (dollars; total = subtotal + tax).
- ``order_items``: ``order_item_id``, ``order_id``, ``sku`` (one row per product sold; an
  item's price is its product's ``price``).
- ``products``: ``sku``, ``product_name``, ``product_type`` (``jaffle`` or ``beverage``),
  ``product_description``, ``price`` (dollars).
- ``supplies``: ``supply_id``, ``supply_name``, ``sku``, ``cost`` (dollars per product made),
  ``is_perishable``; one row per supply and product it is used in.
- ``tweets``: ``tweet_id``, ``customer_id``, ``tweeted_at`` (timestamp), ``content``.

``jafgen`` draws from Python's ``random``, NumPy's global generator and ``uuid.uuid4`` without
a seed, so :func:`build` seeds the first two and swaps ``uuid.uuid4`` for a seeded generator
while the simulation runs (restoring all three afterwards): the output is the same on every
run. It also memoises jafgen's calendar curves (pure functions of the date) for speed.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import random
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

import duckdb
import faker
import numpy as np
from jafgen import curves
from jafgen.simulation import Simulation
from jafgen.stores.inventory import Inventory
from jafgen.stores.stock import Stock

from chat_api.datasets.parquet import copy_to_parquet

__all__ = ["build"]

#: Simulated years from jafgen's epoch (2018-09-01): three years see five stores open.
YEARS = 3
#: Customers per unit of market size (jafgen uses 100; 30 keeps the build to seconds).
SCALE = 30
#: Seed for Python's ``random``, NumPy, the UUIDs and Faker's names.
SEED = 20180901
#: The seed jafgen itself gives Faker when it is imported.
_FAKER_SEED = 123456789

# Each table's cleaning query over its raw CSV (``{csv}`` is replaced by the file's path).
_TABLE_SQL: dict[str, str] = {
    "stores": """
        SELECT id AS store_id, name AS store_name,
               CAST(opened_at AS TIMESTAMP) AS opened_at, CAST(tax_rate AS DOUBLE) AS tax_rate
        FROM read_csv('{csv}', header = true, all_varchar = true)
        ORDER BY opened_at
    """,
    "customers": """
        SELECT id AS customer_id, name AS customer_name
        FROM read_csv('{csv}', header = true, all_varchar = true)
    """,
    "orders": """
        SELECT id AS order_id, customer AS customer_id, store_id,
               CAST(ordered_at AS TIMESTAMP) AS ordered_at,
               CAST(subtotal AS INTEGER) / 100.0 AS subtotal,
               CAST(tax_paid AS INTEGER) / 100.0 AS tax_paid,
               CAST(order_total AS INTEGER) / 100.0 AS order_total
        FROM read_csv('{csv}', header = true, all_varchar = true)
        ORDER BY ordered_at, order_id
    """,
    "order_items": """
        SELECT id AS order_item_id, order_id, sku
        FROM read_csv('{csv}', header = true, all_varchar = true)
    """,
    "products": """
        SELECT sku, trim(name) AS product_name, type AS product_type,
               trim(description) AS product_description, CAST(price AS INTEGER) / 100.0 AS price
        FROM read_csv('{csv}', header = true, all_varchar = true)
        ORDER BY sku
    """,
    "supplies": """
        SELECT id AS supply_id, name AS supply_name, sku,
               CAST(cost AS INTEGER) / 100.0 AS cost, perishable = 'True' AS is_perishable
        FROM read_csv('{csv}', header = true, all_varchar = true)
        ORDER BY supply_id, sku
    """,
    "tweets": """
        SELECT id AS tweet_id, user_id AS customer_id,
               CAST(tweeted_at AS TIMESTAMP) AS tweeted_at, content
        FROM read_csv('{csv}', header = true, all_varchar = true)
        ORDER BY tweeted_at, tweet_id
    """,
}


class _ScaledSimulation(Simulation):  # type: ignore[misc]
    """jafgen's simulation with a smaller market size than its hard-coded ``scale = 100``."""

    @property
    def scale(self) -> int:
        """Customers per unit of market size."""
        return SCALE

    @scale.setter
    def scale(self, value: int) -> None:
        """Ignore jafgen's own setting (``Simulation.__init__`` assigns 100)."""


@contextmanager
def _seeded_generator() -> Iterator[None]:
    """Make jafgen deterministic and fast for the duration of the block.

    Seeds Python's ``random``, NumPy's global generator and Faker, replaces ``uuid.uuid4`` with
    a seeded generator and memoises jafgen's date curves; restores everything on exit.

    Yields:
        Nothing; the simulation is run inside the block.
    """
    random_state = random.getstate()
    numpy_state = np.random.get_state()
    original_uuid4 = uuid.uuid4
    original_eval = curves.Curve.__dict__["eval"]
    uuid_rng = random.Random(SEED + 1)

    def seeded_uuid4() -> uuid.UUID:
        return uuid.UUID(int=uuid_rng.getrandbits(128), version=4)

    plain_eval: Callable[[type, dt.datetime], float] = original_eval.__func__

    @functools.cache
    def curve_on_day(cls: type, day: dt.date) -> float:
        return plain_eval(cls, dt.datetime(day.year, day.month, day.day))

    def cached_eval(cls: type, date: dt.datetime) -> float:
        return curve_on_day(cls, date.date())

    random.seed(SEED)
    np.random.seed(SEED % 2**32)
    faker.Faker.seed(_FAKER_SEED)
    uuid.uuid4 = seeded_uuid4
    curves.Curve.eval = classmethod(cached_eval)
    try:
        yield
    finally:
        curves.Curve.eval = original_eval
        uuid.uuid4 = original_uuid4
        np.random.set_state(numpy_state)
        random.setstate(random_state)


def _simulate() -> dict[str, list[dict[str, Any]]]:
    """Run the jafgen simulation and collect its raw records per entity.

    Returns:
        Raw rows (jafgen's own dictionaries) keyed by table name.
    """
    with _seeded_generator():
        sim = _ScaledSimulation(YEARS, "raw")
        with redirect_stdout(io.StringIO()):  # jafgen draws a progress bar on stdout
            sim.run_simulation()
        return {
            "customers": [customer.to_dict() for customer in sim.customers.values()],
            "orders": [order.to_dict() for order in sim.orders],
            "order_items": [item.to_dict() for order in sim.orders for item in order.items],
            "stores": [market.store.to_dict() for market in sim.markets],
            "supplies": Stock.to_dict(),
            "products": Inventory.to_dict(),
            "tweets": [tweet.to_dict() for tweet in sim.tweets],
        }


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write raw records as a CSV file with a header row.

    Args:
        path: File to write.
        rows: Records, all with the same keys.
    """
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def build(folder: Path) -> None:
    """Generate the Jaffle Shop tables and write them as Parquet files into ``folder``.

    Args:
        folder: Destination folder (created if missing); receives ``<table>.parquet`` for each
            table listed in the module docstring.
    """
    folder.mkdir(parents=True, exist_ok=True)
    entities = _simulate()
    with tempfile.TemporaryDirectory(prefix="jaffle_shop_") as tmp:
        con = duckdb.connect()
        try:
            for table, query in _TABLE_SQL.items():
                csv_path = Path(tmp) / f"{table}.csv"
                _write_csv(csv_path, entities[table])
                select = query.format(csv=str(csv_path).replace("'", "''"))
                copy_to_parquet(con, select, folder / f"{table}.parquet")
        finally:
            con.close()
