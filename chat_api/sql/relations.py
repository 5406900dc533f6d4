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

A cube whose rows the view's joins repeat (``ResolvedView.multiplied``: the "one" side of a
``one_to_many`` join, the far side of a ``many_to_one``) has its measures aggregated once per
primary key, as Cube does for "multiplied measures": ``count`` becomes a count of distinct keys,
``sum``/``avg`` add or average one value per distinct ``(key, value)`` pair, ``min``/``max`` and
``count_distinct`` need nothing. The relation then also projects the cube's key as
``"__key__<cube>"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from chat_api.errors import SemanticSqlError
from chat_api.semantic.model import ResolvedView, SemanticModel
from chat_api.semantic.templates import MEASURE_PLACEHOLDER, RenderedSql
from chat_api.sql.policies import ViewAccess

MEASURE_COLUMN_PREFIX = "__measure__"
KEY_COLUMN_PREFIX = "__key__"
DEDUPLICATING_FUNCTIONS = frozenset(
    {"LIST_SUM", "LIST_AVG", "TRANSFORM", "ARRAY_DISTINCT", "ARRAY_AGG", "STRUCT"}
)
"""What the once-per-key aggregates of repeated cubes call (sqlglot names); the executed-SQL
check allows them, the Semantic SQL a user writes still may not call them."""
_ONCE_PER_KEY = {"sum": "LIST_SUM", "avg": "LIST_AVG"}
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
        keys: Repeated cubes whose primary key is projected (module docstring).
    """

    view: ResolvedView
    access: ViewAccess
    alias: str
    table: exp.Table
    dimensions: dict[str, None] = field(default_factory=dict)
    measures: dict[tuple[str, str], None] = field(default_factory=dict)
    keys: dict[str, None] = field(default_factory=dict)


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
    if cube in use.view.multiplied and rendered.kind in ("count", "sum", "avg"):
        return _once_per_key(use, cube, rendered.kind, column, rendered.aggregate is not None)
    if rendered.aggregate is not None:  # a median, a percentile...: the model's own aggregate
        call = rendered.aggregate.copy()
        call.set("this", column)
        return call
    if rendered.kind == "count_distinct":
        return exp.Count(this=exp.Distinct(expressions=[column]))
    return _AGGREGATIONS[rendered.kind](this=column)


def _once_per_key(
    use: ViewUse, cube: str, kind: str, column: exp.Column, own_aggregate: bool
) -> exp.Expr:
    """A measure of a repeated cube aggregated once per primary key (module docstring).

    Raises:
        SemanticSqlError: ``unsupported_syntax`` for a measure written as its own aggregate
            (a median, a percentile) over a repeated cube.
    """
    if own_aggregate:
        raise SemanticSqlError(
            "unsupported_syntax",
            f"{cube} rows repeat in view {use.view.name} (its joins fan out), and this "
            "measure's own aggregate cannot be taken once per key; query a view rooted at "
            f"{cube}",
        )
    use.keys[cube] = None
    key = exp.column(KEY_COLUMN_PREFIX + cube, table=use.alias, quoted=True)
    if kind == "count":
        counted = exp.Case(
            ifs=[exp.If(this=exp.Not(this=exp.Is(this=column, expression=exp.Null())), true=key)]
        )
        return exp.Count(this=exp.Distinct(expressions=[counted]))
    pairs = exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier("k"), expression=key),
            exp.PropertyEQ(this=exp.to_identifier("v"), expression=column),
        ]
    )
    distinct = exp.ArrayDistinct(this=exp.ArrayAgg(this=pairs))
    values = exp.Transform(
        this=distinct,
        expression=exp.Lambda(
            this=exp.column("v", table="x"), expressions=[exp.to_identifier("x")]
        ),
    )
    return exp.Anonymous(this=_ONCE_PER_KEY[kind], expressions=[values])


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
        value = model.rendered.measures[cube, measure].input or _row_marker(model, view, cube)
        cubes |= value.cubes
        expression = value.expression.copy()
        projections.append(exp.alias_(expression, measure_column(cube, measure), quoted=True))
    for cube in use.keys:
        key = _primary_key(model, cube)
        cubes |= key.cubes
        projections.append(exp.alias_(key.expression.copy(), KEY_COLUMN_PREFIX + cube, quoted=True))
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


def _row_marker(model: SemanticModel, view: ResolvedView, cube: str) -> RenderedSql:
    """What a plain ``count`` counts: 1 per row of the root cube.

    For a joined cube, its primary key, which is NULL where the LEFT JOIN found no row (so a
    customer without tweets has 0 tweets, not 1). A joined cube without a primary key counts
    joined rows.
    """
    has_key = any(d.primary_key for d in model.cubes[cube].dimensions)
    if cube == view.root or not has_key:
        return RenderedSql(exp.Literal.number(1), frozenset({cube}))
    return _primary_key(model, cube)


def _primary_key(model: SemanticModel, cube: str) -> RenderedSql:
    """The rendered primary key of ``cube``; several key dimensions make one struct."""
    names = [d.name for d in model.cubes[cube].dimensions if d.primary_key]
    parts = [model.rendered.dimensions[cube, name] for name in names]
    if len(parts) == 1:
        return parts[0]
    struct = exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(name), expression=part.expression.copy())
            for name, part in zip(names, parts, strict=True)
        ]
    )
    return RenderedSql(struct, frozenset().union(*(part.cubes for part in parts)))


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
