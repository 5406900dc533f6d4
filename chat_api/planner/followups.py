"""Follow-up rules: how a question continues the previous query of its thread.

A thread keeps its last answered query (interface, "1. Chat": a ``chatId`` continues the
thread). A follow-up ("and only from JFK?", "now by month", "what about LGA?", "only for
United", "and the maximum?") changes that query instead of starting afresh
(:func:`chat_api.planner.planner.plan_question`):

- a new condition replaces the previous one on the same member and keeps the others;
- a new breakdown replaces the previous one ("overall" removes it);
- a new measure replaces the previous measures; a bare aggregation ("the maximum")
  re-aggregates the previous measure (:func:`reaggregated`);
- a measure of another view moves the query there and keeps the conditions that exist in that
  view (:func:`carried_filters`): "how many flights from LGA in August?" then "and the average
  temperature?" asks about weather at LGA in August;
- a follow-up that changes nothing is refused (:func:`check_changes`) rather than answered
  with the same numbers again.
"""

from __future__ import annotations

from chat_api.planner.members import AGG_WORDS, COUNT_LABELS, METRICS, SLOT_MEMBERS, column_name
from chat_api.planner.reading import Reading, UnanswerableError
from chat_api.planner.specs import Filter, QuerySpec

_NOTHING_TO_CHANGE = (
    "I couldn't tell what to change in the previous question; name a condition ('only from "
    "JFK'), a breakdown ('by month') or a measure ('and the average distance?')."
)


def check_changes(reading: Reading) -> None:
    """Refuses a follow-up that names nothing to change.

    Raises:
        UnanswerableError: No measure, breakdown, condition, ranking or aggregation was read.
    """
    said = (
        reading.asks or reading.dims or reading.conds or reading.rank or reading.limit
        or reading.overall or reading.lone_agg or reading.top_default
    )  # fmt: skip
    if not said:
        raise UnanswerableError(_NOTHING_TO_CHANGE)


def reaggregated(measure: str, agg: str) -> str:
    """The same metric with another aggregation.

    ``flights.avg_distance`` + ``max`` -> ``flights.max_distance``.

    Raises:
        UnanswerableError: ``measure`` is a count, or the model has no such aggregation of it.
    """
    if measure in COUNT_LABELS:
        raise UnanswerableError(
            f"'{AGG_WORDS[agg]}' of a count needs a second aggregation the data model does not "
            "define; ask for the counts by month or by carrier instead."
        )
    for view, label, _, members in METRICS.values():
        if measure in (f"{view}.{name}" for name in members.values()):
            if agg not in members:
                offered = ", ".join(AGG_WORDS[a] for a in members)
                raise UnanswerableError(
                    f"The data model has no {AGG_WORDS[agg]} {label}; it offers the {offered}."
                )
            return f"{view}.{members[agg]}"
    raise UnanswerableError(f"I can't change the aggregation of {measure}.")


def carried_filters(base: QuerySpec, view: str, notes: list[str]) -> tuple[Filter, ...]:
    """The previous conditions that exist in ``view`` too, moved onto its members.

    Args:
        base: The previous query (of another view).
        view: The view the follow-up moves to.
        notes: Reasoning; says which conditions are kept and which are dropped.

    Returns:
        The conditions in ``view``'s members (``flights.origin`` -> ``weather.origin``).
    """
    slots = {member: slot for slot, member in SLOT_MEMBERS[base.view].items()}
    kept: list[Filter] = []
    for old in base.filters:
        slot = slots.get(column_name(old.member))
        member = SLOT_MEMBERS[view].get(slot) if slot is not None else None
        if member is None:
            notes.append(f"The condition on {old.member} does not exist in {view}; dropped.")
            continue
        kept.append(Filter(f"{view}.{member}", old.operator, old.values))
    shown = ", ".join(f.member for f in kept) or "none"
    notes.append(f"Follow-up moves to the {view} view, keeping conditions: {shown}.")
    return tuple(kept)
