"""A follow-up question changes the thread's previous typed query instead of starting afresh.

Filters the follow-up names replace the previous ones on the same member; a new grain keeps the
previous date range; "drop that filter" and "overall" remove; "how does that compare to B"
keeps both sides and breaks the answer down by them; "the year before" moves every year of the
previous question back by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from chat_api.reader.query import Filter, Query, TimeDimension, TimePartFilter


class FollowUp(Protocol):
    """What a follow-up's reading says about the change (``chat_api.reader.interpret``)."""

    drop: bool
    overall: bool
    versus: bool
    shift: int


def merged(previous: Query, query: Query, draft: FollowUp) -> Query:
    """The previous query changed by a follow-up's ``query`` (module docstring)."""
    if query.view != previous.view:
        return query
    said = {f.member for f in query.filters}
    kept = tuple(f for f in previous.filters if f.member not in said)
    if draft.drop:
        kept = ()
    added, compared = _compared_with(previous, query, draft)
    parts = query.time_parts or (() if draft.drop else previous.time_parts)
    times = _times(previous, query, drop=draft.drop)
    if draft.shift:
        times = tuple(_shifted(td, draft.shift) for td in times)
        parts = tuple(_shifted_part(p, draft.shift) for p in parts)
    named = bool(query.measures or query.aggregates)
    regroup = bool(query.dimensions or any(td.granularity for td in query.time_dimensions))
    return replace(
        previous,
        measures=query.measures if named else previous.measures,
        aggregates=query.aggregates if named else previous.aggregates,
        dimensions=(query.dimensions if regroup or draft.overall else previous.dimensions)
        + compared,
        time_dimensions=times
        if not draft.overall
        else tuple(replace(td, granularity=None) for td in times if td.date_range),
        filters=kept + added,
        time_parts=parts,
        having=query.having or previous.having,
        order=() if regroup else previous.order,
        limit=query.limit if regroup else previous.limit,
        share=query.share or previous.share,
        share_parts=query.share_parts or previous.share_parts,
        per_group=query.per_group if regroup else previous.per_group,
        ratio=query.ratio or (previous.ratio and not named),
        notes=("Follow-up: keeping the previous question's conditions unless changed.",),
    )


def _shifted(td: TimeDimension, years: int) -> TimeDimension:
    if td.date_range is None:
        return td
    low, high = td.date_range
    moved = (f"{int(low[:4]) + years}{low[4:]}", f"{int(high[:4]) + years}{high[4:]}")
    return replace(td, date_range=moved)


def _shifted_part(part: TimePartFilter, years: int) -> TimePartFilter:
    if part.part != "year":
        return part
    return replace(part, values=tuple(v + years for v in part.values))


def _compared_with(
    previous: Query, query: Query, draft: FollowUp
) -> tuple[tuple[Filter, ...], tuple[str, ...]]:
    """A follow-up's filters, and the members it compares.

    "How does that compare to Brooklyn?" after a question about New Orleans keeps New Orleans,
    adds Brooklyn and breaks the answer down by store.
    """
    if not draft.versus:
        return query.filters, ()
    before = {f.member: f for f in previous.filters if f.operator == "equals"}
    filters: list[Filter] = []
    compared: list[str] = []
    for f in query.filters:
        old = before.get(f.member)
        if old is None or f.operator != "equals":
            filters.append(f)
            continue
        filters.append(replace(f, values=tuple(dict.fromkeys(old.values + f.values))))
        if f.member not in previous.dimensions:
            compared.append(f.member)
    return tuple(filters), tuple(compared)


def _times(previous: Query, query: Query, *, drop: bool) -> tuple[TimeDimension, ...]:
    """A follow-up's time dimensions.

    A new grain keeps the previous date range ("which of those years was the lowest" after
    "just 2008 to 2011").
    """
    if not query.time_dimensions:
        return previous.time_dimensions
    ranges = [td.date_range for td in previous.time_dimensions if td.date_range]
    if drop or not ranges or any(td.date_range for td in query.time_dimensions):
        return query.time_dimensions
    return tuple(replace(td, date_range=ranges[0]) for td in query.time_dimensions)
