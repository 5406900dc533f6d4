"""The allow-list applied to the SQL that DuckDB runs, with what the data model itself adds.

:func:`chat_api.sql.guard.check_executed_sql` parses the compiled DuckDB text again and checks
it; this module gives it the model's part of the allow-list: the physical tables the cubes read
and the functions of the model's own SQL (trusted: written by the model's authors, not by the
question). Computed once per loaded model.
"""

from __future__ import annotations

from sqlglot import exp

from chat_api.semantic.model import SemanticModel
from chat_api.sql.guard import check_executed_sql
from chat_api.sql.relations import DEDUPLICATING_FUNCTIONS


def check_compiled_sql(sql: str, *, model: SemanticModel) -> None:
    """Check the DuckDB text that will run against the guard's allow-list (parsed again).

    Tables allowed: those the model's cubes read; functions: ``ALLOWED_FUNCTIONS``, those
    of the model's own SQL and the compiler's once-per-key aggregates
    (``chat_api.sql.guard.check_executed_sql``).

    Raises:
        SemanticSqlError: the executed text holds anything outside the allow-list.
    """
    tables, functions = _model_allowances(model)
    check_executed_sql(sql, tables=tables, functions=functions)


_ALLOWANCES: dict[int, tuple[SemanticModel, frozenset[str], frozenset[str]]] = {}


def _model_allowances(model: SemanticModel) -> tuple[frozenset[str], frozenset[str]]:
    """Returns: the physical tables and the function names of the model's rendered SQL."""
    cached = _ALLOWANCES.get(id(model))
    if cached is not None and cached[0] is model:
        return cached[1], cached[2]
    rendered = model.rendered
    roots: list[exp.Expr] = [*rendered.sources.values()]
    roots += [r.expression for r in (*rendered.joins.values(), *rendered.dimensions.values())]
    for measure in rendered.measures.values():
        roots += [measure.input.expression] if measure.input else []
        roots += [measure.formula] if measure.formula is not None else []
        roots += [measure.aggregate] if measure.aggregate is not None else []
    tables = frozenset(t.name for root in roots for t in root.find_all(exp.Table))
    functions = DEDUPLICATING_FUNCTIONS | frozenset(
        node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name()
        for root in roots
        for node in root.find_all(exp.Func)
    )
    _ALLOWANCES[id(model)] = (model, tables, functions)
    return tables, functions
