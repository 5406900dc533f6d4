"""Alembic environment for the PostgreSQL archive.

The database URL and schema come from :class:`pipeline.settings.Settings`: the instance passed as
``config.attributes["settings"]`` by :func:`pipeline.archive.engine.upgrade`, else one read from the
``CHATSCRIBE_*`` environment (``alembic upgrade head`` by hand). A caller may also pass an open
``config.attributes["connection"]``.

Everything runs in one transaction that first takes an advisory lock (so two processes
upgrading at once take turns), creates the schema if missing and sets ``search_path`` to it for
the transaction only; the migrations use unqualified names, and the version table lives in the
schema too (``version_table_schema``). Online mode only.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool, text

from pipeline.archive.tables import metadata
from pipeline.settings import Settings

LOCK_NAMESPACE = "chatscribe-migrations:"


def _settings() -> Settings:
    given = context.config.attributes.get("settings")
    return given if isinstance(given, Settings) else Settings()


def _run(connection: Connection, schema: str) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table_schema=schema,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": LOCK_NAMESPACE + schema}
        )
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        connection.execute(text(f'SET LOCAL search_path TO "{schema}"'))
        context.run_migrations()


def run_migrations_online() -> None:
    """Runs the migrations against the settings' database and schema."""
    settings = _settings()
    given = context.config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given, settings.database_schema)
        return
    url = settings.database_url.get_secret_value()
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection, settings.database_schema)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("chatscribe migrations run online only (alembic upgrade head)")
run_migrations_online()
