"""A typed query as Semantic SQL: the one text every reader's query becomes.

The output is Semantic SQL (Postgres dialect over views, ``MEASURE(m)`` for measures;
``chat_api.sql.compiler``), so the access policies, the SQL guard and the compiler apply to it
exactly as to SQL a person writes to the ``svcSqlApi`` tool. Shapes:

- plain: ``SELECT dims, MEASURE(m) ... FROM view WHERE filters GROUP BY dims HAVING ...
  ORDER BY ... LIMIT n``;
- ``aggregates``: ``MEDIAN(x)``, ``PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)``, ``AVG(x)``;
- ``ratio``: the first two numbers divided, ``a / NULLIF(b, 0)``; ``difference``: ``a - b``;
- ``count_groups``: ``SELECT COUNT(*) FROM (<the grouped query>) AS groups``;
- ``sides``: the query grouped by the side member in a CTE, then each side's number picked by
  a scalar subquery: ``(SELECT v FROM sides WHERE key = a) - (... b) AS difference, a, b``
  (or ``a / b``, or the percent change ``100.0 * (b - a) / a``);
- ``share``: part and whole as two CTEs, ``100.0 * part / whole``; with groups, each group's
  percentage of the total (a window over the aggregate);
- ``per_group``: ``ROW_NUMBER() OVER (PARTITION BY g ORDER BY m DESC)`` in a subquery;
- ``average_over``: the measure per time bucket in a subquery, averaged outside.

Values are quoted as SQL literals by sqlglot, never spliced as text.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from chat_api.reader.query import (
    DimensionAggregate,
    Filter,
    Query,
    TimeDimension,
    TimePartFilter,
)

_PART_SQL = {
    "hour": "HOUR", "weekday": "ISODOW", "day": "DAY", "month": "MONTH", "quarter": "QUARTER",
    "year": "YEAR",
}  # fmt: skip
_COMPARE = {"gt": exp.GT, "gte": exp.GTE, "lt": exp.LT, "lte": exp.LTE}


def semantic_sql(query: Query, *, numeric: frozenset[str] = frozenset()) -> str:
    """Returns: the Semantic SQL of ``query`` (module docstring).

    Args:
        query: The typed query.
        numeric: Members whose values are numbers (their filter values are not quoted).
    """
    if query.share or query.share_parts:
        return _share(query, numeric).sql(dialect="postgres")
    if query.average_over:
        return _average_over(query, numeric).sql(dialect="postgres")
    if query.sides is not None:
        return _sides(query, numeric).sql(dialect="postgres")
    if query.count_groups:
        inner = _select(replace(query, count_groups=False, order=(), limit=None), numeric)
        name = f"{column(query.dimensions[0])}_count" if query.dimensions else "groups"
        count = exp.alias_(exp.Count(this=exp.Star()), name, quoted=True)
        return exp.select(count).from_(inner.subquery("groups")).sql(dialect="postgres")
    select = _select(query, numeric)
    if query.per_group:
        return _per_group(query, select).sql(dialect="postgres")
    return select.sql(dialect="postgres")


def column(member: str) -> str:
    """Returns: the output column of a member (``flights.carrier`` -> ``carrier``)."""
    return member.rpartition(".")[2]


def _ref(member: str) -> exp.Column:
    return exp.column(column(member), table=member.partition(".")[0], quoted=True)


def _measure(member: str) -> exp.Expr:
    return exp.Anonymous(this="MEASURE", expressions=[_ref(member)])


def _aggregate(item: DimensionAggregate) -> exp.Expr:
    ref = _ref(item.member)
    if item.agg == "median":
        return exp.Anonymous(this="MEDIAN", expressions=[ref])
    if item.agg == "percentile":
        within = exp.WithinGroup(
            this=exp.PercentileCont(this=exp.Literal.number(item.p or 0.5)),
            expression=exp.Order(expressions=[exp.Ordered(this=ref)]),
        )
        return within
    if item.agg == "countDistinct":
        return exp.Count(this=exp.Distinct(expressions=[ref]))
    kinds = {"sum": exp.Sum, "avg": exp.Avg, "min": exp.Min, "max": exp.Max, "count": exp.Count}
    return kinds[item.agg](this=ref)


def aggregate_name(item: DimensionAggregate) -> str:
    """Returns: the output column of an aggregate (``median_arr_delay``, ``p90_arr_delay``)."""
    if item.agg == "percentile":
        return f"p{round((item.p or 0.5) * 100)}_{column(item.member)}"
    return f"{item.agg.lower()}_{column(item.member)}"


def _grain(query: Query) -> list[tuple[exp.Expr, str]]:
    found: list[tuple[exp.Expr, str]] = []
    for td in query.time_dimensions:
        if td.granularity:
            trunc = exp.Anonymous(
                this="DATE_TRUNC",
                expressions=[exp.Literal.string(td.granularity), _ref(td.dimension)],
            )
            found.append((trunc, f"{column(td.dimension)}_{td.granularity}"))
    for part in query.time_parts:
        if not part.values:
            found.append((_extract(part), f"{column(part.dimension)}_{part.part}"))
    return found


def _extract(part: TimePartFilter) -> exp.Expr:
    return exp.Extract(this=exp.var(_PART_SQL[part.part]), expression=_ref(part.dimension))


def _outputs(query: Query) -> list[tuple[exp.Expr, str]]:
    outputs = [(_ref(d), column(d)) for d in query.dimensions] + _grain(query)
    numbers = [(_measure(m), column(m)) for m in query.measures]
    numbers += [(_aggregate(a), aggregate_name(a)) for a in query.aggregates]
    if query.ratio and len(numbers) >= 2:
        (a, a_name), (b, b_name) = numbers[:2]
        ratio = exp.Div(this=a, expression=exp.Nullif(this=b, expression=exp.Literal.number(0)))
        numbers = [(ratio, f"{a_name}_per_{b_name}"), *numbers]
    elif query.difference and len(numbers) >= 2:
        (a, a_name), (b, b_name) = numbers[:2]
        numbers = [(exp.Sub(this=a, expression=b), f"{a_name}_minus_{b_name}"), *numbers]
    return outputs + numbers


def _select(query: Query, numeric: frozenset[str]) -> exp.Select:
    outputs = _outputs(query)
    select = exp.select(*(exp.alias_(e, n, quoted=True) for e, n in outputs)).from_(
        exp.to_table(query.view, quoted=True)
    )
    conditions = _conditions(query, numeric)
    if conditions is not None:
        select = select.where(conditions)
    groups = len(query.dimensions) + len(_grain(query))
    if groups:
        select = select.group_by(*(exp.Literal.number(i + 1) for i in range(groups)))
    having = [_having(h, query) for h in query.having]
    if having:
        select = select.having(exp.and_(*having))
    order = _order(query, outputs)
    if order:
        select = select.order_by(*order)
    if query.limit is not None and not query.per_group:
        select = select.limit(query.limit)
    return select


def _conditions(query: Query, numeric: frozenset[str]) -> exp.Expr | None:
    parts = [_condition(f, numeric) for f in query.filters]
    parts += [_time_range(td) for td in query.time_dimensions if td.date_range]
    parts += [_part_condition(p) for p in query.time_parts if p.values]
    return exp.and_(*parts) if parts else None


def _literal(value: str, number: bool) -> exp.Expr:
    if value.lower() in ("true", "false"):
        return exp.Boolean(this=value.lower() == "true")
    return exp.Literal.number(value) if number else exp.Literal.string(value)


def _condition(f: Filter, numeric: frozenset[str]) -> exp.Expr:
    ref = _ref(f.member)
    number = f.member in numeric
    values = [_literal(v, number) for v in f.values]
    if f.operator in ("set", "notSet"):
        found: exp.Expr = exp.Is(this=ref, expression=exp.Null())
        return found if f.operator == "notSet" else exp.Not(this=found)
    if f.operator in _COMPARE:
        return _COMPARE[f.operator](this=ref, expression=values[0])
    if f.operator in ("contains", "notContains"):
        like = exp.ILike(this=ref, expression=exp.Literal.string(f"%{f.values[0]}%"))
        return like if f.operator == "contains" else exp.Not(this=like)
    if f.operator in ("inDateRange", "notInDateRange"):
        between = exp.Between(this=ref, low=values[0], high=values[1])
        return between if f.operator == "inDateRange" else exp.Not(this=between)
    member_of = (
        exp.In(this=ref, expressions=values)
        if len(values) > 1
        else exp.EQ(this=ref, expression=values[0])
    )
    if f.operator == "notEquals":  # a missing value is "not X" too, as in Cube
        missing = exp.Is(this=ref.copy(), expression=exp.Null())
        return exp.paren(exp.or_(exp.Not(this=exp.paren(member_of)), missing))
    return member_of


def _time_range(td: TimeDimension) -> exp.Expr:
    assert td.date_range is not None  # only called for time dimensions with a range
    low, high = td.date_range
    ref = _ref(td.dimension)
    start = exp.cast(exp.Literal.string(low), "date")
    end = exp.Add(
        this=exp.cast(exp.Literal.string(high), "date"),
        expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var("DAY")),
    )
    return exp.and_(exp.GTE(this=ref, expression=start), exp.LT(this=ref, expression=end))


def _part_condition(part: TimePartFilter) -> exp.Expr:
    values = [exp.Literal.number(v) for v in part.values]
    found: exp.Expr = exp.In(this=_extract(part), expressions=values)
    return exp.Not(this=exp.paren(found)) if part.negate else found


def _having(h: Filter, query: Query) -> exp.Expr:
    named = {a.member: _aggregate(a) for a in query.aggregates}
    target = named.get(h.member) or _measure(h.member)
    if h.operator in _COMPARE:
        return _COMPARE[h.operator](this=target, expression=exp.Literal.number(h.values[0]))
    return exp.EQ(this=target, expression=exp.Literal.number(h.values[0]))


def _order(query: Query, outputs: list[tuple[exp.Expr, str]]) -> list[exp.Expr]:
    names = [name for _, name in outputs]
    found: list[exp.Expr] = []
    for member, direction in query.order:
        name = column(member) if column(member) in names else None
        if name is None and query.aggregates:
            name = next((aggregate_name(a) for a in query.aggregates if a.member == member), None)
        if name is None:
            continue
        index = names.index(name) + 1
        found.append(
            exp.Ordered(this=exp.Literal.number(index), desc=direction == "desc", nulls_first=False)
        )
    return found


def _sides(query: Query, numeric: frozenset[str]) -> exp.Select:
    sides = query.sides
    assert sides is not None
    if sides.part is None:
        key = column(sides.member)
        grouped = replace(query, dimensions=(*query.dimensions, sides.member))
        side_values = [_literal(v, sides.member in numeric) for v in sides.values]
    else:
        key = f"{column(sides.member)}_{sides.part}"
        group = TimePartFilter(sides.member, sides.part, ())
        grouped = replace(query, time_parts=(*query.time_parts, group))
        side_values = [exp.Literal.number(v) for v in sides.values]
    grouped = replace(grouped, sides=None, order=(), limit=None)
    inner = _select(grouped, numeric)
    value = _outputs(grouped)[-1][1]

    def side(literal: exp.Expr) -> exp.Expr:
        picked = exp.select(exp.column(value, quoted=True)).from_("compared_sides")
        return exp.Subquery(
            this=picked.where(exp.EQ(this=exp.column(key, quoted=True), expression=literal))
        )

    a, b = side(side_values[0]), side(side_values[1])
    outputs = [exp.alias_(_combined(sides.op, a, b), _SIDE_NAMES[sides.op], quoted=True)]
    outputs += [
        exp.alias_(side(v), f"{sides.part} {raw}" if sides.part else raw, quoted=True)
        for v, raw in zip(side_values, sides.values, strict=True)
    ]
    return exp.select(*outputs).with_("compared_sides", as_=inner)


_SIDE_NAMES = {"difference": "difference", "ratio": "ratio", "change": "percent change"}


def _combined(op: str, a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """``a - b``, ``a / NULLIF(b, 0)`` or ``100.0 * (b - a) / NULLIF(a, 0)``."""
    if op == "difference":
        return exp.Sub(this=a, expression=b)
    if op == "ratio":
        return exp.Div(this=a, expression=exp.Nullif(this=b, expression=exp.Literal.number(0)))
    grown = exp.Paren(this=exp.Sub(this=b, expression=a.copy()))
    scaled = exp.Mul(this=exp.Literal.number("100.0"), expression=grown)
    return exp.Div(this=scaled, expression=exp.Nullif(this=a, expression=exp.Literal.number(0)))


def _group_column(query: Query, member: str) -> str:
    """The output column of a group: a dimension's own, or its first time grain's."""
    if member not in query.dimensions:
        for td in query.time_dimensions:
            if td.dimension == member and td.granularity:
                return f"{column(member)}_{td.granularity}"
    return column(member)


def _per_group(query: Query, inner: exp.Select) -> exp.Select:
    assert query.per_group is not None
    outputs = _outputs(query)
    key = next(iter(query.order), None)
    order_name = column(key[0]) if key else outputs[-1][1]
    partition = [
        exp.column(_group_column(query, d), quoted=True) for d in query.per_group.dimensions
    ]
    rank = exp.Window(
        this=exp.RowNumber(),
        partition_by=partition,
        order=exp.Order(
            expressions=[
                exp.Ordered(
                    this=exp.column(order_name, quoted=True),
                    desc=not key or key[1] == "desc",
                    nulls_first=False,
                )
            ]
        ),
    )
    inner.set("order", None)
    ranked = exp.select("*", exp.alias_(rank, "rank_in_group", quoted=True)).from_(
        inner.subquery("grouped")
    )
    names = [exp.column(n, quoted=True) for _, n in outputs]
    return (
        exp.select(*names)
        .from_(ranked.subquery("ranked"))
        .where(
            exp.LTE(
                this=exp.column("rank_in_group", quoted=True),
                expression=exp.Literal.number(query.per_group.limit),
            )
        )
        .order_by(*partition, exp.column(order_name, quoted=True).desc())
    )


def _share(query: Query, numeric: frozenset[str]) -> exp.Select:
    whole = Query(
        view=query.view, measures=query.measures[:1], dimensions=query.dimensions,
        time_dimensions=query.time_dimensions, filters=query.filters, time_parts=query.time_parts,
        aggregates=query.aggregates[:1] if not query.measures else (),
    )  # fmt: skip
    part = replace(
        whole, filters=query.filters + query.share, time_parts=query.time_parts + query.share_parts
    )
    value = (_outputs(whole)[-1][1],)
    keys = [name for _, name in _outputs(whole)[:-1]]
    part_sql = _select(part, numeric)
    whole_sql = _select(whole, numeric)
    select = exp.select(
        *(exp.column(k, table="whole_rows", quoted=True) for k in keys),
        exp.alias_(exp.column(value[0], table="part_rows", quoted=True), "part", quoted=True),
        exp.alias_(exp.column(value[0], table="whole_rows", quoted=True), "whole", quoted=True),
        exp.alias_(
            exp.Mul(
                this=exp.Literal.number("100.0"),
                expression=exp.Div(
                    this=exp.func(
                        "COALESCE",
                        exp.column(value[0], table="part_rows", quoted=True),
                        exp.Literal.number(0),
                    ),
                    expression=exp.Nullif(
                        this=exp.column(value[0], table="whole_rows", quoted=True),
                        expression=exp.Literal.number(0),
                    ),
                ),
            ),
            "percent",
            quoted=True,
        ),
    )
    select = select.with_("part_rows", as_=part_sql).with_("whole_rows", as_=whole_sql)
    if keys:
        on = exp.and_(
            *(
                exp.EQ(
                    this=exp.column(k, table="whole_rows", quoted=True),
                    expression=exp.column(k, table="part_rows", quoted=True),
                )
                for k in keys
            )
        )
        select = select.from_("whole_rows").join("part_rows", on=on, join_type="left")
        return select.order_by(exp.column("percent", quoted=True).desc())
    return select.from_("whole_rows").join("part_rows", join_type="cross")


def _bucket_aggregate(agg: str, value: exp.Column) -> exp.Expr:
    if agg == "median":
        return exp.Anonymous(this="MEDIAN", expressions=[value])
    return {"max": exp.Max, "min": exp.Min}.get(agg, exp.Avg)(this=value)


def _average_over(query: Query, numeric: frozenset[str]) -> exp.Select:
    assert query.average_over is not None
    td = next(iter(query.time_dimensions), None)
    bucketed = Query(
        view=query.view, measures=query.measures[:1], dimensions=query.dimensions,
        time_dimensions=(replace(td, granularity=query.average_over), *query.time_dimensions[1:]),
        filters=query.filters, time_parts=query.time_parts,
    ) if td else query  # fmt: skip
    inner = _select(bucketed, numeric)
    value = column(query.measures[0])
    keys = [exp.column(column(d), quoted=True) for d in query.dimensions]
    outer = exp.select(
        *keys,
        exp.alias_(
            _bucket_aggregate(query.over_agg, exp.column(value, quoted=True)),
            f"{query.over_agg}_{value}_per_{query.average_over}",
            quoted=True,
        ),
    ).from_(inner.subquery("buckets"))
    if keys:
        highest = exp.Ordered(this=exp.Literal.number(len(keys) + 1), desc=True)
        outer = outer.group_by(*keys).order_by(highest)
    return outer
