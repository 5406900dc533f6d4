"""Shapes of a query beyond one aggregate: comparisons and shares (issue 11, points 2 and 3).

- A comparison ("JFK vs LGA", "compare United and Delta", "Newark or LaGuardia: which is
  busier?") is one row per side: the filter naming the sides (``origin IN ('JFK', 'LGA')``)
  stays, and its member becomes the first breakdown. Never one merged number. A side that
  names a group ("Chicago": ORD and MDW, "winter": three months) is refused
  (:func:`refuse_grouped_sides`): one row per airport or month would answer another question
  ("ORD has more" for "Chicago vs Houston"), and a group total needs a query per side.
- A share ("percentage of flights cancelled", "what share of JFK's flights does JetBlue
  operate?") is a part of the flights asked about. Cancellations use the model's
  ``cancellation_rate`` measure (cancelled = no actual departure time; denominator: all flights
  of the group, cancelled ones included), so a breakdown or ranking works in one query. Any
  other share keeps the whole in ``filters`` and the part's conditions in ``share_of``: the
  thresholds said ("more than 15 minutes late", "arrived early") when there are any, else the
  condition said last ("... does *JetBlue* operate").
"""

from __future__ import annotations

from dataclasses import replace

from chat_api.planner.members import column_name
from chat_api.planner.reading import UnanswerableError
from chat_api.planner.reading_base import Condition
from chat_api.planner.specs import Filter, QuerySpec

_SIDE_DIMENSIONS = {
    "carrier": "carrier_name", "origin": "origin", "dest": "dest", "month": "month",
    "weekday": "weekday", "quarter": "quarter", "plane_manufacturer": "plane_manufacturer",
    "manufacturer": "manufacturer", "faa": "faa", "hour": "hour", "year": "year",
    "route": "route",
}  # fmt: skip
_PART_MEMBERS = frozenset({
    "arr_delay", "dep_delay", "air_time", "distance", "dep_temp", "dep_humid", "dep_wind_speed",
    "dep_wind_gust", "dep_precip", "dep_visib", "plane_seats", "hour",
})  # fmt: skip
_SAME_SLOTS = (
    frozenset({"origin", "dest", "place"}), frozenset({"month"}), frozenset({"weekday"}),
    frozenset({"carrier"}), frozenset({"manufacturer"}),
)  # fmt: skip
_NO_SIDES = (
    "To compare, name two or more values of one kind, for example 'JFK vs LGA', 'United and "
    "Delta' or 'July or December'."
)


def has_sides(spec: QuerySpec) -> bool:
    """Returns: True when a filter names two or more sides ("Newark or LaGuardia")."""
    return any(f.operator == "in" and len(f.values) >= 2 for f in spec.filters)


def refuse_grouped_sides(conds: tuple[Condition, ...]) -> None:
    """Refuses a comparison whose sides are groups (module docstring).

    Args:
        conds: The conditions read from the question.

    Raises:
        UnanswerableError: Two or more conditions on one slot, one of which names several
            values ("chicago" vs "houston"); the answer names the groups.
    """
    for slots in _SAME_SLOTS:
        sides = [c for c in conds if c.slot in slots and c.operator == "equals"]
        held = [c for c in sides if not _holds_the_others(c, sides)]  # "chicago: ORD or MDW"
        if len(held) >= 2 and any(len(c.values) > 1 for c in held):
            groups = " and ".join(f"'{c.phrase}'" for c in held if len(c.values) > 1)
            raise UnanswerableError(
                f"A side of this comparison names several values ({groups}); I compare single "
                "values side by side (one airport, carrier or month per side). Ask about each "
                "side on its own."
            )


def _holds_the_others(cond: Condition, sides: list[Condition]) -> bool:
    others = {v for c in sides if c is not cond for v in c.values}
    return len(sides) > 1 and others <= set(cond.values)


def compared(spec: QuerySpec, notes: list[str]) -> QuerySpec:
    """Makes ``spec`` a comparison: the last multi-value filter's member becomes the breakdown.

    Raises:
        UnanswerableError: No filter names two or more sides, or the sides can't be a breakdown.
    """
    sides = [f for f in spec.filters if f.operator == "in" and len(f.values) >= 2]
    if not sides:
        raise UnanswerableError(_NO_SIDES)
    side = sides[-1]
    name = _SIDE_DIMENSIONS.get(column_name(side.member))
    if name is None:
        raise UnanswerableError(f"I can't put {column_name(side.member)} values side by side.")
    dimension = f"{spec.view}.{name}"
    dims = (dimension, *(d for d in spec.dimensions if d != dimension))
    notes.append(f"Comparison: one row per {name} of {', '.join(map(str, side.values))}.")
    return replace(spec, dimensions=dims, compare=True, order=(), limit=None)


def shared(spec: QuerySpec, notes: list[str]) -> QuerySpec:
    """Makes ``spec`` a share (module docstring).

    Raises:
        UnanswerableError: The question names no part ("what percentage of flights?").
    """
    view = spec.view
    cancelled = [f for f in spec.filters if column_name(f.member) == "cancelled"]
    if cancelled:
        rest = tuple(f for f in spec.filters if f not in cancelled)
        notes.append(
            "Cancellation rate: cancelled flights (no actual departure time) as a percentage of "
            "all flights, cancelled ones included."
        )
        measures = (f"{view}.cancellation_rate", f"{view}.cancelled_count", f"{view}.count")
        return replace(spec, measures=measures, filters=rest, share_of=())
    part = _part(spec.filters)
    if not part:
        raise UnanswerableError(
            "A share needs the part to measure, for example 'the percentage of flights more "
            "than 15 minutes late' or 'the share of JFK's flights flown by JetBlue'."
        )
    whole = tuple(f for f in spec.filters if f not in part)
    notes.append(
        f"Share: flights with {', '.join(f.member for f in part)} out of all flights matching "
        "the other conditions."
    )
    return replace(spec, measures=(f"{view}.count",), filters=whole, share_of=part)


def _part(filters: tuple[Filter, ...]) -> tuple[Filter, ...]:
    thresholds = tuple(f for f in filters if column_name(f.member) in _PART_MEMBERS)
    if thresholds:
        return thresholds
    return filters[-1:]
