"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from pipeline.archive.engine import create_engine
from pipeline.settings import Settings


@pytest.fixture
def engine(settings: Settings) -> Iterator[sa.Engine]:
    """An engine on the requesting module's ``settings`` (its own schema), disposed after."""
    engine = create_engine(settings)
    yield engine
    engine.dispose()
