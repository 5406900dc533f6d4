"""The deterministic planner: an English question -> a Semantic SQL query over the data model.

There is no language model. :func:`plan_question` reads the question
(:func:`chat_api.planner.reading.read_question`: measures, breakdowns, conditions, ranking), maps
the
reading onto one view of the data model (a :class:`~chat_api.planner.specs.QuerySpec`: the view is
chosen by the measure; a count of planes or airlines moves to the flights view when the question
speaks of flights) and wraps it into a :class:`~chat_api.planner.plans.Plan`. A follow-up
(``previous``
given) changes the previous spec: new filters replace those on the same member, a new breakdown
replaces the old one, new measures replace the old ones. Whatever cannot be mapped with
confidence becomes a :class:`~chat_api.planner.plans.CannotAnswer` with the reason and questions
that
can be answered: the planner never guesses a number.

The member tables it maps onto are in :mod:`chat_api.planner.members`; specs and their Semantic SQL
in
:mod:`chat_api.planner.specs`; titles, descriptions and charts in :mod:`chat_api.planner.plans`.
Their public
names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from chat_api.planner.followups import carried_filters, check_changes, reaggregated
from chat_api.planner.members import (
    AGG_WORDS,
    COUNT_LABELS,
    COUNT_MEASURES,
    DIM_MEMBERS,
    DIMENSION_LABELS,
    MEASURES,
    METRICS,
    SLOT_MEMBERS,
    TIME_DIMENSIONS,
    MeasureInfo,
    column_name,
)
from chat_api.planner.plans import (
    SUGGESTIONS,
    CannotAnswer,
    ChartHint,
    Plan,
    build_plan,
    describe_filter,
)
from chat_api.planner.reading import (
    Ask,
    Condition,
    Direction,
    Reading,
    UnanswerableError,
    read_question,
)
from chat_api.planner.shapes import compared, has_sides, refuse_grouped_sides, shared
from chat_api.planner.specs import Filter, QuerySpec, render_filter, render_semantic_sql
from chat_api.planner.vocabulary import Vocabulary

__all__ = [
    "COUNT_LABELS",
    "DIMENSION_LABELS",
    "MEASURES",
    "METRICS",
    "SUGGESTIONS",
    "TIME_DIMENSIONS",
    "CannotAnswer",
    "ChartHint",
    "Filter",
    "MeasureInfo",
    "Plan",
    "QuerySpec",
    "QuestionReader",
    "build_plan",
    "column_name",
    "describe_filter",
    "plan_question",
    "render_semantic_sql",
    "rule_reader",
]  # fmt: skip

_FLIGHT_SLOTS = frozenset({"carrier", "origin", "dest", "arr_delay", "dep_delay", "distance"})
_NO_MEASURE = (
    "I couldn't find a measure in the question. I can count flights, planes, airlines, airports "
    "and weather observations, and give totals, averages, minimums and maximums of delays, "
    "distance, air time, seats, temperature, wind, humidity, precipitation and visibility."
)


def _build_spec(
    reading: Reading, vocabulary: Vocabulary, previous: QuerySpec | None
) -> tuple[QuerySpec, list[str]]:
    notes = list(reading.notes)
    if previous is not None and reading.elliptic:  # "in july?": the previous query, narrowed
        reading = replace(reading, asks=(), followup=True)
    elif previous is not None and reading.restates:  # "avg arr delay": of the same flights
        reading = replace(reading, followup=True)
    base = previous if previous is not None and (reading.followup or not reading.asks) else None
    if base is not None:
        check_changes(reading)
    if reading.asks:
        view = _choose_view(reading, vocabulary)
    elif base is not None:
        view = base.view
    else:
        raise UnanswerableError(_NO_MEASURE)
    carried: tuple[Filter, ...] = ()
    if base is not None and view != base.view:
        carried, base = carried_filters(base, view, notes), None
    if base is not None:
        notes.append("Follow-up: keeping what the previous question asked unless changed.")
    dims = _dimensions(reading, view, notes)
    if base is not None and not reading.dims:
        dims = () if reading.overall else base.dimensions
    measures, rank = _measures(reading, view, bool(dims), notes)
    if base is not None and not measures and reading.lone_agg:
        measures = (reaggregated(base.measures[0], reading.lone_agg),)
        notes.append(f"'{AGG_WORDS[reading.lone_agg]}' → {measures[0]} instead.")
    filters = _filters(reading.conds, view, vocabulary, notes)
    kept = base.filters if base is not None else carried
    replaced = {f.member for f in filters}
    filters = tuple(f for f in kept if f.member not in replaced) + filters
    if base is not None:
        measures = _same_delay(measures, reading, base) or base.measures
    spec = _shaped(QuerySpec(view, measures, dims, filters), reading, base, notes)
    return _ordered(spec, reading, rank, base, notes), notes


def _same_delay(measures: tuple[str, ...], reading: Reading, base: QuerySpec) -> tuple[str, ...]:
    """A bare "delay" in a follow-up about departure delays stays the departure delay."""
    if reading.bare_delay and any("dep_delay" in m for m in base.measures):
        return tuple(m.replace("arr_delay", "dep_delay") for m in measures)
    return measures


def _shaped(
    spec: QuerySpec, reading: Reading, base: QuerySpec | None, notes: list[str]
) -> QuerySpec:
    """A share or a comparison, said now or carried from the previous question."""
    if reading.share:
        spec = shared(spec, notes)
    elif base is not None and base.share_of and not reading.asks:
        spec = _carried_share(spec, base)
    elif base is not None and base.share_of:  # "how many flights was that?": the part's flights
        said = {f.member for f in spec.filters}
        part = tuple(f for f in base.share_of if f.member not in said)
        spec = replace(spec, filters=spec.filters + part)
    carried = base is not None and base.compare and not reading.dims
    if reading.compare_explicit or carried or (reading.compare and has_sides(spec)):
        refuse_grouped_sides(reading.conds)
        spec = compared(spec, notes)
    return spec


def _carried_share(spec: QuerySpec, base: QuerySpec) -> QuerySpec:
    """Keeps the previous share; a new condition on the part's member replaces the part."""
    part_members = {f.member for f in base.share_of}
    new_part = tuple(f for f in spec.filters if f.member in part_members)
    rest = tuple(f for f in spec.filters if f.member not in part_members)
    part = tuple(f for f in base.share_of if f.member not in {g.member for g in new_part})
    return replace(spec, filters=rest, share_of=part + new_part)


def _choose_view(reading: Reading, vocabulary: Vocabulary) -> str:
    options = [_ask_views(ask) for ask in reading.asks]
    common = [view for view in options[0] if all(view in views for views in options)]
    if not common:
        views = sorted({views[0] for views in options})
        raise UnanswerableError(
            f"The question combines measures of {' and '.join(views)}, which the data model "
            "keeps in separate views; ask about one of them at a time."
        )
    slots = {c.slot for c in reading.conds}
    flights = reading.flight_context or bool(slots & _FLIGHT_SLOTS)
    flights = flights or any(
        c.slot == "place" and not set(c.values) <= vocabulary.origins for c in reading.conds
    )
    if flights and "flights" in common:
        return "flights"
    for view in common:
        place_ok = "place" not in slots or view != "planes"
        fits = place_ok and slots - {"place"} <= set(SLOT_MEMBERS[view])
        if fits and {d.noun for d in reading.dims} <= set(DIM_MEMBERS[view]):
            return view
    return common[0]


def _ask_views(ask: Ask) -> tuple[str, ...]:
    if ask.agg == "count":
        return tuple(COUNT_MEASURES[ask.subject])
    return (METRICS[ask.subject][0],)


def _dimensions(reading: Reading, view: str, notes: list[str]) -> tuple[str, ...]:
    members: list[str] = []
    for dim in reading.dims:
        names = DIM_MEMBERS[view].get(dim.noun)
        if names is None:
            raise UnanswerableError(f"The {view} data can't be broken down by '{dim.phrase}'.")
        qualified = [f"{view}.{name}" for name in names if f"{view}.{name}" not in members]
        members += qualified
        notes.append(f"'{dim.phrase}' → group by {', '.join(qualified)}.")
    return tuple(members)


def _measures(
    reading: Reading, view: str, has_dims: bool, notes: list[str]
) -> tuple[tuple[str, ...], Direction | None]:
    measures: list[str] = []
    rank = reading.rank
    for ask in reading.asks:
        if ask.agg == "count":
            member = _count_member(ask, view, reading)
        else:
            member, ask_rank = _aggregated_member(ask, has_dims, notes)
            rank = rank or ask_rank
        if member not in measures:
            measures.append(member)
            notes.append(f"'{ask.phrase}' → {member} ({MEASURES[member].label}).")
    return tuple(measures), rank


def _count_member(ask: Ask, view: str, reading: Reading) -> str:
    member = COUNT_MEASURES[ask.subject].get(view)
    if member is None:
        raise UnanswerableError(f"Counting {ask.subject} is not possible with {view} conditions.")
    if ask.subject == "airports" and view == "flights" and reading.origin_role:
        member = "distinct_origins"
    return f"{view}.{member}"


def _aggregated_member(ask: Ask, has_dims: bool, notes: list[str]) -> tuple[str, Direction | None]:
    view, label, _, members = METRICS[ask.subject]
    agg, rank = ask.agg, None
    if ask.superlative is not None and (agg is not None or has_dims):
        rank = ask.superlative
    elif ask.superlative is not None:
        agg = "max" if ask.superlative == "desc" else "min"
    if agg is None and ask.superlative is not None and ask.subject == "distance" and has_dims:
        agg = "max"  # "the farthest destination": the longest flight to it
    if agg is None:
        agg = next(iter(members))
        notes.append(f"No aggregation was named for {label}; using the {AGG_WORDS[agg]}.")
    if agg not in members:
        offered = ", ".join(AGG_WORDS[a] for a in members)
        raise UnanswerableError(
            f"The data model has no {AGG_WORDS[agg]} {label}; it offers the {offered}."
        )
    return f"{view}.{members[agg]}", rank


def _filters(
    conds: Sequence[Condition], view: str, vocabulary: Vocabulary, notes: list[str]
) -> tuple[Filter, ...]:
    """Merges the conditions on one member into one list of values ("JFK or LGA").

    The exception is a wider one that strictly holds all the others ("Chicago" and "Midway",
    "summer" and "July"): it stays a condition of its own, before them (their intersection; in a
    share, the whole and its part).
    """
    groups: dict[tuple[str, str], list[Condition]] = {}
    for cond in conds:
        member = f"{view}.{_slot_member(cond, view, vocabulary)}"
        groups.setdefault((member, cond.operator), []).append(cond)
        said = render_filter(Filter(member, cond.operator, cond.values))
        notes.append(f"'{cond.phrase}' → filter {said}.")
    out: list[Filter] = []
    for (member, operator), group in groups.items():
        wide = [c for c in group if operator == "equals" and _holds_the_others(c, group)]
        rest = [c for c in group if c not in wide]
        for part in [[c] for c in wide] + ([rest] if rest else []):
            values = tuple(dict.fromkeys(v for c in part for v in c.values))
            merged = "in" if operator == "equals" and len(values) > 1 else operator
            out.append(Filter(member, merged, values))  # type: ignore[arg-type]
    return tuple(out)


def _holds_the_others(cond: Condition, group: list[Condition]) -> bool:
    others = {v for c in group if c is not cond for v in c.values}
    return bool(others) and others < set(cond.values)


def _slot_member(cond: Condition, view: str, vocabulary: Vocabulary) -> str:
    slot = cond.slot
    if slot in ("place", "origin", "dest") and view != "flights":
        slot = "origin" if view == "weather" else "airport"
    elif slot == "place":
        slot = "origin" if set(cond.values) <= vocabulary.origins else "dest"
    outside = not set(cond.values) <= vocabulary.origins
    origins = ", ".join(sorted(vocabulary.origins))
    if view == "weather" and slot == "origin" and outside:
        raise UnanswerableError(f"Weather is recorded only at {origins}, not at {cond.phrase}.")
    if view == "flights" and slot == "origin" and outside and cond.operator == "equals":
        raise UnanswerableError(
            f"The data holds flights departing New York City ({origins}) only, so none depart "
            f"from {cond.phrase}; ask about flights to it instead."
        )
    member = SLOT_MEMBERS[view].get(slot)
    if member is None:
        raise UnanswerableError(
            f"The {view} data has no {slot.replace('_', ' ')}, so '{cond.phrase}' can't be "
            "applied to it."
        )
    return member


def _ordered(
    spec: QuerySpec, reading: Reading, rank: Direction | None, base: QuerySpec | None,
    notes: list[str],
) -> QuerySpec:  # fmt: skip
    primary = spec.measures[0]
    if rank is not None:
        if not spec.dimensions:
            raise UnanswerableError(
                f"'{reading.rank_phrase}' needs something to rank; for example 'Which carrier "
                "has the highest average arrival delay?'"
            )
        limit = reading.limit or (1 if reading.singular else None)
        limit = limit or (10 if reading.top_default else None)
        measures = spec.measures
        if primary not in COUNT_LABELS and f"{spec.view}.count" not in measures:
            measures += (f"{spec.view}.count",)
        shown = f", keeping {limit} row{'s' if limit != 1 else ''}" if limit else ""
        notes.append(f"'{reading.rank_phrase}' → order by {primary} {rank}{shown}.")
        return replace(spec, measures=measures, order=((primary, rank),), limit=limit)
    selected = spec.dimensions + spec.measures
    same_rows = base is not None and base.dimensions == spec.dimensions
    if base is not None and same_rows and all(member in selected for member, _ in base.order):
        return replace(spec, order=base.order, limit=base.limit)
    if not spec.dimensions:
        return spec
    first = spec.dimensions[0]
    if column_name(first) in TIME_DIMENSIONS:
        return replace(spec, order=((first, "asc"),), limit=reading.limit)
    return replace(spec, order=((primary, "desc"),), limit=reading.limit)


class QuestionReader(Protocol):
    """Reads a question into a structured query: what every reader of the agent provides.

    The query (:class:`QuerySpec`: view, measures, dimensions, filters, order, limit, comparison
    sides, a share's part) is all that leaves the reader; what follows it (row-level security
    said out loud, the access policy, the SQL guard, compilation and the answer) is the same
    whichever reader produced it, so a language-model reader can be added behind this interface
    without touching the safety rules.
    """

    def __call__(
        self, question: str, *, vocabulary: Vocabulary, previous: QuerySpec | None
    ) -> tuple[QuerySpec, list[str]]:
        """Returns: the query and the reasoning sentences.

        Raises:
            UnanswerableError: The question can't be read without guessing; ``reason`` says
                why, naming the word or subject.
        """
        ...


def rule_reader(
    question: str, *, vocabulary: Vocabulary, previous: QuerySpec | None
) -> tuple[QuerySpec, list[str]]:
    """The deterministic reader (:func:`read_question`, then the mapping onto the model)."""
    return _build_spec(read_question(question, vocabulary), vocabulary, previous)


def plan_question(
    question: str,
    *,
    vocabulary: Vocabulary,
    previous: QuerySpec | None = None,
    reader: QuestionReader = rule_reader,
) -> Plan | CannotAnswer:
    """Plans a question: maps it onto one view of the data model, or explains why it can't.

    Args:
        question: English, e.g. ``"Which 3 airlines flew the longest total distance?"``.
        vocabulary: Values to recognise (:func:`chat_api.planner.vocabulary.load_vocabulary`).
        previous: The previous query of the thread; a follow-up ("and only from JFK?", "now by
            month", "what about Delta?") changes it instead of starting afresh.
        reader: Reads the question into a query (:class:`QuestionReader`).

    Returns:
        A :class:`Plan`, or a :class:`CannotAnswer` with the reason and example questions when a
        word is unknown, a subject is not in the model (revenue, passengers), a number or
        condition can't be placed, or the measures span views. Never raises for a question.
    """
    try:
        spec, notes = reader(question, vocabulary=vocabulary, previous=previous)
    except UnanswerableError as exc:
        return CannotAnswer(question, exc.reason)
    return build_plan(question, spec, vocabulary=vocabulary, reasoning=notes)
