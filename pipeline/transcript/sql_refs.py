"""What a Semantic SQL query touches and whether it orders its rows (pure, sqlglot).

Semantic SQL is PostgreSQL where each view (or cube) is a table and its members are columns;
measures appear as ``MEASURE(member)`` (field notes, "Semantic data model"). Queries come from
the agent and may be anything, so parsing never raises (not even on SQL nested deeper than
Python's recursion limit): a query sqlglot cannot read touches nothing we can name
(:func:`touched` gives empty tuples) and counts as unordered.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

logger = logging.getLogger(__name__)

DIALECT = "postgres"


@dataclass(frozen=True)
class SqlRefs:
    """Views and members (``view.member``) a query reads, sorted.

    ``ordered`` when its outermost SELECT has ``ORDER BY``.
    """

    views: tuple[str, ...]
    members: tuple[str, ...]
    ordered: bool


NOTHING = SqlRefs(views=(), members=(), ordered=False)


CACHED_QUERIES: Final = 1024
"""Queries whose reading :func:`touched` keeps (the most recently used)."""
CACHED_QUERY_CHARS: Final = 16 * 1024
"""Longer queries are read each time, so the cache holds at most ~16 MiB of query text."""


def touched(sql: str | None) -> SqlRefs:
    """Reads the views and members of a query.

    sqlglot takes about a millisecond per query; the same query text (a regression run asks
    the same questions as many identities) is read once while it stays among the last
    :data:`CACHED_QUERIES` read. :class:`SqlRefs` is immutable, so a reading is shared safely.

    Args:
        sql: The query text (None: nothing).

    Returns:
        Views (tables not defined by a CTE), members as ``view.member`` (unqualified columns
        count for the only view, or are left out when several are joined; a select alias named
        in ORDER BY, GROUP BY or HAVING is not a member), and whether the rows are ordered.
    """
    if not sql or not sql.strip():
        return NOTHING
    if len(sql) > CACHED_QUERY_CHARS:
        return _read(sql)
    return _read_cached(sql)


def _read(sql: str) -> SqlRefs:
    try:
        return _refs(sqlglot.parse_one(sql, read=DIALECT))
    except (SqlglotError, ValueError, RecursionError) as exc:
        # RecursionError: deeply nested SQL (an agent's output may be anything) must not fail
        # the sink's batch, which would then be retried forever.
        logger.debug("sql not parsed error=%s", type(exc).__name__)
        return NOTHING


def _refs(tree: exp.Expr | None) -> SqlRefs:
    if tree is None:
        return NOTHING
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    aliases: dict[str, str] = {}
    views: set[str] = set()
    for table in tree.find_all(exp.Table):
        if table.name and table.name not in ctes:
            views.add(table.name)
            aliases[table.alias_or_name] = table.name
    outputs = {e.alias for e in tree.find_all(exp.Alias) if e.alias}
    members = {m for c in tree.find_all(exp.Column) if (m := _member(c, aliases, views, outputs))}
    return SqlRefs(tuple(sorted(views)), tuple(sorted(members)), _ordered(tree))


_read_cached = functools.lru_cache(maxsize=CACHED_QUERIES)(_read)


def _member(column: exp.Column, aliases: dict[str, str], views: set[str], outputs: set[str]) -> str:
    name = column.name
    if not name:
        return ""
    if column.table:
        view = aliases.get(column.table, column.table)
        return f"{view}.{name}" if view in views else ""
    if name in outputs and column.find_ancestor(exp.Order, exp.Group, exp.Having) is not None:
        return ""  # ORDER BY n / GROUP BY n naming a select alias
    if len(views) != 1:
        return ""
    return f"{next(iter(views))}.{name}"


def _ordered(tree: object) -> bool:
    if isinstance(tree, exp.Query):
        return tree.args.get("order") is not None
    return False


def orders_rows(sql: str | None) -> bool:
    """Returns: True when the query's outermost SELECT has ``ORDER BY`` (row order matters)."""
    return touched(sql).ordered
