"""Access policies: which members of a view a user sees and which rows.

Rules (Cube documentation, "Access policies"; ``field-notes.md`` § "Semantic data model"):

- A policy entry applies to a user when its ``group``/``groups``/``role`` names one of the user's
  groups (``"*"``: every user) and all its ``conditions`` hold (``chat_api.semantic.conditions``).
- A view and each cube it joins are *levels*. A level without policies allows everything. A level
  with policies but none applying to the user denies the whole view.
- Within a level, applying policies combine with OR: the members visible are the union of their
  ``member_level`` lists (no ``member_level``: all members; ``excludes: "*"``: none), and the
  rows are the union of their ``row_level`` filters (no ``row_level``, ``allow_all: true`` or a
  ``row_level`` without filters: all rows; ``allow_all: false`` without filters: no rows).
- Across levels everything combines with AND: a member must be visible at every level, a row must
  pass the filter of every level. Cube-level filters apply whenever the view is queried, even
  when the query reads no member of that cube (the compiler joins the cube for the filter).
- Filter values ``"{ userAttributes.x }"`` / ``"{ securityContext.x }"`` are substituted per user.
  When an applying policy's filter needs a value the user does not have, the view is denied with
  a reason naming the value: a silent "match nothing" would hide a misconfigured user.
- An empty (or blank) user attribute value never widens access: a view with any policy is
  denied to such a user, whatever its conditions say (``{ not userAttributes.x }`` would
  otherwise read ``""`` as "no attribute", issue 12). The HTTP layer refuses such values first.

Filters become sqlglot expressions over the physical columns with every value a literal node;
no SQL text is ever built from a user's values.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from chat_api.errors import AccessDeniedError
from chat_api.semantic.conditions import Scope, parse_condition, render_value
from chat_api.semantic.model import (
    AccessPolicy,
    Dimension,
    FilterRule,
    ResolvedView,
    RowLevel,
    SemanticModel,
)

_LIKE_ESCAPE = "\\"
_LIKE_OPERATORS = {
    "contains": "contains", "startsWith": "startsWith", "endsWith": "endsWith",
    "notContains": "contains", "notStartsWith": "startsWith", "notEndsWith": "endsWith",
}  # fmt: skip
"""Pattern operator -> its positive form; a negative one keeps NULLs, as Cube does."""
_parse_condition = functools.lru_cache(maxsize=512)(parse_condition)


@dataclass(frozen=True)
class UserContext:
    """Who is asking: the ``sessionSettings`` of a chat request, reduced to what policies read.

    Attributes:
        groups: Group names (``sessionSettings.groups``).
        attributes: User attributes by name (``sessionSettings.userAttributes`` as a mapping).
        security_context: ``sessionSettings.securityContext``, any JSON object.
    """

    groups: tuple[str, ...] = ()
    attributes: Mapping[str, str] = field(default_factory=dict)
    security_context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def scope(self) -> Scope:
        """What policy conditions and value templates can read."""
        return Scope(self.attributes, self.security_context)


@dataclass(frozen=True)
class ViewAccess:
    """What one user may do with one view.

    Attributes:
        view: The view name.
        visible: Names (unqualified) of the members the user may see; empty when denied.
        row_filter: A boolean expression over the cube aliases of the view (``"flights"."origin"
            = 'JFK'``) that every row must pass, or ``None`` for all rows.
        filter_cubes: The cubes ``row_filter`` reads; the compiler must join them.
        denied_reason: Why the view is refused, or ``None`` when it is allowed.
    """

    view: str
    visible: frozenset[str]
    row_filter: exp.Expr | None = None
    filter_cubes: frozenset[str] = frozenset()
    denied_reason: str | None = None

    @property
    def allowed(self) -> bool:
        """Whether the user may query the view at all."""
        return self.denied_reason is None

    def require(self) -> ViewAccess:
        """This access, when allowed.

        Raises:
            AccessDeniedError: the view is denied; ``reason`` says why.
        """
        if self.denied_reason is not None:
            raise AccessDeniedError(self.view, self.denied_reason)
        return self


def resolve_access(model: SemanticModel, view_name: str, user: UserContext) -> ViewAccess:
    """Apply the view's and its cubes' access policies to one user.

    Args:
        model: The loaded semantic model.
        view_name: A view of ``model`` (unqualified).
        user: The user's groups, attributes and security context.

    Returns:
        The visible members and the row filter, or a denied access with its reason.

    Raises:
        KeyError: ``view_name`` is not a view of ``model``.
    """
    view = model.view(view_name)
    if not view.public:
        return ViewAccess(view.name, frozenset(), denied_reason="the view is not public")
    visible = {member.name for member in view.members if member.public}
    filters: list[exp.Expr] = []
    cubes: set[str] = set()
    levels = _levels(model, view)
    blank = sorted(name for name, value in user.attributes.items() if not str(value).strip())
    if levels and blank:
        reason = f"user attribute {', '.join(blank)} is empty; an empty value grants nothing"
        return ViewAccess(view.name, frozenset(), denied_reason=reason)
    try:
        for level in levels:
            level_visible, level_filter, level_cubes = level.apply(model, view, user)
            visible &= level_visible
            filters.extend([level_filter] if level_filter is not None else [])
            cubes |= level_cubes
    except AccessDeniedError as exc:
        return ViewAccess(view.name, frozenset(), denied_reason=exc.reason)
    row_filter = _combine(exp.and_, filters) if filters else None
    return ViewAccess(view.name, frozenset(visible), row_filter, frozenset(cubes))


@dataclass(frozen=True)
class _Level:
    """The policies of the view itself (``cube is None``) or of one cube it joins."""

    name: str
    cube: str | None
    policies: tuple[AccessPolicy, ...]

    def apply(
        self, model: SemanticModel, view: ResolvedView, user: UserContext
    ) -> tuple[set[str], exp.Expr | None, set[str]]:
        applying = [policy for policy in self.policies if _applies(policy, user)]
        if not applying:
            raise AccessDeniedError(view.name, f"no access policy of {self.name} applies")
        visible: set[str] = set()
        for policy in applying:
            visible |= self._visible(view, policy)
        rows = [policy.row_level for policy in applying]
        if any(_all_rows(row) for row in rows):
            return visible, None, set()
        cubes: set[str] = set()
        branches = [
            self._all_of(model, view, user, row.filters, cubes) if row.filters else exp.false()
            for row in rows
            if row is not None
        ]
        return visible, _combine(exp.or_, branches), cubes

    def _visible(self, view: ResolvedView, policy: AccessPolicy) -> set[str]:
        """View members this policy lets through; a cube policy leaves other cubes alone."""
        level = policy.member_level
        visible: set[str] = set()
        for member in view.members:
            if self.cube is not None and member.cube != self.cube:
                visible.add(member.name)
                continue
            name = member.name if self.cube is None else member.cube_member
            included = level is None or level.includes == "*" or name in level.includes
            excluded = level is not None and (level.excludes == "*" or name in level.excludes)
            if included and not excluded:
                visible.add(member.name)
        return visible

    def _all_of(
        self,
        model: SemanticModel,
        view: ResolvedView,
        user: UserContext,
        rules: Sequence[FilterRule],
        cubes: set[str],
    ) -> exp.Expr:
        parts = [self._rule(model, view, user, rule, cubes) for rule in rules]
        return _combine(exp.and_, parts) if parts else exp.true()

    def _rule(
        self,
        model: SemanticModel,
        view: ResolvedView,
        user: UserContext,
        rule: FilterRule,
        cubes: set[str],
    ) -> exp.Expr:
        if rule.or_ is not None or rule.and_ is not None:
            nested = [
                self._rule(model, view, user, r, cubes) for r in (rule.or_ or rule.and_ or ())
            ]
            return _combine(exp.or_ if rule.or_ is not None else exp.and_, nested)
        cube, member, kind = self._target(model, view, rule.member or "")
        rendered = model.rendered.dimensions[cube, member]
        cubes |= rendered.cubes
        values = _values(view.name, rule.values, user)
        try:
            return filter_expression(rule.operator or "", rendered.expression.copy(), kind, values)
        except ValueError as exc:
            raise AccessDeniedError(view.name, f"row-level filter on {rule.member}: {exc}") from exc

    def _target(self, model: SemanticModel, view: ResolvedView, name: str) -> tuple[str, str, str]:
        bare = name.rpartition(".")[2]
        if self.cube is not None:
            dimension = model.cubes[self.cube].find(bare)
            if not isinstance(dimension, Dimension):
                raise AccessDeniedError(
                    view.name, f"row-level filter member {name} is not a dimension"
                )
            return self.cube, bare, dimension.type
        member = view.member(bare)
        if member is None or member.kind != "dimension":
            raise AccessDeniedError(view.name, f"row-level filter member {name} is not a dimension")
        return member.cube, member.cube_member, member.type


def _all_rows(row: RowLevel | None) -> bool:
    """No ``row_level``, ``allow_all: true``, or neither filters nor ``allow_all``: every row."""
    return row is None or row.allow_all is True or (row.allow_all is None and not row.filters)


def _combine(connector: Callable[..., exp.Expr], parts: Sequence[exp.Expr]) -> exp.Expr:
    """``a AND b`` / ``a OR b`` with each part parenthesised; a single part as it is."""
    if not parts:
        return exp.false() if connector is exp.or_ else exp.true()
    if len(parts) == 1:
        return parts[0]
    return connector(*(exp.paren(part, copy=False) for part in parts))


def _levels(model: SemanticModel, view: ResolvedView) -> list[_Level]:
    levels = [_Level(f"view {view.name}", None, view.policies)] if view.policies else []
    for cube in view.join_paths:
        policies = model.cubes[cube].access_policy
        if policies:
            levels.append(_Level(f"cube {cube}", cube, policies))
    return levels


def _applies(policy: AccessPolicy, user: UserContext) -> bool:
    groups = policy.group_names
    if "*" not in groups and not set(groups) & set(user.groups):
        return False
    return all(_parse_condition(c.if_).evaluate(user.scope) for c in policy.conditions)


def _values(view: str, raw: Sequence[Any], user: UserContext) -> list[Any]:
    values: list[Any] = []
    for item in raw:
        value = render_value(item, user.scope) if isinstance(item, str) else item
        if value is None:
            raise AccessDeniedError(view, f"the access policy needs {item!r}, which is not set")
        values.extend(value if isinstance(value, list | tuple) else [value])
    return values


def filter_expression(
    operator: str, column: exp.Expr, kind: str, values: Sequence[Any]
) -> exp.Expr:
    """One row-level filter as a boolean expression, every value a literal.

    Args:
        operator: A Cube filter operator (``equals``, ``contains``, ``inDateRange``, ...).
        column: The member's physical expression.
        kind: The member type (``string|number|time|boolean``), used to type the literals.
        values: The substituted values.

    Returns:
        The condition; the negative operators (``notEquals``, ``notIn``, ``notContains``,
        ``notStartsWith``, ``notEndsWith``) keep rows where the member is NULL, as Cube does.

    Raises:
        ValueError: a value does not fit the member type or the operator's arity.
    """
    literals = [_literal(value, kind) for value in values]
    if operator in ("set", "notSet"):
        is_null = exp.Is(this=column, expression=exp.Null())
        return exp.not_(is_null) if operator == "set" else is_null
    if operator in ("equals", "in", "notEquals", "notIn"):
        match = _member_of(column, literals)
        return match if operator in ("equals", "in") else _or_null(exp.not_(match), column)
    if operator in _LIKE_OPERATORS:
        positive = _LIKE_OPERATORS[operator]
        likes = [_like(column, str(value), positive) for value in values]
        if operator == positive:
            return exp.or_(*likes) if likes else exp.false()
        return _or_null(exp.not_(exp.paren(exp.or_(*likes))), column) if likes else exp.true()
    return _compare(operator, column, literals, values)


def _compare(
    operator: str, column: exp.Expr, literals: list[exp.Expr], values: Sequence[Any]
) -> exp.Expr:
    single = {"gt": exp.GT, "gte": exp.GTE, "lt": exp.LT, "lte": exp.LTE}
    dates = {
        "beforeDate": exp.LT, "beforeOrOnDate": exp.LTE, "afterDate": exp.GT,
        "afterOrOnDate": exp.GTE,
    }  # fmt: skip
    if operator in single or operator in dates:
        if len(literals) != 1:
            raise ValueError(f"{operator} takes one value, got {len(literals)}")
        comparison = single.get(operator) or dates[operator]
        value = _time_literal(values[0]) if operator in dates else literals[0]
        return comparison(this=column, expression=value)
    if operator in ("inDateRange", "notInDateRange"):
        if len(values) != 2:
            raise ValueError(f"{operator} takes two values, got {len(values)}")
        start, end = _time_literal(values[0]), _range_end(str(values[1]))
        inside = exp.and_(exp.GTE(this=column, expression=start), end(column.copy()))
        return inside if operator == "inDateRange" else exp.not_(exp.paren(inside))
    raise ValueError(f"unknown filter operator {operator!r}")


def _member_of(column: exp.Expr, literals: list[exp.Expr]) -> exp.Expr:
    if not literals:
        return exp.false()
    if len(literals) == 1:
        return exp.EQ(this=column, expression=literals[0])
    return exp.In(this=column, expressions=literals)


def _or_null(condition: exp.Expr, column: exp.Expr) -> exp.Expr:
    return exp.or_(condition, exp.Is(this=column.copy(), expression=exp.Null()))


def _like(column: exp.Expr, value: str, operator: str) -> exp.Expr:
    escaped = value
    for special in (_LIKE_ESCAPE, "%", "_"):
        escaped = escaped.replace(special, _LIKE_ESCAPE + special)
    before = "" if operator == "startsWith" else "%"
    after = "" if operator == "endsWith" else "%"
    like = exp.ILike(this=column.copy(), expression=exp.Literal.string(f"{before}{escaped}{after}"))
    return exp.Escape(this=like, expression=exp.Literal.string(_LIKE_ESCAPE))


def _literal(value: Any, kind: str) -> exp.Expr:
    if kind == "number":
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if number is None:
            text = str(value).strip()
            try:
                number = float(text) if any(c in text for c in ".eE") else int(text)
            except ValueError as exc:
                raise ValueError(f"{value!r} is not a number") from exc
        return exp.Literal.number(number)
    if kind == "boolean":
        return exp.Boolean(this=str(value).lower() in ("true", "1"))
    if kind == "time":
        return _time_literal(value)
    return exp.Literal.string(str(value))


def _time_literal(value: Any) -> exp.Expr:
    text = str(value).strip()
    dt.datetime.fromisoformat(text)  # ValueError for anything but an ISO date or timestamp
    return exp.cast(exp.Literal.string(text), exp.DataType.build("TIMESTAMP"))


def _range_end(text: str) -> Callable[[exp.Expr], exp.Expr]:
    """``column <= end``, or ``column < end + 1 day`` for a date-only end (the whole day)."""
    literal = _time_literal(text)
    if len(text.strip()) > 10:
        return lambda column: exp.LTE(this=column, expression=literal)
    next_day = exp.Add(
        this=literal,
        expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.Var(this="DAY")),
    )
    return lambda column: exp.LT(this=column, expression=next_day)
