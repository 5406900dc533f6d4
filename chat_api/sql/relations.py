"""A view as a physical relation: the subquery that stands for one view in compiled SQL.

Every occurrence of a view in a Semantic SQL query becomes::

    (SELECT <dimension sql> AS "<member>", ..., <measure input> AS "__measure__<cube>__<m>", ...
     FROM main.<root table> AS "<root cube>"
     LEFT JOIN main.<table> AS "<cube>" ON <join sql> ...
     WHERE <row-level filter of the user>) AS "<alias in the query>"

Only the members the query reads are projected and only the cubes they (and the row filter)
need are joined. The row filter sits inside the subquery, so no construct of the outer query
(CTE, subquery, UNION, window) can see a row the policy hides. ``MEASURE(m)`` in the outer
query becomes the measure's aggregation over its input column (Cube documentation, "Measure
types": ``count`` counts rows, ``count_distinct`` counts distinct values, ``sum``/``avg``/
``min``/``max`` ignore NULLs as SQL does, ``number`` is a formula over other measures or the
model's own aggregate over its input column).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from chat_api.semantic.model import ResolvedView, SemanticModel
from chat_api.semantic.templates import MEASURE_PLACEHOLDER
from chat_api.sql.policies import ViewAccess

MEASURE_COLUMN_PREFIX = "__measure__"
_AGGREGATIONS: dict[str, type[exp.Expr]] = {
    "count": exp.Count,
    "sum": exp.Sum,
    "avg": exp.Avg,
    "min": exp.Min,
    "max": exp.Max,
}


@dataclass
class ViewUse:
    """One occurrence of a view in a query and what the query reads from it.

    Attributes:
        view: The view.
        access: The user's access to it (visible members, row filter).
        alias: The name the query gives the occurrence (``f`` in ``FROM flights f``).
        table: The ``Table`` node of the query that the relation replaces.
        dimensions: View member names projected, in first-use order.
        measures: ``(cube, measure)`` pairs whose inputs are projected.
    """

    view: ResolvedView
    access: ViewAccess
    alias: str
    table: exp.Table
    dimensions: dict[str, None] = field(default_factory=dict)
    measures: dict[tuple[str, str], None] = field(default_factory=dict)


def measure_column(cube: str, measure: str) -> str:
    """The inner column holding a measure's row-level input."""
    return f"{MEASURE_COLUMN_PREFIX}{cube}__{measure}"


def aggregate(model: SemanticModel, use: ViewUse, cube: str, measure: str) -> exp.Expr:
    """The outer-query expression of ``MEASURE(<cube>.<measure>)`` over ``use``.

    Records the input columns ``use`` must project. A ``number`` measure expands into its formula
    with each referenced measure aggregated the same way.
    """
    rendered = model.rendered.measures[cube, measure]
    if rendered.formula is not None:
        formula = rendered.formula.copy()
        for column in list(formula.find_all(exp.Column)):
            if column.table == MEASURE_PLACEHOLDER:
                column.replace(exp.paren(aggregate(model, use, cube, column.name)))
        return formula
    use.measures[cube, measure] = None
    column = exp.column(measure_column(cube, measure), table=use.alias, quoted=True)
    if rendered.aggregate is not None:  # a median, a percentile...: the model's own aggregate
        call = rendered.aggregate.copy()
        call.set("this", column)
        return call
    if rendered.kind == "count_distinct":
        return exp.Count(this=exp.Distinct(expressions=[column]))
    return _AGGREGATIONS[rendered.kind](this=column)


def build_relation(model: SemanticModel, use: ViewUse) -> exp.Subquery:
    """The aliased subquery standing for ``use`` (see the module docstring)."""
    view = use.view
    cubes = {view.root, *use.access.filter_cubes}
    projections: list[exp.Expr] = []
    for name in use.dimensions:
        member = view.member(name)
        assert member is not None  # names come from the view's own members
        rendered = model.rendered.dimensions[member.cube, member.cube_member]
        cubes |= rendered.cubes
        projections.append(exp.alias_(rendered.expression.copy(), name, quoted=True))
    for cube, measure in use.measures:
        value = model.rendered.measures[cube, measure].input
        cubes |= value.cubes if value else {cube}
        expression = value.expression.copy() if value else exp.Literal.number(1)
        projections.append(exp.alias_(expression, measure_column(cube, measure), quoted=True))
    if not projections:
        projections.append(exp.alias_(exp.Literal.number(1), "__row", quoted=True))
    select = exp.Select(
        expressions=projections,
        from_=exp.From(this=_aliased_source(model, view.root)),
        joins=[_join(model, view, cube) for cube in _join_order(view, cubes)],
    )
    if use.access.row_filter is not None:
        select.set("where", exp.Where(this=use.access.row_filter.copy()))
    return exp.Subquery(this=select, alias=exp.TableAlias(this=_identifier(use.alias)))


def _join_order(view: ResolvedView, cubes: set[str]) -> list[str]:
    """Every cube on the way from the root to ``cubes``, parents before children."""
    paths = {
        view.join_paths[cube][: depth + 1]
        for cube in cubes
        for depth in range(len(view.join_paths[cube]))
    }
    return [path[-1] for path in sorted(paths, key=lambda p: (len(p), p)) if len(path) > 1]


def _join(model: SemanticModel, view: ResolvedView, cube: str) -> exp.Join:
    parent = view.join_paths[cube][-2]
    condition = model.rendered.joins[parent, cube].expression.copy()
    return exp.Join(this=_aliased_source(model, cube), on=condition, side="LEFT")


def _aliased_source(model: SemanticModel, cube: str) -> exp.Expr:
    source = model.rendered.sources[cube].copy()
    source.set("alias", exp.TableAlias(this=_identifier(cube)))
    return source


def _identifier(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)
