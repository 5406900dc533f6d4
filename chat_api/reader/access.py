"""Row-level security said out loud, for any model and any user attribute.

The access policy filters rows inside the compiled SQL whatever is said here
(``chat_api.sql.policies``); this module decides what to *say*, from the user's resolved row
filter alone (never from the data, so the answer cannot tell whether hidden rows exist):

- no row filter: nothing to say;
- the question asks for values of a member that the row filter pins to other values (``origin =
  'LGA'`` for a user limited to ``JFK``): the query is not run, the answer says access is
  limited, the same answer whether or not such rows exist;
- asked values partly visible: the query keeps the visible ones and says so;
- otherwise: the answer says it covers the rows the policy allows, naming the condition.

Reading a question must not depend on hidden rows either (issue 24, point 8): a user under a
row filter reads with an index of the values their rows hold (:func:`visible_values`), so a
destination served only from a hidden origin reads like one never served at all, and a
question that names such a value is refused the same way as one naming a made-up value
(:func:`limited_note` says why). The values of the column a row filter pins (``origin`` for
``origin = 'JFK'``) stay known, with row counts of the visible rows only: asking about them
answers "not visible to you" from the policy alone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from sqlglot import exp

from chat_api.errors import ChatApiError
from chat_api.reader.index import MAX_VALUES, ModelIndex, ValueRows, Values, ValueSource
from chat_api.reader.query import Query
from chat_api.semantic.model import Member, ResolvedView, SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext, resolve_access

ACCESS_CACHE_SIZE = 16
"""Per-access indexes (or vocabularies) kept: one per distinct row filter, least recent out."""
_T = TypeVar("_T")
AccessKey = tuple[tuple[str, str], ...]
"""``(view, row filter SQL or the reason it is denied)`` of each public view that does not show
a user every row; empty for a user who sees every row of every view."""


@dataclass(frozen=True)
class AccessNote:
    """What to run and what to say: ``query`` None means don't run."""

    query: Query | None
    note: str = ""


def access_note(
    query: Query, *, model: SemanticModel, index: ModelIndex, user: UserContext
) -> AccessNote:
    """Decides what to run and say (module docstring).

    Returns:
        The query to run (narrowed, or None) and the sentence for the answer.
    """
    access = resolve_access(model, query.view, user)
    if not access.allowed:
        return AccessNote(
            None,
            f"Your access policy does not allow the {query.view} data ({access.denied_reason}).",
        )
    if access.row_filter is None:
        return AccessNote(query)
    pinned = _pinned(access.row_filter)
    condition = access.row_filter.sql(dialect="postgres").replace('"', "")
    said = (
        f"Your access is limited by the access policy ({condition}); the answer covers those "
        "rows only."
    )
    filters = []
    for f in query.filters + query.share:
        allowed = pinned.get(_column(index, f.member))
        if allowed is None or f.operator != "equals":
            filters.append(f)
            continue
        kept = tuple(v for v in f.values if v in allowed)
        if not kept:
            hidden = ", ".join(f.values)
            return AccessNote(
                None,
                f"Your access is limited by the access policy ({condition}): {hidden} is not "
                "visible to you, so I can't answer for it.",
            )
        filters.append(replace(f, values=kept))
    narrowed = replace(
        query,
        filters=tuple(filters[: len(query.filters)]),
        share=tuple(filters[len(query.filters) :]),
    )
    return AccessNote(narrowed, said)


def _column(index: ModelIndex, member: str) -> str:
    try:
        return index.info(member).column.replace('"', "")
    except KeyError:
        return ""


def _pinned(row_filter: exp.Expr) -> dict[str, frozenset[str]]:
    """Columns the filter pins to literal values (``col = 'x'`` or ``col IN (...)``, ANDed)."""
    found: dict[str, frozenset[str]] = {}
    parts = list(row_filter.flatten()) if isinstance(row_filter, exp.And) else [row_filter]
    for part in parts:
        part = part.unnest()
        if isinstance(part, exp.EQ) and isinstance(part.expression, exp.Literal):
            found[part.this.sql().replace('"', "")] = frozenset({part.expression.name})
        elif isinstance(part, exp.In) and all(isinstance(e, exp.Literal) for e in part.expressions):
            found[part.this.sql().replace('"', "")] = frozenset(e.name for e in part.expressions)
    return found


def access_key(model: SemanticModel, user: UserContext) -> AccessKey:
    """What a user sees of each public view, as a hashable key (users with one key see alike).

    Returns:
        :data:`AccessKey`, in the model's view order.
    """
    key: list[tuple[str, str]] = []
    for name, view in model.views.items():
        if not view.public:
            continue
        access = resolve_access(model, name, user)
        if not access.allowed:
            key.append((name, f"denied: {access.denied_reason}"))
        elif access.row_filter is not None:
            key.append((name, access.row_filter.sql(dialect="postgres").replace('"', "")))
    return tuple(key)


def limited_note(model: SemanticModel, user: UserContext) -> str:
    """The sentence that says a user's access is limited, or "" when it is not.

    It names each row filter (``flights.origin = 'JFK'``) and that values held only by hidden
    rows are not recognised, so a refusal to read a question says why whatever the word.
    """
    conditions = [c for _, c in access_key(model, user) if not c.startswith("denied: ")]
    if not conditions:
        return ""
    said = "; ".join(dict.fromkeys(conditions))
    return (
        f"Your access is limited by the access policy ({said}): values held only by rows "
        "hidden from you are not recognised either."
    )


def visible_values(model: SemanticModel, user: UserContext, rows: ValueRows) -> ValueSource:
    """The values of each view member that ``user``'s rows hold (module docstring).

    A view without a row filter keeps every row's values; a denied view keeps none; a view
    with one runs ``SELECT member, COUNT(*) ... GROUP BY 1`` compiled under the user's access
    policy, so joined members (a destination's name) are those of visible rows too. The
    column a row filter pins keeps every value, counted over visible rows (0 when hidden).

    Args:
        model: The semantic model.
        user: Whose access policies apply.
        rows: Runs trusted SQL on the warehouse.

    Returns:
        A :data:`chat_api.reader.index.ValueSource` for ``build_index``.
    """

    def source(view: ResolvedView, member: Member, every: Values) -> Values:
        access = resolve_access(model, view.name, user)
        if not access.allowed:
            return []
        if access.row_filter is None:
            return every
        visible = _visible_counts(model, view, member, user, rows)
        rendered = model.rendered.dimensions.get((member.cube, member.cube_member))
        column = rendered.expression.sql().replace('"', "") if rendered else ""
        if column in _pinned(access.row_filter):
            return [(value, visible.get(value, 0)) for value, _ in every]
        return list(visible.items())

    return source


def _visible_counts(
    model: SemanticModel, view: ResolvedView, member: Member, user: UserContext, rows: ValueRows
) -> dict[str, int]:
    sql = (
        f'SELECT "{view.name}"."{member.name}" AS v, COUNT(*) AS n FROM "{view.name}" '
        f"GROUP BY 1 ORDER BY 2 DESC LIMIT {MAX_VALUES + 1}"
    )
    try:
        found = rows(compile_semantic_sql(sql, model=model, user=user).sql)
    except ChatApiError:
        return {}
    if len(found) > MAX_VALUES:
        return {}
    return {str(v): int(n) for v, n in found if v is not None and str(v).strip()}


class PerAccess(Generic[_T]):
    """What a reader knows of the data, one per :data:`AccessKey`, built on first use.

    Thread-safe (turns run in worker threads); keeps the ``size`` most recently used; the
    empty key (every row visible) is the ``everyone`` value, never rebuilt.

    Args:
        everyone: The value for a user who sees every row.
        build: Builds the value for a user under a row filter.
        size: Values kept besides ``everyone``.
    """

    def __init__(
        self, everyone: _T, build: Callable[[UserContext], _T], *, size: int = ACCESS_CACHE_SIZE
    ) -> None:
        self.everyone = everyone
        self._build = build
        self._size = size
        self._built: OrderedDict[AccessKey, _T] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PerAccess(built={len(self._built)}, size={self._size})"

    def get(self, key: AccessKey, user: UserContext) -> _T:
        """Returns: the value of ``key`` (``user`` has that key), built when missing."""
        if not key:
            return self.everyone
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                return self._built[key]
        value = self._build(user)
        with self._lock:
            self._built[key] = value
            while len(self._built) > self._size:
                self._built.popitem(last=False)
        return value
