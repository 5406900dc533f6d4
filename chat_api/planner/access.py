"""Row-level security said out loud (issue 11, point 8; issue 24, point 8).

The access policy filters rows silently (``chat_api.sql.policies``); the agent must not answer
"0 flights" (or a weather figure of no rows) when the user asked about rows the policy hides.
Before a flights or weather query runs, the agent learns which origins the user can see in
that view (one probe query under the same policy, not a tool call) and :func:`access_check`
decides:

- the user sees every origin: nothing to say;
- the user sees no flight at all (an attribute value that matches no row, such as ``jfk`` in
  lower case): the question is not run; the answer names the attribute values;
- the question names origins the user can't see: those are dropped from the filter and the
  answer says so; when none is left the question is not run;
- otherwise the answer says that it covers the visible origins only.

The probe and the query both go through the access policy, so no row is ever shown across it;
this module only decides what to *say*. The words the planner reads come from the user's
visible flights too (:func:`visible_vocabulary`): a destination served only from a hidden
origin is as unknown as one never served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chat_api.errors import ChatApiError
from chat_api.planner.specs import Filter, QuerySpec
from chat_api.planner.vocabulary import Vocabulary, load_vocabulary
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext

PROBES = {
    view: f"SELECT {view}.origin AS origin, MEASURE({view}.count) AS count FROM {view} GROUP BY 1"
    for view in ("flights", "weather")
}
"""Per view whose rows belong to an origin: the user's visible origins, under their policy."""
_ROWS = {
    "flights": ("flights", "flights from"),
    "weather": ("weather observations", "weather observations at"),
}
"""How the answer names a view's rows, and its rows of some origins ("flights from JFK")."""
_VISIBLE_COLUMNS = {
    "flights": "SELECT flights.origin AS origin, flights.dest AS dest, flights.year AS year "
    "FROM flights",
    "weather": "SELECT weather.year AS year FROM weather",
}
"""The columns :func:`chat_api.planner.vocabulary.load_vocabulary` reads of each table."""


@dataclass(frozen=True)
class AccessCheck:
    """What to do about row-level security for one query.

    Attributes:
        spec: The query to run (origins the user can't see removed), or None: don't run.
        note: What to tell the user (empty: nothing).
    """

    spec: QuerySpec | None
    note: str = ""


def access_check(
    spec: QuerySpec,
    *,
    visible: frozenset[str],
    origins: frozenset[str],
    attributes: Mapping[str, str],
) -> AccessCheck:
    """Decides what to run and say for ``spec`` (module docstring).

    Args:
        spec: The planned query.
        visible: Origins with at least one row of ``spec.view`` the user can see (the view's
            probe in :data:`PROBES`); views without one are left alone.
        origins: Every origin of the data (EWR, JFK, LGA).
        attributes: The user's attributes, named in the answer.

    Returns:
        The query to run, or None, and the note for the answer.
    """
    if spec.view not in PROBES or visible >= origins:
        return AccessCheck(spec)
    noun, rows = _ROWS[spec.view]
    said = ", ".join(f"{name} = {value!r}" for name, value in sorted(attributes.items()))
    if not visible:
        return AccessCheck(
            None,
            f"Your access is limited by the access policy (your user attributes: {said or 'none'})"
            f", and it matches no {noun} in the data, so I can't answer. Airport codes are upper "
            "case (for example JFK); an administrator can check the attribute.",
        )
    shown = ", ".join(sorted(visible))
    asked = _asked_origins(spec)
    if asked is None:
        return AccessCheck(
            spec,
            f"Your access is limited to {rows} {shown}; the answer covers those {noun} only.",
        )
    hidden = sorted(asked - visible)
    kept = sorted(asked & visible)
    if not hidden:
        return AccessCheck(spec)
    limited = (
        f"Your access is limited to {rows} {shown}: {rows} {', '.join(hidden)} "
        "are not visible to you"
    )
    if not kept:
        return AccessCheck(None, f"{limited}, so I can't answer for them.")
    return AccessCheck(
        _narrowed(spec, tuple(kept)), f"{limited}; the answer covers {', '.join(kept)} only."
    )


def _asked_origins(spec: QuerySpec) -> set[str] | None:
    for f in (*spec.filters, *spec.share_of):
        if f.member == f"{spec.view}.origin" and f.operator in ("equals", "in"):
            return {str(v) for v in f.values}
    return None


def _narrowed(spec: QuerySpec, kept: tuple[str, ...]) -> QuerySpec:
    def narrow(filters: tuple[Filter, ...]) -> tuple[Filter, ...]:
        return tuple(
            replace(f, operator="in" if len(kept) > 1 else "equals", values=kept)
            if f.member == f"{spec.view}.origin" and f.operator in ("equals", "in")
            else f
            for f in filters
        )

    return replace(
        spec,
        filters=narrow(spec.filters),
        share_of=narrow(spec.share_of),
        compare=spec.compare and len(kept) > 1,
    )


def visible_vocabulary(
    model: SemanticModel, user: UserContext, query: Callable[[str], Sequence[tuple[Any, ...]]]
) -> Vocabulary:
    """The planner's vocabulary of the flights and weather rows ``user`` sees (module docstring).

    Each table is read through ``SELECT`` of its view compiled under the user's access policy;
    a view the policy denies contributes no rows.

    Returns:
        :func:`chat_api.planner.vocabulary.load_vocabulary` over those rows.
    """
    tables: dict[str, str] = {}
    for view, sql in _VISIBLE_COLUMNS.items():
        try:
            tables[view] = f"({compile_semantic_sql(sql, model=model, user=user).sql})"
        except ChatApiError:
            tables[view] = f"({sql} WHERE FALSE)"
    return load_vocabulary(query, flights=tables["flights"], weather=tables["weather"])
