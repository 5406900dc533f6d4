"""Query specs: a query over one view as data, and its Semantic SQL.

A :class:`QuerySpec` is what the planner produces and what a thread keeps as the context of a
follow-up question; :func:`render_semantic_sql` turns it into Semantic SQL (Cube documentation,
"SQL API": views as tables, ``MEASURE()`` around measures).

Threads keep the last spec as a :data:`PlanState`, a JSON object they store without looking
inside (``{"version": 1, "spec": {"view": ..., "measures": [...], ...}}``);
:func:`plan_state` and :func:`spec_from_state` convert, validated by pydantic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from chat_api.planner.members import column_name
from chat_api.planner.reading import Direction, Operator, Scalar

logger = logging.getLogger(__name__)

PLAN_STATE_VERSION = 1
PlanState = dict[str, Any]
"""A query spec as a JSON object: ``{"version": 1, "spec": {...}}`` (see :func:`plan_state`)."""


@dataclass(frozen=True)
class Filter:
    """A condition on a dimension (Semantic SQL ``WHERE``).

    Attributes:
        member: Qualified dimension, ``"flights.origin"``.
        operator: Cube filter operator; ``in`` and multi-value ``notEquals`` render as
            ``IN``/``NOT IN``.
        values: One value for ``equals``/``gt``/...; one or more for ``in``/``notEquals``.
    """

    member: str
    operator: Operator
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class QuerySpec:
    """A query over one view: what :func:`render_semantic_sql` turns into Semantic SQL.

    Attributes:
        view: ``"flights"``, ``"weather"``, ``"planes"``, ``"airlines"`` or ``"airports"``.
        measures: Qualified measures, ``("flights.avg_arr_delay",)``; the first is the answer.
        dimensions: Qualified dimensions to group by, ``("flights.carrier_name",)``.
        filters: Conditions, all of which must hold.
        order: ``(member, direction)`` pairs; every member is selected.
        limit: Maximum rows, or None.
        compare: A comparison: the first dimension holds the sides, one row each.
        share_of: A share: the conditions of the part; ``filters`` select the whole. The answer
            is ``part / whole`` in percent, from two queries (:func:`share_specs`).
    """

    view: str
    measures: tuple[str, ...]
    dimensions: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    order: tuple[tuple[str, Direction], ...] = ()
    limit: int | None = None
    compare: bool = False
    share_of: tuple[Filter, ...] = ()


def render_semantic_sql(spec: QuerySpec) -> str:
    """Renders a spec as Semantic SQL (Postgres-flavoured, as for Cube's SQL API).

    Every member is selected under its own name (``AS avg_arr_delay``); dimensions are grouped by
    position; measures are wrapped in ``MEASURE()``; string literals are quoted with ``''``
    doubled.

    Args:
        spec: The query.

    Returns:
        One statement: ``SELECT flights.carrier_name AS carrier_name,
        MEASURE(flights.avg_arr_delay) AS avg_arr_delay FROM flights GROUP BY 1 ORDER BY 2 DESC``.
    """
    selected = list(spec.dimensions) + list(spec.measures)
    items = [f"{d} AS {column_name(d)}" for d in spec.dimensions]
    items += [f"MEASURE({m}) AS {column_name(m)}" for m in spec.measures]
    sql = f"SELECT {', '.join(items)} FROM {spec.view}"
    if spec.filters:
        sql += " WHERE " + " AND ".join(render_filter(f) for f in spec.filters)
    if spec.dimensions:
        sql += " GROUP BY " + ", ".join(str(n) for n in range(1, len(spec.dimensions) + 1))
    if spec.order:
        sql += " ORDER BY " + ", ".join(
            f"{selected.index(member) + 1} {direction.upper()} NULLS LAST"
            for member, direction in spec.order
        )
    if spec.limit is not None:
        sql += f" LIMIT {spec.limit}"
    return sql


def share_specs(spec: QuerySpec) -> tuple[QuerySpec, QuerySpec]:
    """Returns the queries of a share: the part and the whole.

    The part has ``filters`` and ``share_of``, the whole ``filters``; both plain counts with the
    spec's dimensions and no order or limit.
    """
    whole = QuerySpec(spec.view, spec.measures, spec.dimensions, spec.filters)
    part = QuerySpec(spec.view, spec.measures, spec.dimensions, spec.filters + spec.share_of)
    return part, whole


_SQL_OPERATORS = {"equals": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def render_filter(f: Filter) -> str:
    """Returns: one filter as a Semantic SQL condition (``flights.origin = 'JFK'``)."""
    values = [literal(value) for value in f.values]
    if f.operator == "in" or (f.operator == "notEquals" and len(values) > 1):
        keyword = "IN" if f.operator == "in" else "NOT IN"
        return f"{f.member} {keyword} ({', '.join(values)})"
    operator = "<>" if f.operator == "notEquals" else _SQL_OPERATORS[f.operator]
    return f"{f.member} {operator} {values[0]}"


def literal(value: Scalar) -> str:
    """Returns: a SQL literal: strings quoted with ``''`` doubled, whole floats as integers."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_SPEC_ADAPTER: TypeAdapter[QuerySpec] = TypeAdapter(QuerySpec)


def plan_state(spec: QuerySpec) -> PlanState:
    """Returns: ``spec`` as a JSON-ready object.

    For example ``{"version": 1, "spec": {"view": "flights", "measures": ["flights.count"],
    "dimensions": [], "filters": [{"member", "operator", "values"}], "order":
    [["flights.count", "desc"]], "limit": null}}``.
    """
    return {"version": PLAN_STATE_VERSION, "spec": _SPEC_ADAPTER.dump_python(spec, mode="json")}


def spec_from_state(state: PlanState | None) -> QuerySpec | None:
    """Reads a :data:`PlanState` back.

    Args:
        state: What :func:`plan_state` returned (after a JSON round trip), or None.

    Returns:
        The spec, or None for None, another version or a malformed state (logged: a thread
        whose follow-up context cannot be read continues as if it had none).
    """
    if state is None:
        return None
    if not isinstance(state, dict) or state.get("version") != PLAN_STATE_VERSION:
        logger.warning("plan state ignored reason=version state=%.200r", state)
        return None
    try:
        return _SPEC_ADAPTER.validate_python(state.get("spec"))
    except ValidationError as exc:
        logger.warning("plan state ignored reason=invalid error=%s", exc.errors()[:1])
        return None
