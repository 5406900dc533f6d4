"""The archive's engine, migrations and database error translation (SQLAlchemy 2, psycopg 3).

Database errors are translated here, once, for every module of :mod:`pipeline.archive`:

* connection refused, server restarting, deadlock, serialization failure →
  :class:`~pipeline.errors.ArchiveUnavailableError` (transient: retry the whole batch);
* a value PostgreSQL refuses (SQLSTATE class 22/23) → :class:`~pipeline.errors.ArchiveRejectedError`
  (permanent: the sink isolates the record);
* a missing table or column, or no permission (class 42/3F) →
  :class:`~pipeline.errors.ArchiveSchemaError` (permanent: run ``chatscribe db upgrade``);
* anything else the server reports (disk full, shutdown, lock timeout ...) → transient.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar

import psycopg
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from psycopg import sql as psycopg_sql
from psycopg.types.array import ListBinaryDumper
from psycopg.types.string import BytesBinaryDumper
from sqlalchemy import exc as sa_exc

from pipeline.errors import (
    ArchiveRejectedError,
    ArchiveSchemaError,
    ArchiveUnavailableError,
    PipelineError,
)
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

ArchiveEngine: TypeAlias = sa.Engine
"""The archive's engine as callers outside :mod:`pipeline.archive` hold it: built by
:func:`create_engine`, passed back to the archive's functions, never used directly."""
MIGRATIONS_DIR: Final = Path(__file__).resolve().parents[2] / "migrations"
CONNECT_TIMEOUT_S: Final = 5
SESSION_OPTIONS: Final = "-c jit=off"
"""Every archive session runs without JIT compilation (:func:`create_engine`)."""
READ_ONLY_OPTIONS: Final = "-c default_transaction_read_only=on"
_REJECTED_CLASSES: Final = ("22", "23")
_SCHEMA_CLASSES: Final = ("42", "3F")
PAIRS_PER_QUERY: Final = 500
"""The most ``(job_id, attempt)`` pairs one statement carries as ``= ANY(...)`` arrays."""

_T = TypeVar("_T")


def create_engine(settings: Settings, *, read_only: bool = False, pool_size: int = 2) -> sa.Engine:
    """Builds the archive's engine (psycopg 3) with the schema applied to every connection.

    The schema is applied one way, for SQLAlchemy Core and SQL text alike: each new connection
    sets ``search_path`` to ``settings.database_schema`` alone (as the migrations do,
    ``migrations/env.py``), so no table name in the package is qualified and a missing table
    fails instead of resolving to ``public``. Pattern from SQLAlchemy's PostgreSQL dialect
    documentation, "Setting Alternate Search Paths on Connect".

    Args:
        settings: Database URL and schema.
        read_only: Every transaction of the engine's connections is read only
            (``default_transaction_read_only``), for readers such as the console.
        pool_size: Connections kept open.

    Every session runs with ``jit=off`` (:data:`SESSION_OPTIONS`). The archive's statements are
    short key lookups over many rows, and PostgreSQL JIT-compiles any plan whose estimated cost
    passes ``jit_above_cost`` (100,000), which a nested loop over a batch's attempts and every
    monthly partition of ``stream_lines`` passes once the archive holds millions of lines: at
    10M lines (``bench/archive_growth.py``) :func:`pipeline.archive.derived.remarked` ran 4 ms
    and compiled 26-29 ms (``auto_explain``: "JIT: Functions: 67 ... Emission 22-25 ms"), in
    every sink batch, while the same statement at 100k lines was never compiled. PostgreSQL's
    documentation, "When to JIT?": for short queries the compilation costs more than it saves.
    Analytical reads over the views are made by BI tools on connections of their own.

    Returns:
        An engine whose connections see the archive's tables (:mod:`pipeline.archive.tables`,
        schema-less) in ``settings.database_schema``; pre-ping on checkout.
    """
    engine = sa.create_engine(
        settings.database_url.get_secret_value(),
        pool_pre_ping=True,
        pool_size=pool_size,
        connect_args={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "options": f"{SESSION_OPTIONS} {READ_ONLY_OPTIONS}" if read_only else SESSION_OPTIONS,
        },
    )
    set_path = psycopg_sql.SQL("SET search_path TO {}").format(
        psycopg_sql.Identifier(settings.database_schema)
    )

    @sa.event.listens_for(engine, "connect", insert=True)
    def _session(dbapi_connection: psycopg.Connection[Any], _record: object) -> None:
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True  # session settings, outside any transaction
        dbapi_connection.execute(set_path)
        _compress_with_lz4(dbapi_connection)
        dbapi_connection.autocommit = autocommit
        _binary_dumpers(dbapi_connection)

    return engine


def _binary_dumpers(dbapi_connection: psycopg.Connection[Any]) -> None:
    """Makes psycopg send ``bytes`` and lists in binary, with its own (C) dumpers.

    * ``bytes``: ``Copy.set_types`` picks a dumper by type OID, and for ``bytea`` that is the
      last one registered for it: ``psycopg.dbapi20``'s ``BinaryBinaryDumper``, a Python
      subclass (for its ``Binary`` wrapper, which the archive never uses) that costs a Python
      call per value. ``stream_lines`` has four ``bytea`` columns: a row went from 0.96 to
      0.30 µs (binary ``COPY`` of 100,000 rows).
    * lists (the job ids, attempts and lock keys a batch's queries join with, ``unnest``):
      in text format psycopg quotes every element, with a regular expression each; in binary
      it writes them as they are. With 1,000 attempts touched, as a sink batch at 1,000 paced
      streams is: ``derived.ready`` 3.5 → 2.3 ms, ``chain.link_pending`` 2.1 → 1.0 ms,
      ``jobs.lock_jobs`` 1.6 → 1.2 ms per call. The element type travels with the array
      (``text[]``, ``int2[]``/``int4[]``/``int8[]`` by the values), and the queries cast.

    Source: psycopg "Data adaptation configuration" (``AdaptersMap.register_dumper``) and
    "Binary parameters and results".
    """
    dbapi_connection.adapters.register_dumper(bytes, BytesBinaryDumper)
    dbapi_connection.adapters.register_dumper(list, ListBinaryDumper)


def _compress_with_lz4(dbapi_connection: psycopg.Connection[Any]) -> None:
    """Makes the session compress the large values it writes with LZ4, where the server can.

    Raw lines, tool payloads and result rows are stored compressed (TOAST) once over ~2 KB;
    LZ4 compresses several times faster than PostgreSQL's default ``pglz`` and reads back
    faster too, at about the same size. Writing 60,000 paced lines and their derived rows
    (``docs/toast_cpu.py``): 14.2-14.3 µs of PostgreSQL CPU per line with ``pglz``, 10.7-10.8
    with LZ4, 48 MB of archive either way. A server without LZ4 (built without it, or before
    PostgreSQL 14) refuses the setting and keeps ``pglz``. Source: PostgreSQL documentation,
    ``default_toast_compression`` (§20.11.2) and "TOAST" (§73.2).
    """
    try:
        dbapi_connection.execute("SET default_toast_compression = 'lz4'")
    except psycopg.Error as exc:
        logger.debug("default_toast_compression stays pglz: %s", exc)


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Runs ``alembic upgrade`` for ``settings.database_schema``, creating the schema if missing.

    Args:
        settings: Database URL and schema.
        revision: Target revision (default: the newest).

    Raises:
        ArchiveUnavailableError: PostgreSQL cannot be reached.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["settings"] = settings
    with translate_errors("upgrade"):
        command.upgrade(config, revision)
    logger.info("archive upgraded schema=%s revision=%s", settings.database_schema, revision)


def chunks(items: Sequence[_T], size: int = PAIRS_PER_QUERY) -> Iterator[Sequence[_T]]:
    """Yields: ``items`` in order, ``size`` at a time (the last chunk may be shorter)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Translates SQLAlchemy and psycopg errors into the pipeline's (module docstring).

    Raises:
        ArchiveUnavailableError: The server is unreachable, restarting, or the transaction
            lost a deadlock or serialization conflict (and other server-side failures).
        ArchiveRejectedError: The server refused a value (SQLSTATE class 22 or 23).
        ArchiveSchemaError: A table or column is missing, or access is denied (42, 3F).
    """
    try:
        yield
    except (sa_exc.DBAPIError, psycopg.Error) as exc:
        raise _translated(action, exc) from exc


def _translated(action: str, exc: Exception) -> PipelineError:
    driver = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    invalidated = isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    sqlstate = getattr(driver, "sqlstate", None)
    message = f"archive {action} failed: {type(driver).__name__}: {str(driver).strip()[:300]}"
    if invalidated or isinstance(driver, psycopg.OperationalError | psycopg.InterfaceError):
        return ArchiveUnavailableError(message)
    if sqlstate and sqlstate[:2] in _REJECTED_CLASSES:
        return ArchiveRejectedError(message, sqlstate=sqlstate)
    if sqlstate and sqlstate[:2] in _SCHEMA_CLASSES:
        return ArchiveSchemaError(message, sqlstate=sqlstate)
    return ArchiveUnavailableError(message)
