"""Row-level security said out loud (issue 11, point 8).

The access policy filters rows silently (``chat_api.sql.policies``); the agent must not answer
"0 flights" when the user asked about rows the policy hides. Before a flights query runs, the
agent learns which origins the user can see (one probe query under the same policy, not a tool
call) and :func:`access_check` decides:

- the user sees every origin: nothing to say;
- the user sees no flight at all (an attribute value that matches no row, such as ``jfk`` in
  lower case): the question is not run; the answer names the attribute values;
- the question names origins the user can't see: those are dropped from the filter and the
  answer says so; when none is left the question is not run;
- otherwise the answer says that it covers the visible origins only.

The probe and the query both go through the access policy, so no row is ever shown across it;
this module only decides what to *say*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from chat_api.planner.specs import Filter, QuerySpec

PROBE_SQL = (
    "SELECT flights.origin AS origin, MEASURE(flights.count) AS count FROM flights GROUP BY 1"
)
"""The visible origins of a user, under the user's access policy."""


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
        visible: Origins with at least one flight the user can see.
        origins: Every origin of the data (EWR, JFK, LGA).
        attributes: The user's attributes, named in the answer.

    Returns:
        The query to run, or None, and the note for the answer.
    """
    if spec.view != "flights" or visible >= origins:
        return AccessCheck(spec)
    said = ", ".join(f"{name} = {value!r}" for name, value in sorted(attributes.items()))
    if not visible:
        return AccessCheck(
            None,
            f"Your access is limited by the access policy (your user attributes: {said or 'none'})"
            ", and it matches no flights in the data, so I can't answer. Airport codes are upper "
            "case (for example JFK); an administrator can check the attribute.",
        )
    shown = ", ".join(sorted(visible))
    asked = _asked_origins(spec)
    if asked is None:
        return AccessCheck(
            spec,
            f"Your access is limited to flights from {shown}; the answer covers those flights "
            "only.",
        )
    hidden = sorted(asked - visible)
    kept = sorted(asked & visible)
    if not hidden:
        return AccessCheck(spec)
    limited = (
        f"Your access is limited to flights from {shown}: flights from {', '.join(hidden)} "
        "are not visible to you"
    )
    if not kept:
        return AccessCheck(None, f"{limited}, so I can't answer for them.")
    return AccessCheck(
        _narrowed(spec, tuple(kept)), f"{limited}; the answer covers {', '.join(kept)} only."
    )


def _asked_origins(spec: QuerySpec) -> set[str] | None:
    for f in (*spec.filters, *spec.share_of):
        if f.member == "flights.origin" and f.operator in ("equals", "in"):
            return {str(v) for v in f.values}
    return None


def _narrowed(spec: QuerySpec, kept: tuple[str, ...]) -> QuerySpec:
    def narrow(filters: tuple[Filter, ...]) -> tuple[Filter, ...]:
        return tuple(
            replace(f, operator="in" if len(kept) > 1 else "equals", values=kept)
            if f.member == "flights.origin" and f.operator in ("equals", "in")
            else f
            for f in filters
        )

    return replace(
        spec,
        filters=narrow(spec.filters),
        share_of=narrow(spec.share_of),
        compare=spec.compare and len(kept) > 1,
    )
