"""The model against the warehouse, at start: every member's SQL must run.

A model can be valid YAML and still name a column the warehouse lacks; that is found here, when
the server starts, with the file and member named, not at the first question that reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from chat_api.errors import ModelError
from chat_api.semantic.model import SemanticModel

RunSql = Callable[[str], Sequence[tuple[Any, ...]]]


def check_members(model: SemanticModel, run: RunSql) -> None:
    """Runs every cube's members once with ``LIMIT 0``, then each alone when that fails.

    Args:
        model: The loaded model.
        run: Runs trusted SQL on the warehouse (``Warehouse.query_raw``).

    Raises:
        ModelError: a cube's table or a member's SQL fails; ``file`` and ``path`` say which,
            the message carries the warehouse's error.
    """
    for cube in model.cubes:
        expressions = _expressions(model, cube)
        try:
            run(_select(model, cube, list(expressions.values())))
        except Exception:  # one query per cube; find the failing member below
            _find_failure(model, cube, expressions, run)


def _expressions(model: SemanticModel, cube: str) -> dict[str, exp.Expr]:
    found: dict[str, exp.Expr] = {}
    for (owner, name), rendered in model.rendered.dimensions.items():
        if owner == cube and rendered.cubes <= {cube}:
            found[name] = rendered.expression
    for (owner, name), measure in model.rendered.measures.items():
        if owner == cube and measure.input is not None and measure.input.cubes <= {cube}:
            found[name] = measure.input.expression
    return found


def cube_select(model: SemanticModel, cube: str, expressions: list[exp.Expr]) -> exp.Select:
    """Returns: ``SELECT <expressions> FROM <the cube's table or SQL> AS "<cube>"``.

    For trusted reads of one cube's own columns (this check, the reader's value index); the
    expressions are the model's rendered SQL, copied. No expression selects ``1``.
    """
    source = model.rendered.sources[cube].copy()
    source.set("alias", exp.TableAlias(this=exp.to_identifier(cube, quoted=True)))
    projections = [e.copy() for e in expressions] or [exp.Literal.number(1)]
    return exp.select(*projections).from_(source)


def _select(model: SemanticModel, cube: str, expressions: list[exp.Expr]) -> str:
    return cube_select(model, cube, expressions).limit(0).sql(dialect="duckdb")


def _find_failure(
    model: SemanticModel, cube: str, expressions: dict[str, exp.Expr], run: RunSql
) -> None:
    file = model.files.get(f"cubes.{cube}", "")
    try:
        run(_select(model, cube, []))
    except Exception as exc:
        raise ModelError(
            f"the cube's table fails in the warehouse: {exc}", file=file, path=f"cubes.{cube}"
        ) from exc
    for name, expression in expressions.items():
        try:
            run(_select(model, cube, [expression]))
        except Exception as exc:
            raise ModelError(
                f"the member's SQL fails in the warehouse: {exc}",
                file=file,
                path=f"cubes.{cube}.{name}",
            ) from exc
