"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from pipeline.archive.engine import create_engine, upgrade
from pipeline.settings import Settings
from tests.stack_support import pg_schema_made


@pytest.fixture
def settings(database_url: str, pg_schema: str) -> Settings:
    """The test's settings: the shared PostgreSQL, a schema of its own (modules may override)."""
    return Settings(database_url=database_url, database_schema=pg_schema)


@pytest.fixture
def bare_settings(settings: Settings, pg_conninfo: str) -> Iterator[Settings]:
    """``settings`` on a second schema of its own that exists and is never migrated."""
    with pg_schema_made(pg_conninfo, f"{settings.database_schema}_bare") as bare:
        yield settings.model_copy(update={"database_schema": bare})


@pytest.fixture
def archive_schema(settings: Settings) -> None:
    """Migrates the test's schema to the latest revision, as ``chatscribe db upgrade`` does.

    For modules that only need a migrated archive: ``pytest.mark.usefixtures("archive_schema")``
    with :func:`engine` (the engine connects lazily, after this ran).
    """
    upgrade(settings)


@pytest.fixture
def engine(settings: Settings) -> Iterator[sa.Engine]:
    """An engine on the requesting module's ``settings`` (its own schema), disposed after."""
    engine = create_engine(settings)
    yield engine
    engine.dispose()
