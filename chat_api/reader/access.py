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
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from chat_api.reader.index import ModelIndex
from chat_api.reader.query import Query
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext, resolve_access


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
