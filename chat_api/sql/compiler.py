"""Semantic SQL -> DuckDB SQL over the physical tables, with the user's access policies applied.

Semantic SQL (Cube documentation, "SQL API" and "Querying views"; ``field-notes.md``
§ "Semantic data model") is Postgres-dialect SQL where each view is a table and its members are
columns:

- ``SELECT``, ``WITH`` (not recursive), subqueries in ``FROM``/``WHERE``/``SELECT``, joins
  between views, CTEs and subqueries, ``UNION``/``INTERSECT``/``EXCEPT``, ``WHERE``,
  ``GROUP BY`` (expressions, output names or positions), ``HAVING``, ``ORDER BY`` (expressions,
  output names or positions), ``LIMIT``/``OFFSET``, ``DISTINCT``, window functions, ``CASE``,
  casts and the functions of ``chat_api.sql.guard.ALLOWED_FUNCTIONS`` (``DATE_TRUNC`` included).
- Dimensions are referenced bare (``carrier``) or qualified (``flights.carrier``, ``f.carrier``);
  ``SELECT *`` over a view selects its visible dimensions.
- A measure is only usable as ``MEASURE(member)``, which aggregates it by its own type. Plain
  aggregates (``COUNT(*)``, ``AVG(dep_delay)``) over dimensions are ordinary SQL.
- A query that aggregates must group by every selected dimension.

Every view becomes a subquery over the physical tables with the user's row filter inside it
(``chat_api.sql.relations``), so CTEs, subqueries and set operations over a view see filtered rows
only. Refusals are ``SemanticSqlError`` with the codes listed in ``chat_api.errors``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from chat_api.errors import SemanticSqlError
from chat_api.semantic.model import Member, SemanticModel
from chat_api.sql.columns import ColumnType, infer_column_types
from chat_api.sql.executed import check_compiled_sql
from chat_api.sql.guard import check_grouping, parse_query
from chat_api.sql.policies import UserContext, resolve_access
from chat_api.sql.relations import ViewUse, aggregate, build_relation

OUTPUT_DIALECT = "duckdb"
_SCOPE_ORDER = ("expressions", "distinct", "joins", "where", "group", "having", "qualify",
                "windows", "order", "limit", "offset")  # fmt: skip
_ALIAS_CONTEXTS = frozenset({"group", "having", "order"})

__all__ = ["ColumnType", "CompiledQuery", "compile_semantic_sql"]


@dataclass(frozen=True)
class CompiledQuery:
    """A Semantic SQL query compiled for one user.

    Attributes:
        sql: DuckDB SQL over the physical tables of schema ``main``, row filters included.
        views: The views the query reads, in first-use order.
        members: Qualified names (``flights.carrier``) of the members it reads.
        columns: ``(name, column_type)`` per output column; ``column_type`` is one of
            ``String``, ``Int64``, ``Double``, ``Timestamp``, ``Boolean`` (inferred from the
            model and the physical types; ``Warehouse.run`` reports DuckDB's actual types).
    """

    sql: str
    views: tuple[str, ...]
    members: tuple[str, ...]
    columns: tuple[tuple[str, ColumnType], ...]


def compile_semantic_sql(sql: str, *, model: SemanticModel, user: UserContext) -> CompiledQuery:
    """Compile one Semantic SQL query for one user.

    Args:
        sql: The query, Postgres dialect (see the module docstring for the subset).
        model: The loaded semantic model.
        user: Whose access policies apply.

    Returns:
        The DuckDB SQL with the views, members and output columns it uses.

    Raises:
        SemanticSqlError: the query is refused; ``code`` is one of ``parse_error``,
            ``multiple_statements``, ``not_select``, ``unsupported_syntax``,
            ``forbidden_function``, ``forbidden_name``, ``unknown_view``, ``unknown_member``,
            ``ambiguous_member``, ``hidden_member``, ``access_denied`` (an
            ``AccessDeniedError``), ``not_a_measure``, ``measure_outside_measure`` or
            ``missing_group_by``.
    """
    tree = parse_query(sql)
    compiler = _Compiler(model, user)
    compiler.query(tree, {}, None)
    compiler.check_tables(tree)
    executed = tree.sql(dialect=OUTPUT_DIALECT, identify=True, comments=False)
    check_compiled_sql(executed, model=model)
    return CompiledQuery(
        sql=executed,
        views=tuple(dict.fromkeys(use.view.name for use in compiler.uses)),
        members=tuple(compiler.members),
        columns=infer_column_types(tree, compiler.uses),
    )


@dataclass
class _Source:
    """A relation in a FROM clause: a view occurrence, a CTE or a derived table."""

    alias: str
    columns: tuple[str, ...]
    use: ViewUse | None = None


@dataclass
class _Scope:
    sources: dict[str, _Source]
    parent: _Scope | None
    aliases: dict[str, int] = field(default_factory=dict)


class _Compiler:
    def __init__(self, model: SemanticModel, user: UserContext) -> None:
        self.model = model
        self.user = user
        self.uses: list[ViewUse] = []
        self.members: dict[str, None] = {}
        self._generated: set[int] = set()
        self._trusted_tables: set[int] = set()

    def query(
        self, node: exp.Expr, ctes: Mapping[str, tuple[str, ...]], parent: _Scope | None
    ) -> tuple[str, ...]:
        """Compile a query node in place; returns its output column names."""
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes, parent)
        ctes = self._with(node, ctes)
        if isinstance(node, exp.SetOperation):
            columns = self.query(node.left, ctes, parent)
            self.query(node.right, ctes, parent)
            return columns
        if isinstance(node, exp.Select):
            return self._select(node, ctes, parent)
        raise SemanticSqlError("unsupported_syntax", f"{node.key.upper()} is not supported here")

    def check_tables(self, tree: exp.Expr) -> None:
        """Defence in depth: every table left in the output is one we put there or a CTE."""
        for table in tree.find_all(exp.Table):
            if id(table) not in self._trusted_tables:
                raise SemanticSqlError("unknown_view", f"{table.sql()} is not a view of the model")

    def _with(
        self, node: exp.Expr, ctes: Mapping[str, tuple[str, ...]]
    ) -> Mapping[str, tuple[str, ...]]:
        with_ = node.args.get("with_")
        scope = dict(ctes)
        for cte in with_.expressions if with_ else ():
            name = cte.alias
            if name in self.model.views or name in self.model.cubes:
                raise SemanticSqlError(
                    "forbidden_name", f"CTE name {name} is the name of a view; choose another"
                )
            scope[name] = _renamed(self.query(cte.this, scope, None), cte.args.get("alias"))
        return scope

    def _select(
        self, select: exp.Select, ctes: Mapping[str, tuple[str, ...]], parent: _Scope | None
    ) -> tuple[str, ...]:
        scope = _Scope(self._sources(select, ctes), parent)
        self._expand_stars(select, scope)
        _name_projections(select)
        scope.aliases = {p.alias: i for i, p in enumerate(select.expressions) if p.alias}
        for nested in _nested_queries(select):
            self.query(nested, ctes, scope)
        self._replace_measures(select, scope)
        self._resolve_columns(select, scope)
        self._resolve_using(select, scope)
        check_grouping(select)
        for source in scope.sources.values():
            if source.use is not None:
                relation = build_relation(self.model, source.use)
                self._trusted_tables.update(id(t) for t in relation.find_all(exp.Table))
                source.use.table.replace(relation)
        return tuple(p.alias_or_name for p in select.expressions)

    def _sources(
        self, select: exp.Select, ctes: Mapping[str, tuple[str, ...]]
    ) -> dict[str, _Source]:
        from_ = select.args.get("from_")
        items = [from_.this] if from_ else []
        items += [join.this for join in select.args.get("joins") or ()]
        sources: dict[str, _Source] = {}
        for item in items:
            source = self._source(item, ctes)
            if source.alias in sources:
                raise SemanticSqlError(
                    "ambiguous_member", f"{source.alias} appears twice in FROM; give each an alias"
                )
            sources[source.alias] = source
        return sources

    def _source(self, item: exp.Expr, ctes: Mapping[str, tuple[str, ...]]) -> _Source:
        if isinstance(item, exp.Subquery):
            if not item.alias:
                raise SemanticSqlError("unsupported_syntax", "a subquery in FROM needs an alias")
            columns = self.query(item.this, ctes, None)
            return _Source(item.alias, _renamed(columns, item.args.get("alias")))
        if not isinstance(item, exp.Table):
            raise SemanticSqlError(
                "unsupported_syntax", "FROM may only name views, CTEs and subqueries"
            )
        name, alias = item.name, item.alias or item.name
        if (
            item.args.get("db")
            or item.args.get("catalog")
            or name not in {*ctes, *self.model.views}
        ):
            raise SemanticSqlError(
                "unknown_view",
                f"{item.sql(dialect='postgres')} is not a view; views: "
                f"{', '.join(sorted(self.model.views))}",
            )
        if name in ctes:
            self._trusted_tables.add(id(item))
            return _Source(alias, ctes[name])
        if isinstance(item.args.get("alias"), exp.TableAlias) and item.args["alias"].columns:
            raise SemanticSqlError("unsupported_syntax", "a view alias cannot rename columns")
        access = resolve_access(self.model, name, self.user).require()
        use = ViewUse(self.model.view(name), access, alias, item)
        self.uses.append(use)
        return _Source(alias, tuple(m.name for m in use.view.members), use)

    def _expand_stars(self, select: exp.Select, scope: _Scope) -> None:
        """``*`` and ``alias.*`` become the visible dimensions, less those of ``EXCLUDE``."""
        projections: list[exp.Expr] = []
        for projection in select.expressions:
            if isinstance(projection, exp.Star):
                star, targets = projection, list(scope.sources.values())
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                star, targets = projection.this, [self._source_named(scope, projection.table)]
            else:
                projections.append(projection)
                continue
            excluded = _star_excluded(star, targets)
            for source in targets:
                projections.extend(c for c in self._star_columns(source) if c.name not in excluded)
        select.set("expressions", projections)

    def _star_columns(self, source: _Source) -> Iterator[exp.Expr]:
        for name in source.columns:
            if source.use is None:
                yield exp.column(name, table=source.alias, quoted=True)
                continue
            member = source.use.view.member(name)
            if member and member.kind == "dimension" and name in source.use.access.visible:
                yield exp.column(name, table=source.alias, quoted=True)

    def _source_named(self, scope: _Scope, alias: str) -> _Source:
        if alias not in scope.sources:
            raise SemanticSqlError("unknown_view", f"{alias} is not a view, CTE or alias here")
        return scope.sources[alias]

    def _replace_measures(self, select: exp.Select, scope: _Scope) -> None:
        calls = [
            node for _, node in _scope_nodes(select)
            if isinstance(node, exp.Anonymous) and node.name.upper() == "MEASURE"
        ]  # fmt: skip
        for call in calls:
            arguments = call.expressions
            if len(arguments) != 1 or not isinstance(arguments[0], exp.Column):
                raise SemanticSqlError(
                    "not_a_measure", "MEASURE takes one measure, e.g. MEASURE(count)"
                )
            source, member = self._lookup(arguments[0], scope, correlated=False)
            if member is None or member.kind != "measure":
                raise SemanticSqlError(
                    "not_a_measure",
                    f"{arguments[0].sql()} is not a measure; MEASURE() takes one of "
                    f"{_names(source, 'measure')}",
                )
            assert source.use is not None  # a member always comes from a view
            expression = aggregate(self.model, source.use, member.cube, member.cube_member)
            self._generated.update(id(c) for c in expression.find_all(exp.Column))
            call.replace(expression)

    def _resolve_columns(self, select: exp.Select, scope: _Scope) -> None:
        columns = [
            (key, node) for key, node in _scope_nodes(select) if isinstance(node, exp.Column)
        ]
        for key, column in columns:
            if id(column) in self._generated or isinstance(column.this, exp.Star):
                continue
            if key in _ALIAS_CONTEXTS and not column.table and column.name in scope.aliases:
                _replace_alias(select, column, scope.aliases[column.name], key)
                continue
            source, member = self._lookup(column, scope, correlated=True)
            if member is not None and member.kind == "measure":
                raise SemanticSqlError(
                    "measure_outside_measure",
                    f"{member.name} is a measure of view {member.view}: aggregate it with "
                    f"MEASURE({member.name}) (and GROUP BY the dimensions you select)",
                )
            resolved = exp.column(column.name, table=source.alias, quoted=True)
            self._generated.add(id(resolved))
            column.replace(resolved)

    def _resolve_using(self, select: exp.Select, scope: _Scope) -> None:
        for join in select.args.get("joins") or ():
            for identifier in join.args.get("using") or ():
                for source in scope.sources.values():
                    if identifier.name in source.columns:
                        self._lookup(
                            exp.column(identifier.name, table=source.alias), scope, correlated=False
                        )

    def _lookup(
        self, column: exp.Column, scope: _Scope, *, correlated: bool
    ) -> tuple[_Source, Member | None]:
        name, table = column.name, column.table
        if column.args.get("db") or column.args.get("catalog"):
            raise SemanticSqlError("unknown_member", f"{column.sql()} is not a member reference")
        current: _Scope | None = scope
        while current is not None:
            if table and table in current.sources:
                return self._member(current.sources[table], name)
            hits = [s for s in current.sources.values() if not table and name in s.columns]
            if len(hits) > 1:
                views = ", ".join(s.alias for s in hits)
                raise SemanticSqlError("ambiguous_member", f"{name} is in {views}: qualify it")
            if hits:
                return self._member(hits[0], name)
            current = current.parent if correlated else None
        if table:
            raise SemanticSqlError(
                "unknown_view", f"{table} is not a view, CTE or alias in this query"
            )
        known = [n for s in scope.sources.values() for n in _visible(s)]
        hint = difflib.get_close_matches(name, known, n=3)
        raise SemanticSqlError(
            "unknown_member",
            f"no member {name} in {', '.join(scope.sources) or 'this query'}"
            + (f"; did you mean {', '.join(hint)}?" if hint else ""),
        )

    def _member(self, source: _Source, name: str) -> tuple[_Source, Member | None]:
        if source.use is None:
            if name not in source.columns:
                raise SemanticSqlError("unknown_member", f"{source.alias} has no column {name}")
            return source, None
        member = source.use.view.member(name)
        if member is None or name not in source.use.access.visible:
            if member is not None and member.public:
                raise SemanticSqlError(
                    "hidden_member", f"{member.qualified} is not visible to this user"
                )
            hint = difflib.get_close_matches(name, list(_visible(source)), n=3)
            raise SemanticSqlError(
                "unknown_member",
                f"view {source.use.view.name} has no member {name}"
                + (f"; did you mean {', '.join(hint)}?" if hint else ""),
            )
        self.members[member.qualified] = None
        if member.kind == "dimension":
            source.use.dimensions[name] = None
        return source, member


def _star_excluded(star: exp.Star, targets: list[_Source]) -> set[str]:
    """The names ``* EXCLUDE (...)`` leaves out; ``REPLACE``/``RENAME``/``ILIKE`` are refused.

    Raises:
        SemanticSqlError: ``unsupported_syntax`` for the other modifiers, ``unknown_member``
            for an excluded name that no target shows.
    """
    for modifier in ("replace", "rename", "ilike"):
        if star.args.get(modifier):
            raise SemanticSqlError(
                "unsupported_syntax",
                f"SELECT * {modifier.upper()} is not supported: select the columns by name "
                "and write the expression you want with an alias",
            )
    excluded = {column.name for column in star.args.get("except_") or ()}
    shown = {name for source in targets for name in _visible(source)}
    unknown = sorted(excluded - shown)
    if unknown:
        raise SemanticSqlError(
            "unknown_member", f"EXCLUDE names no column of the query: {', '.join(unknown)}"
        )
    return excluded


def _visible(source: _Source) -> Iterator[str]:
    for name in source.columns:
        if source.use is None or name in source.use.access.visible:
            yield name


def _names(source: _Source, kind: Literal["dimension", "measure"]) -> str:
    if source.use is None:
        return "the measures of a view"
    view = source.use.view
    return ", ".join(
        m.name for m in view.members if m.kind == kind and m.name in source.use.access.visible
    )


def _renamed(columns: tuple[str, ...], alias: exp.Expr | None) -> tuple[str, ...]:
    names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    if names and len(names) != len(columns):
        raise SemanticSqlError("unsupported_syntax", "the column list does not match the query")
    return tuple(names) or columns


def _name_projections(select: exp.Select) -> None:
    """Give expressions without an alias a stable output name: ``MEASURE(x)`` is ``x``."""
    named: list[exp.Expr] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Alias | exp.Column):
            named.append(projection)
            continue
        is_measure = isinstance(projection, exp.Anonymous) and projection.name.upper() == "MEASURE"
        argument = projection.expressions[0] if is_measure and projection.expressions else None
        name = argument.name if isinstance(argument, exp.Column) else projection.sql("postgres")
        named.append(exp.alias_(projection, name, quoted=True))
    select.set("expressions", named)


def _replace_alias(select: exp.Select, column: exp.Column, index: int, key: str) -> None:
    """Point a GROUP BY/ORDER BY/HAVING reference to an output name at the projection."""
    parent = column.parent
    whole_item = isinstance(parent, exp.Group) or (
        isinstance(parent, exp.Ordered) and isinstance(parent.parent, exp.Order)
    )
    if whole_item and key != "having":
        column.replace(exp.Literal.number(index + 1))
        return
    column.replace(exp.paren(select.expressions[index].unalias().copy()))


def _scope_nodes(select: exp.Select) -> Iterator[tuple[str, exp.Expr]]:
    """Every node of this SELECT's own scope with its clause name; nested queries excluded."""
    for key in _SCOPE_ORDER:
        value = select.args.get(key)
        items = value if isinstance(value, list) else [value] if value is not None else []
        for item in items:
            roots = [item.args.get("on")] if key == "joins" else [item]
            for root in roots:
                if isinstance(root, exp.Expr):
                    yield from ((key, node) for node in _walk_scope(root))


def _walk_scope(root: exp.Expr) -> Iterator[exp.Expr]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, exp.Query):
            continue
        stack.extend(reversed(list(node.iter_expressions())))


def _nested_queries(select: exp.Select) -> list[exp.Expr]:
    return [node for _, node in _scope_nodes(select) if isinstance(node, exp.Query)]
