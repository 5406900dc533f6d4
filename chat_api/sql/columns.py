"""Column types as the hosted SQL tool reports them (``String``, ``Int64``, ``Double``, ...).

The hosted SQL tool's result carries ``schema: [{name, column_type}]`` (``field-notes.md``
§ "Tool names and payloads"). ``hosted_column_type`` maps a DuckDB type name to that vocabulary;
``infer_column_types`` predicts the types of a compiled query without running it, from the
physical schema of ``chat_api.sql.data`` and sqlglot's type annotation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types

from chat_api.semantic.templates import PHYSICAL_SCHEMA_NAME
from chat_api.sql.data import PHYSICAL_SCHEMA

if TYPE_CHECKING:
    from chat_api.sql.relations import ViewUse

logger = logging.getLogger(__name__)

ColumnType = Literal["String", "Int64", "Double", "Timestamp", "Boolean"]

_INTEGER_WORDS = ("INT", "SERIAL")
_DOUBLE_WORDS = ("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC")
_TIME_WORDS = ("TIMESTAMP", "DATE", "TIME")
_MEMBER_TYPES: Mapping[str, ColumnType] = {
    "string": "String",
    "number": "Double",
    "time": "Timestamp",
    "boolean": "Boolean",
}


def hosted_column_type(type_name: str) -> ColumnType:
    """Map a DuckDB (or sqlglot) type name such as ``BIGINT`` or ``DECIMAL(10,2)``.

    Integers of any width are ``Int64``; floating and decimal numbers ``Double``; dates, times
    and timestamps ``Timestamp``; ``BOOLEAN`` ``Boolean``; everything else ``String``.
    """
    upper = type_name.upper()
    if upper.startswith("BOOL"):
        return "Boolean"
    if any(word in upper for word in _DOUBLE_WORDS):
        return "Double"
    if any(word in upper for word in _INTEGER_WORDS):
        return "Int64"
    if any(word in upper for word in _TIME_WORDS) and "INTERVAL" not in upper:
        return "Timestamp"
    return "String"


def infer_column_types(
    tree: exp.Expr,
    uses: Sequence[ViewUse],
    *,
    schema: Mapping[str, Mapping[str, str]] = PHYSICAL_SCHEMA,
) -> tuple[tuple[str, ColumnType], ...]:
    """Predict ``(name, column_type)`` for each output column of a compiled query.

    Args:
        tree: The compiled DuckDB tree (not modified).
        uses: The view occurrences of the query, for the fallback.
        schema: Physical table -> column -> DuckDB type, in schema ``main``.

    Returns:
        One pair per output column. When sqlglot cannot type an expression, a plain reference
        to a view member falls back to its member type (``number`` -> ``Double``), anything
        else to ``String``.
    """
    query = tree.copy()
    try:
        annotated = annotate_types(
            query, schema={PHYSICAL_SCHEMA_NAME: dict(schema)}, dialect="duckdb"
        )
    except (SqlglotError, KeyError, ValueError) as exc:
        logger.debug("type annotation failed error=%s", exc)
        annotated = query
    fallback = _member_types(uses)
    pairs: list[tuple[str, ColumnType]] = []
    for projection in _first_select(annotated).expressions:
        data_type = projection.type
        known = data_type is not None and not data_type.is_type(exp.DataType.Type.UNKNOWN)
        name = projection.alias_or_name
        inner = projection.unalias()
        if known:
            pairs.append((name, hosted_column_type(data_type.sql(dialect="duckdb"))))
        elif isinstance(inner, exp.Column) and (inner.table, inner.name) in fallback:
            pairs.append((name, fallback[inner.table, inner.name]))
        else:
            pairs.append((name, "String"))
    return tuple(pairs)


def _member_types(uses: Sequence[ViewUse]) -> dict[tuple[str, str], ColumnType]:
    return {
        (use.alias, member.name): _MEMBER_TYPES[member.type]
        for use in uses
        for member in use.view.members
        if member.kind == "dimension"
    }


def _first_select(tree: exp.Expr) -> exp.Select:
    node = tree
    while isinstance(node, exp.SetOperation | exp.Subquery):
        node = node.this if isinstance(node, exp.Subquery) else node.left
    assert isinstance(node, exp.Select)
    return node
