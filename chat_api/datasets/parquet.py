"""Writing a dataset's tables as Parquet files, the form a folder warehouse reads."""

from __future__ import annotations

from pathlib import Path

import duckdb


def copy_to_parquet(con: duckdb.DuckDBPyConnection, select: str, target: Path) -> None:
    """Writes the rows of ``select`` to the Parquet file ``target`` (overwritten).

    Args:
        con: The connection the query runs on.
        select: A trusted SELECT of the builder's own (never user input).
        target: The file to write; its stem is the table name a folder warehouse gives it.
    """
    path = target.as_posix().replace("'", "''")
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
