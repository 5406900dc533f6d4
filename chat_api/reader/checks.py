"""The checks every reader's typed query passes before it is compiled: one validator for all.

A :class:`~chat_api.reader.query.Query` from the rule reader or from a language model
(``chat_api.reader.llm``) is checked against the model's index and the user's access:

- the view exists and the user may query it (``resolve_access``);
- every member it names is a member of that view and visible to the user (an access policy's
  ``member_level`` hides the others, as ``cubeMeta`` does);
- measures are measures, dimensions are dimensions, time dimensions are of type ``time``,
  sums, averages, medians and percentiles read numeric dimensions (Cube documentation, "REST
  API › Query format");
- operators and granularities are Cube's, and values fit the member: numbers for numeric
  members, ISO dates for time members, and for a string dimension compared with ``equals`` or
  ``notEquals`` a value the index holds for this user (:attr:`ModelIndex.domain`);
- an ``order`` names a member of the view or one of the query's output columns.

The first failure raises :class:`~chat_api.errors.InvalidQueryError` with a message that names
the member and what the model offers instead, precise enough for a language model to correct
its query. Access policies, the SQL guard and the compiler run after these checks, unchanged:
passing them never widens what a user sees (the row filter is applied by the compiler).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import get_args

from chat_api.errors import InvalidQueryError
from chat_api.reader.index import ModelIndex, ViewIndex
from chat_api.reader.query import Aggregation, Filter, Granularity, Operator, Query, TimePart
from chat_api.reader.sql import aggregate_name, column
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext, resolve_access

OPERATORS = frozenset(get_args(Operator))
GRANULARITIES = frozenset(get_args(Granularity))
TIME_PARTS = frozenset(get_args(TimePart))
AGGREGATIONS = frozenset(get_args(Aggregation))
MAX_LIMIT = 1_000_000
"""Largest ``limit`` a query may ask for."""
_DOMAIN_OPERATORS = frozenset({"equals", "notEquals"})
_NUMERIC = frozenset({"number", "boolean"})
_ANY_TYPE = frozenset({"count", "countDistinct", "min", "max"})
"""Aggregates that read a dimension of any type; the others need a number."""
_BOOLEANS = frozenset({"true", "false", "1", "0"})
_SHOWN_VALUES = 8


def check_query(
    query: Query, index: ModelIndex, *, model: SemanticModel, user: UserContext
) -> None:
    """Checks ``query`` against the model and ``user``'s access (module docstring).

    Args:
        query: The typed query, from any reader.
        index: The model's index of the values ``user``'s rows hold.
        model: The semantic model (for the access policies).
        user: Whose access decides which views and members exist.

    Raises:
        InvalidQueryError: the first check that fails, with its ``code`` and ``member``.
    """
    view = _view(query.view, index, model=model, user=user)
    visible = resolve_access(model, query.view, user).visible
    for name in query.members + _other_members(query, view):
        _member(name, view, visible)
    _kinds(query, view)
    for f in (*query.filters, *query.share):
        _filter(f, view, index)
    for f in query.having:
        _operator(f)
    for td in query.time_dimensions:
        if td.granularity is not None and td.granularity not in GRANULARITIES:
            raise InvalidQueryError(
                "bad_operator",
                f"granularity {td.granularity!r} is not one of {_listed(GRANULARITIES)}",
                member=td.dimension,
            )
        for day in td.date_range or ():
            _date(day, td.dimension)
    for member, direction in query.order:
        if direction not in ("asc", "desc"):
            raise InvalidQueryError(
                "bad_operator", f"order direction {direction!r} is not asc or desc", member=member
            )
    _limit(query.limit)


def _view(name: str, index: ModelIndex, *, model: SemanticModel, user: UserContext) -> ViewIndex:
    allowed = [
        v for v in index.views if v in model.views and resolve_access(model, v, user).allowed
    ]
    if name not in allowed:
        raise InvalidQueryError(
            "unknown_view", f"there is no view {name!r}; views: {_listed(allowed)}"
        )
    return index.views[name]


def _other_members(query: Query, view: ViewIndex) -> tuple[str, ...]:
    """Members named outside :attr:`Query.members`: having, order, groups, sides."""
    aggregated = {a.member for a in query.aggregates}
    found = [f.member for f in query.having if f.member not in aggregated]
    outputs = _output_names(query, view)
    found += [m for m, _ in query.order if m not in aggregated and column(m) not in outputs]
    found += list(query.per_group.dimensions) if query.per_group else []
    found += [query.sides.member] if query.sides else []
    found += [t.dimension for t in query.share_parts]
    return tuple(dict.fromkeys(found))


def _output_names(query: Query, view: ViewIndex) -> set[str]:
    """Output columns an order may name (``chat_api.reader.sql``).

    The query's measures, dimensions and aggregates, and any time dimension's grain or part
    (``month_start_year``): an order on a grain the query does not output is left out of the
    SQL, never run against another column.
    """
    found = {column(m) for m in (*query.measures, *query.dimensions)}
    times = [n for n, info in view.members.items() if info.member.type == "time"]
    found |= {f"{column(t)}_{grain}" for t in times for grain in GRANULARITIES | TIME_PARTS}
    return found | {aggregate_name(a) for a in query.aggregates}


def _member(name: str, view: ViewIndex, visible: frozenset[str]) -> None:
    prefix, _, bare = name.partition(".")
    if prefix != view.name or name not in view.members or bare not in visible:
        known = [n for n in view.members if n.partition(".")[2] in visible]
        raise InvalidQueryError(
            "unknown_member",
            f"{name!r} is not a member of view {view.name}; members: {_listed(known)}",
            member=name,
        )


def _kinds(query: Query, view: ViewIndex) -> None:
    members = view.members
    for name in query.measures:
        _expect(members[name].member.kind == "measure", name, "a measure", "measures")
    for name in (*query.dimensions, *(f.member for f in (*query.filters, *query.share))):
        _expect(members[name].member.kind == "dimension", name, "a dimension", "dimensions")
    for td in query.time_dimensions:
        _expect(members[td.dimension].member.type == "time", td.dimension, "time", "time")
    for part in (*query.time_parts, *query.share_parts):
        _expect(members[part.dimension].member.type == "time", part.dimension, "time", "time")
        if part.part not in TIME_PARTS:
            raise InvalidQueryError(
                "bad_operator", f"time part {part.part!r} is not one of {_listed(TIME_PARTS)}"
            )
    for agg in query.aggregates:
        numeric = agg.agg in _ANY_TYPE or members[agg.member].member.type in _NUMERIC
        _expect(numeric, agg.member, f"a numeric dimension (for {agg.agg})", "aggregates")
        if agg.agg not in AGGREGATIONS:
            raise InvalidQueryError(
                "bad_operator", f"aggregate {agg.agg!r} is not one of {_listed(AGGREGATIONS)}"
            )


def _expect(ok: bool, name: str, what: str, where: str) -> None:
    if not ok:
        raise InvalidQueryError(
            "wrong_type", f"{name!r} is not {what}, so it cannot be in {where}", member=name
        )


def _operator(f: Filter) -> None:
    if f.operator not in OPERATORS:
        raise InvalidQueryError(
            "bad_operator",
            f"operator {f.operator!r} is not one of {_listed(OPERATORS)}",
            member=f.member,
        )


def _filter(f: Filter, view: ViewIndex, index: ModelIndex) -> None:
    _operator(f)
    member = view.members[f.member].member
    for value in f.values:
        if member.type == "boolean" and value.lower() not in _BOOLEANS:
            raise InvalidQueryError(
                "bad_value", f"{value!r} is not true or false for {f.member}", member=f.member
            )
        if member.type == "number":
            _number(value, f.member)
        elif member.type == "time":
            _date(value, f.member)
    domain = index.domain.get(f.member)
    if member.type != "string" or not domain or f.operator not in _DOMAIN_OPERATORS:
        return
    outside = [v for v in f.values if v not in domain]
    if outside:
        shown = sorted(domain)[:_SHOWN_VALUES]
        raise InvalidQueryError(
            "value_outside_domain",
            f"{', '.join(repr(v) for v in outside)} is not a value of {f.member}"
            f" (values such as {_listed(shown)})",
            member=f.member,
        )


def _number(value: str, member: str) -> None:
    try:
        float(value)
    except ValueError:
        raise InvalidQueryError(
            "bad_value", f"{value!r} is not a number, and {member} is numeric", member=member
        ) from None


def _date(value: str, member: str) -> None:
    try:
        dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise InvalidQueryError(
            "bad_value", f"{value!r} is not an ISO date (YYYY-MM-DD) for {member}", member=member
        ) from None


def _limit(limit: object) -> None:
    if limit is None:
        return
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidQueryError("bad_value", f"limit must be a whole number from 1 to {MAX_LIMIT}")


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
