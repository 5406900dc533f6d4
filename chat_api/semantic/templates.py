"""Cube SQL templates rendered once into sqlglot expressions over the physical tables.

Member, join and measure-filter SQL in the model is DuckDB SQL with Cube's references
(Cube documentation, "Data modeling › Syntax › References"):

- ``{CUBE}`` or ``{this_cube}``: the cube's table alias; ``{CUBE}.column`` a physical column.
- ``{member}``, ``{CUBE.member}`` or ``{this_cube.member}``: another member of the same cube.
- ``{other_cube.member}``: a member of another cube (the view must join that cube);
  ``{other_cube}`` alone: its alias (used in join conditions).
- a bare column (``carrier``) is a column of the cube's own table.

Every cube is aliased by its name in the compiled SQL, so a rendered expression such as
``"airlines"."name"`` is valid in any FROM clause that joins the cube under that alias. Tables
are qualified with schema ``main`` so that a query's CTE can never shadow them.

Measures render to a row-level *input* (their ``sql``, wrapped in ``CASE WHEN <filters>``) and
an aggregation. A ``number`` measure is either a formula over other measures of its cube, held
as placeholder columns ``"__measure__"."<name>"``, or, when its ``sql`` names no measure, one
aggregate function over a row-level expression: Cube's way to write a median or a percentile
(``MEDIAN({CUBE}.arr_delay)``, ``QUANTILE_CONT({CUBE}.arr_delay, 0.9)``; Cube documentation,
"Measures › type: number"). Its input is the aggregate's first argument; the aggregate itself is
kept as a template over the placeholder column ``"__measure__"."__input__"``. Any other
expression of aggregates over row-level expressions (Cube runs a ``number`` measure's SQL as
written: ``SUM({CUBE}.a * {CUBE}.b) / NULLIF(SUM({CUBE}.b), 0)``) becomes a formula over one
hidden part per aggregate call, each part such an aggregate measure (:data:`PART_PREFIX`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from chat_api.errors import ModelError

if TYPE_CHECKING:
    from chat_api.semantic.cube_schema import Cube, Measure
    from chat_api.semantic.model import ResolvedView

PHYSICAL_SCHEMA_NAME = "main"
MEASURE_PLACEHOLDER = "__measure__"
INPUT_PLACEHOLDER = "__input__"
"""Column (of table :data:`MEASURE_PLACEHOLDER`) standing for an aggregate measure's input."""
PART_PREFIX = "__part__"
"""Name prefix of the hidden aggregate parts of a ``number`` measure (never a Cube member)."""
_REFERENCE = re.compile(r"\{\s*([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?\s*\}")


@dataclass(frozen=True)
class RenderedSql:
    """A physical expression and the cube aliases it reads (the owning cube included)."""

    expression: exp.Expr
    cubes: frozenset[str]


@dataclass(frozen=True)
class RenderedMeasure:
    """How to aggregate a measure.

    ``kind`` is the measure type. ``input`` is the row-level value to aggregate (``None`` for a
    plain ``count``, which counts rows). ``formula`` (``number`` measures only) is an expression
    over placeholder columns ``"__measure__"."<measure>"`` naming other measures of the cube.
    ``aggregate`` (``number`` measures written as one aggregate, module docstring) is that
    aggregate over the placeholder column ``"__measure__"."__input__"``.
    """

    kind: str
    input: RenderedSql | None
    formula: exp.Expr | None = None
    aggregate: exp.Expr | None = None
    parts: Mapping[str, RenderedMeasure] = field(default_factory=dict)
    """Hidden aggregate measures the formula names (module docstring), by part name."""

    @property
    def formula_measures(self) -> tuple[str, ...]:
        """The measures a ``number`` measure's formula refers to."""
        if self.formula is None:
            return ()
        columns = self.formula.find_all(exp.Column)
        return tuple(dict.fromkeys(c.name for c in columns if c.table == MEASURE_PLACEHOLDER))


@dataclass(frozen=True)
class RenderedModel:
    """Physical SQL of every cube: its source, its joins, its dimensions and its measures."""

    sources: Mapping[str, exp.Expr]
    joins: Mapping[tuple[str, str], RenderedSql]
    dimensions: Mapping[tuple[str, str], RenderedSql]
    measures: Mapping[tuple[str, str], RenderedMeasure]


def render_model(
    cubes: Mapping[str, Cube], views: Mapping[str, ResolvedView], files: Mapping[str, str]
) -> RenderedModel:
    """Render every cube's SQL and check each view's members only need cubes it joins.

    Raises:
        ModelError: a template names no cube or member, a reference is circular, SQL does not
            parse, or a view member needs a cube outside the view's join paths.
    """
    renderer = _Renderer(cubes, files)
    dimensions = {
        (cube.name, d.name): renderer.dimension(cube.name, d.name, ())
        for cube in cubes.values()
        for d in cube.dimensions
    }
    measures: dict[tuple[str, str], RenderedMeasure] = {}
    for cube in cubes.values():
        for m in cube.measures:
            measure = measures[cube.name, m.name] = renderer.measure(cube, m)
            measures.update({(cube.name, name): part for name, part in measure.parts.items()})
    joins = {
        (cube.name, join.name): renderer.join(cube, join.name, join.sql)
        for cube in cubes.values()
        for join in cube.joins
    }
    rendered = RenderedModel(
        sources=MappingProxyType({name: _source(cube, files) for name, cube in cubes.items()}),
        joins=MappingProxyType(joins),
        dimensions=MappingProxyType(dimensions),
        measures=MappingProxyType(measures),
    )
    for view in views.values():
        _check_view(view, rendered, files.get(f"views.{view.name}", ""))
    return rendered


def member_cubes(rendered: RenderedModel, cube: str, member: str) -> frozenset[str]:
    """The cube aliases a dimension or measure reads (formula measures: those of their inputs)."""
    if (cube, member) in rendered.dimensions:
        return rendered.dimensions[cube, member].cubes
    measure = rendered.measures[cube, member]
    needed = {cube} | (set(measure.input.cubes) if measure.input else set())
    for name in measure.formula_measures:
        needed |= member_cubes(rendered, cube, name)
    return frozenset(needed)


class _Renderer:
    def __init__(self, cubes: Mapping[str, Cube], files: Mapping[str, str]) -> None:
        self._cubes = cubes
        self._files = files
        self._cache: dict[tuple[str, str], RenderedSql] = {}

    def dimension(self, cube: str, name: str, stack: tuple[tuple[str, str], ...]) -> RenderedSql:
        key = (cube, name)
        if key in stack:
            chain = " -> ".join(f"{c}.{m}" for c, m in (*stack, key))
            raise self._error(cube, f"circular reference {chain}", name)
        if key not in self._cache:
            definition = self._cubes[cube].find(name)
            text = (
                definition.sql if definition is not None and definition.sql else f"{{CUBE}}.{name}"
            )
            self._cache[key] = self.render(cube, text, (*stack, key), where=name)
        return self._cache[key]

    def measure(self, cube: Cube, measure: Measure) -> RenderedMeasure:
        if measure.type == "number":
            if not measure.sql:
                raise self._error(cube.name, "a number measure needs sql", measure.name)
            if not self._names_a_measure(cube, measure.sql):
                return self._aggregate_measure(cube, measure, measure.sql)
            formula = self.render(cube.name, measure.sql, (), where=measure.name, formula=True)
            return RenderedMeasure("number", None, formula.expression)
        value = self.render(cube.name, measure.sql, (), where=measure.name) if measure.sql else None
        if measure.filters:
            conditions = [
                self.render(cube.name, f.sql, (), where=measure.name) for f in measure.filters
            ]
            condition = exp.and_(*(c.expression for c in conditions))
            then = value.expression if value else exp.Literal.number(1)
            cubes = frozenset().union(*(c.cubes for c in conditions), value.cubes if value else ())
            value = RenderedSql(exp.Case(ifs=[exp.If(this=condition, true=then)]), cubes)
        return RenderedMeasure(measure.type, value)

    def _target(self, cube: str, first: str, second: str | None) -> tuple[str, str | None]:
        """Returns: the cube and member that ``{first.second}`` or ``{first}`` names.

        Read in ``cube``'s SQL; the member is None when the reference is a cube's alias.
        """
        if second is None and first not in ("CUBE", cube) and self._cubes[cube].find(first):
            return cube, first
        return (cube if first in ("CUBE", cube) else first), second

    def _names_a_measure(self, cube: Cube, text: str) -> bool:
        """Whether ``text`` references a measure of ``cube`` (read as :meth:`_reference` does)."""
        measures = {m.name for m in cube.measures}
        for match in _REFERENCE.finditer(text):
            owner, name = self._target(cube.name, match.group(1), match.group(2))
            if owner == cube.name and name in measures:
                return True
        return False

    def _aggregate_measure(self, cube: Cube, measure: Measure, text: str) -> RenderedMeasure:
        """A ``number`` measure written with aggregates over row-level expressions.

        One aggregate call is the measure itself; an expression of several is a formula over
        one hidden part per call (module docstring).

        Raises:
            ModelError: an aggregate call's first argument reads no column or holds another
                aggregate, another argument reads a column, or a column is read outside any
                aggregate.
        """
        rendered = self.render(cube.name, text, (), where=measure.name)
        if isinstance(rendered.expression, exp.AggFunc):
            return self._one_aggregate(cube, measure, rendered.expression, rendered.cubes)
        formula = rendered.expression.copy()
        calls = [
            node
            for node in formula.find_all(exp.AggFunc)
            if not any(isinstance(p, exp.AggFunc) for p in _ancestors(node))
        ]
        parts: dict[str, RenderedMeasure] = {}
        for index, call in enumerate(calls):
            name = f"{PART_PREFIX}{measure.name}__{index}"
            parts[name] = self._one_aggregate(cube, measure, call.copy(), rendered.cubes)
            call.replace(exp.column(name, table=MEASURE_PLACEHOLDER, quoted=True))
        if not calls or any(c.table != MEASURE_PLACEHOLDER for c in formula.find_all(exp.Column)):
            raise self._error(
                cube.name,
                "a number measure is a formula over measures of its cube or aggregates over "
                "row-level expressions (MEDIAN({CUBE}.x), SUM({CUBE}.a) / SUM({CUBE}.b)); "
                "a column is read outside any aggregate",
                measure.name,
            )
        return RenderedMeasure("number", None, formula, parts=MappingProxyType(parts))

    def _one_aggregate(
        self, cube: Cube, measure: Measure, call: exp.AggFunc, cubes: frozenset[str]
    ) -> RenderedMeasure:
        argument = call.this
        if isinstance(call, exp.Count) and (argument is None or isinstance(argument, exp.Star)):
            return RenderedMeasure("count", None)  # COUNT(*): the rows
        if isinstance(call, exp.Count) and isinstance(argument, exp.Distinct):
            (counted,) = argument.expressions or [None]
            if isinstance(counted, exp.Expr) and counted.find(exp.AggFunc) is None:
                return RenderedMeasure("count_distinct", RenderedSql(counted, cubes))
        others = [v for k, v in call.args.items() if k != "this"]
        if (
            not isinstance(argument, exp.Expr)
            or isinstance(argument, exp.Distinct)
            or argument.find(exp.Column) is None
            or argument.find(exp.AggFunc) is not None
            or any(isinstance(o, exp.Expr) and o.find(exp.Column) for o in others)
        ):
            raise self._error(
                cube.name,
                f"{call.sql(dialect='duckdb')} is not an aggregate function over a row-level "
                "expression (MEDIAN({CUBE}.x), COUNT(*), COUNT(DISTINCT {CUBE}.x))",
                measure.name,
            )
        template = call.copy()
        template.set("this", exp.column(INPUT_PLACEHOLDER, table=MEASURE_PLACEHOLDER, quoted=True))
        return RenderedMeasure("number", RenderedSql(argument, cubes), aggregate=template)

    def join(self, cube: Cube, target: str, text: str) -> RenderedSql:
        if target not in self._cubes:
            raise self._error(cube.name, f"join to unknown cube {target}", f"joins.{target}")
        rendered = self.render(cube.name, text, (), where=f"joins.{target}")
        if not rendered.cubes <= {cube.name, target}:
            raise self._error(cube.name, "a join may only read its two cubes", f"joins.{target}")
        return rendered

    def render(
        self,
        cube: str,
        text: str,
        stack: tuple[tuple[str, str], ...],
        *,
        where: str,
        formula: bool = False,
    ) -> RenderedSql:
        cubes: set[str] = {cube}

        def substitute(match: re.Match[str]) -> str:
            first, second = match.group(1), match.group(2)
            sql, used = self._reference(cube, first, second, stack, formula=formula, where=where)
            cubes.update(used)
            return sql

        try:
            expression = sqlglot.parse_one(_REFERENCE.sub(substitute, text), read="duckdb")
        except sqlglot.errors.ParseError as exc:
            raise self._error(cube, f"SQL does not parse: {exc}", where) from exc
        for column in expression.find_all(exp.Column):
            if not column.table:
                column.set("table", exp.to_identifier(cube, quoted=True))
        return RenderedSql(expression, frozenset(cubes))

    def _reference(
        self,
        cube: str,
        first: str,
        second: str | None,
        stack: tuple[tuple[str, str], ...],
        *,
        formula: bool,
        where: str,
    ) -> tuple[str, set[str]]:
        owner, name = self._target(cube, first, second)
        if owner not in self._cubes:
            raise self._error(cube, f"{{{first}}} names no cube or member", where)
        if name is None:
            return _quoted(owner), {owner}
        definition = self._cubes[owner].find(name)
        if definition is None:
            if owner != cube:
                raise self._error(cube, f"cube {owner} has no member {name}", where)
            return f"{_quoted(owner)}.{_quoted(name)}", {owner}
        is_measure = any(m.name == name for m in self._cubes[owner].measures)
        if is_measure != formula or (formula and owner != cube):
            problem = (
                "a number measure may only reference measures of its cube"
                if formula
                else (f"{owner}.{name} is a measure; only number measures may reference measures")
            )
            raise self._error(cube, problem, where)
        if formula:
            return f"{_quoted(MEASURE_PLACEHOLDER)}.{_quoted(name)}", set()
        rendered = self.dimension(owner, name, stack)
        return f"({rendered.expression.sql(dialect='duckdb')})", set(rendered.cubes)

    def _error(self, cube: str, message: str, where: str) -> ModelError:
        file = self._files.get(f"cubes.{cube}", "")
        return ModelError(message, file=file, path=f"cubes.{cube}.{where}")


def _source(cube: Cube, files: Mapping[str, str]) -> exp.Expr:
    if cube.sql_table is not None:
        table = exp.to_table(cube.sql_table, dialect="duckdb")
        if not table.args.get("db"):
            table.set("db", exp.to_identifier(PHYSICAL_SCHEMA_NAME))
        return table
    try:
        query = sqlglot.parse_one(cube.sql or "", read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise ModelError(
            f"SQL does not parse: {exc}",
            file=files.get(f"cubes.{cube.name}", ""),
            path=f"cubes.{cube.name}.sql",
        ) from exc
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not table.args.get("db") and table.name not in ctes:
            table.set("db", exp.to_identifier(PHYSICAL_SCHEMA_NAME))
    return exp.Subquery(this=query)


def _check_view(view: ResolvedView, rendered: RenderedModel, file: str) -> None:
    for member in view.members:
        missing = member_cubes(rendered, member.cube, member.cube_member) - set(view.join_paths)
        if missing:
            raise ModelError(
                f"member {member.name} reads cube {sorted(missing)[0]}, which the view does not "
                "join",
                file=file,
                path=f"views.{view.name}",
            )


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    parents = []
    while node.parent is not None:
        node = node.parent
        parents.append(node)
    return parents


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")
