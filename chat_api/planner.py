"""The deterministic planner: an English question -> a Semantic SQL query over the data model.

There is no language model. :func:`plan_question` reads the question
(:func:`chat_api.reading.read_question`: measures, breakdowns, conditions, ranking), maps the
reading onto one view of the data model (a :class:`QuerySpec`: the view is chosen by the
measure; a count of planes or airlines moves to the flights view when the question speaks of
flights) and renders Semantic SQL with :func:`render_semantic_sql`. A follow-up (``previous``
given) changes the previous spec: new filters replace those on the same member, a new
breakdown replaces the old one, new measures replace the old ones. Whatever cannot be mapped
with confidence becomes a :class:`CannotAnswer` with the reason and questions that can be
answered: the planner never guesses a number.

The views and members are a contract with ``chat_api/data_model/main/views.yml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from chat_api.reading import (
    Ask,
    Condition,
    Direction,
    Operator,
    Reading,
    Scalar,
    UnanswerableError,
    read_question,
)
from chat_api.vocabulary import MONTH_NAMES, Vocabulary

Mark = Literal["bar", "line", "text"]
FieldType = Literal["nominal", "ordinal", "quantitative", "temporal"]

SUGGESTIONS = (
    "How many flights were there in March?",
    "Average arrival delay by carrier",
    "Which 3 airlines flew the longest total distance?",
    "Monthly flight counts from EWR",
    "Average wind speed at LGA",
    "How many planes were built by Boeing?",
)
"""Questions the planner answers, offered when it cannot answer one."""


@dataclass(frozen=True)
class Filter:
    """A condition on a dimension (Semantic SQL ``WHERE``).

    Attributes:
        member: Qualified dimension, ``"flights.origin"``.
        operator: Cube filter operator; ``in`` and multi-value ``notEquals`` render as
            ``IN``/``NOT IN``.
        values: One value for ``equals``/``gt``/...; one or more for ``in``/``notEquals``.
    """

    member: str
    operator: Operator
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class QuerySpec:
    """A query over one view: what :func:`render_semantic_sql` turns into Semantic SQL.

    Attributes:
        view: ``"flights"``, ``"weather"``, ``"planes"``, ``"airlines"`` or ``"airports"``.
        measures: Qualified measures, ``("flights.avg_arr_delay",)``; the first is the answer.
        dimensions: Qualified dimensions to group by, ``("flights.carrier_name",)``.
        filters: Conditions, all of which must hold.
        order: ``(member, direction)`` pairs; every member is selected.
        limit: Maximum rows, or None.
    """

    view: str
    measures: tuple[str, ...]
    dimensions: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    order: tuple[tuple[str, Direction], ...] = ()
    limit: int | None = None


@dataclass(frozen=True)
class ChartHint:
    """How to chart the result.

    Attributes:
        mark: ``"text"`` for a single number, ``"line"`` over months/hours/days, else ``"bar"``.
        x: Result column on the x axis, None for ``"text"``.
        y: Result column holding the answer (the first measure).
        x_type: Vega-Lite type of ``x``.
        color: A second breakdown column drawn as colour ("by origin and month"), or None.
    """

    mark: Mark
    x: str | None
    y: str
    x_type: FieldType = "nominal"
    color: str | None = None


@dataclass(frozen=True)
class Plan:
    """A planned answer.

    Attributes:
        question: The question as asked.
        spec: The query.
        semantic_sql: ``render_semantic_sql(spec)``.
        title: ``"Average arrival delay by carrier"``.
        description: One sentence saying what the query computes.
        search_query: Words to search the model's metadata with (the ``svcMeta`` call).
        chart: How to chart the result.
        reasoning: Short sentences explaining the mapping (streamed as the agent's thinking).
        conditions: The filters in words: ``("from JFK (John F Kennedy Intl)", "in July")``.
    """

    question: str
    spec: QuerySpec
    semantic_sql: str
    title: str
    description: str
    search_query: str
    chart: ChartHint
    reasoning: tuple[str, ...]
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class CannotAnswer:
    """The planner's honest refusal.

    Attributes:
        question: The question as asked.
        reason: Why it cannot be answered from the data model.
        suggestions: Example questions that can be answered.
    """

    question: str
    reason: str
    suggestions: tuple[str, ...] = SUGGESTIONS


@dataclass(frozen=True)
class MeasureInfo:
    """How to speak about a measure: ``label`` ("average arrival delay") and ``unit``."""

    label: str
    unit: str


def _measure_catalogue() -> dict[str, MeasureInfo]:
    words = {"avg": "average", "sum": "total", "min": "minimum", "max": "maximum"}
    out = {
        f"{view}.{member}": MeasureInfo(f"{words[agg]} {label}", unit)
        for view, label, unit, members in METRICS.values()
        for agg, member in members.items()
    }
    for member, label in COUNT_LABELS.items():
        out[member] = MeasureInfo(label, "")
    return out


METRICS: Mapping[str, tuple[str, str, str, Mapping[str, str]]] = {
    key: (view, label, unit, dict(pair.split("=") for pair in members.split()))
    for key, (view, label, unit, members) in {
        "arr_delay": ("flights", "arrival delay", "minutes",
                      "avg=avg_arr_delay sum=total_arr_delay min=min_arr_delay max=max_arr_delay"),
        "dep_delay": ("flights", "departure delay", "minutes",
                      "avg=avg_dep_delay sum=total_dep_delay min=min_dep_delay max=max_dep_delay"),
        "distance": ("flights", "distance", "miles",
                     "avg=avg_distance sum=total_distance min=min_distance max=max_distance"),
        "air_time": ("flights", "air time", "minutes",
                     "avg=avg_air_time sum=total_air_time min=min_air_time max=max_air_time"),
        "temp": ("weather", "temperature", "°F", "avg=avg_temp min=min_temp max=max_temp"),
        "humid": ("weather", "relative humidity", "%", "avg=avg_humid"),
        "wind_speed": ("weather", "wind speed", "mph",
                       "avg=avg_wind_speed min=min_wind_speed max=max_wind_speed"),
        "wind_gust": ("weather", "wind gust", "mph", "avg=avg_wind_gust max=max_wind_gust"),
        "precip": ("weather", "precipitation", "inches", "sum=total_precip avg=avg_precip"),
        "visib": ("weather", "visibility", "miles", "avg=avg_visib"),
        "pressure": ("weather", "sea level pressure", "millibars", "avg=avg_pressure"),
        "seats": ("planes", "seats", "seats",
                  "avg=avg_seats sum=total_seats min=min_seats max=max_seats"),
        "plane_year": ("planes", "year built", "", "avg=avg_year min=min_year max=max_year"),
        "alt": ("airports", "altitude", "feet", "avg=avg_alt min=min_alt max=max_alt"),
    }.items()
}  # fmt: skip
"""Metric key -> (view, label, unit, aggregation -> measure name)."""

COUNT_LABELS: Mapping[str, str] = {
    "flights.count": "number of flights",
    "flights.distinct_destinations": "number of distinct destinations",
    "flights.distinct_origins": "number of distinct origins",
    "flights.distinct_carriers": "number of distinct airlines",
    "flights.distinct_planes": "number of distinct planes",
    "weather.count": "number of weather observations",
    "planes.count": "number of planes",
    "planes.distinct_manufacturers": "number of distinct manufacturers",
    "planes.distinct_models": "number of distinct models",
    "airlines.count": "number of airlines",
    "airports.count": "number of airports",
}
MEASURES: Mapping[str, MeasureInfo] = _measure_catalogue()
"""Qualified measure -> label and unit, for titles and answers."""

DIMENSION_LABELS: Mapping[str, str] = {
    "carrier_name": "carrier", "carrier": "carrier code", "origin": "origin",
    "origin_name": "origin name", "dest": "destination", "dest_name": "destination name",
    "month": "month", "hour": "hour", "day": "day", "year": "year", "flight": "flight number",
    "plane_manufacturer": "plane manufacturer", "plane_model": "plane model",
    "tailnum": "tail number", "manufacturer": "manufacturer", "model": "model",
    "engine": "engine", "type": "type", "tzone": "time zone", "faa": "airport",
    "plane_year": "year built", "arr_delay": "arrival delay", "dep_delay": "departure delay",
    "distance": "distance", "air_time": "air time", "seats": "seats", "temp": "temperature",
    "wind_speed": "wind speed", "humid": "humidity", "precip": "precipitation",
    "visib": "visibility", "alt": "altitude",
}  # fmt: skip
"""Member name (without view) -> label."""

TIME_DIMENSIONS = frozenset({"month", "hour", "day", "year"})
"""Dimensions that order a breakdown by themselves and draw as a line."""


def column_name(member: str) -> str:
    """Returns: the result column of a member, its name without the view (``"avg_arr_delay"``)."""
    return member.rpartition(".")[2]


def render_semantic_sql(spec: QuerySpec) -> str:
    """Renders a spec as Semantic SQL (Postgres-flavoured, as for Cube's SQL API).

    Every member is selected under its own name (``AS avg_arr_delay``); dimensions are grouped by
    position; measures are wrapped in ``MEASURE()``; string literals are quoted with ``''``
    doubled.

    Args:
        spec: The query.

    Returns:
        One statement: ``SELECT flights.carrier_name AS carrier_name,
        MEASURE(flights.avg_arr_delay) AS avg_arr_delay FROM flights GROUP BY 1 ORDER BY 2 DESC``.
    """
    selected = list(spec.dimensions) + list(spec.measures)
    items = [f"{d} AS {column_name(d)}" for d in spec.dimensions]
    items += [f"MEASURE({m}) AS {column_name(m)}" for m in spec.measures]
    sql = f"SELECT {', '.join(items)} FROM {spec.view}"
    if spec.filters:
        sql += " WHERE " + " AND ".join(_render_filter(f) for f in spec.filters)
    if spec.dimensions:
        sql += " GROUP BY " + ", ".join(str(n) for n in range(1, len(spec.dimensions) + 1))
    if spec.order:
        sql += " ORDER BY " + ", ".join(
            f"{selected.index(member) + 1} {direction.upper()}" for member, direction in spec.order
        )
    if spec.limit is not None:
        sql += f" LIMIT {spec.limit}"
    return sql


_SQL_OPERATORS = {"equals": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _render_filter(f: Filter) -> str:
    values = [_literal(value) for value in f.values]
    if f.operator == "in" or (f.operator == "notEquals" and len(values) > 1):
        keyword = "IN" if f.operator == "in" else "NOT IN"
        return f"{f.member} {keyword} ({', '.join(values)})"
    operator = "<>" if f.operator == "notEquals" else _SQL_OPERATORS[f.operator]
    return f"{f.member} {operator} {values[0]}"


def _literal(value: Scalar) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- mapping a reading onto a view -----------------------------------------------------------------

_COUNT_MEASURES: Mapping[str, Mapping[str, str]] = {
    "flights": {"flights": "count"},
    "planes": {"planes": "count", "flights": "distinct_planes"},
    "airlines": {"airlines": "count", "flights": "distinct_carriers"},
    "airports": {"airports": "count", "flights": "distinct_destinations"},
    "destinations": {"flights": "distinct_destinations"},
    "origins": {"flights": "distinct_origins"},
    "manufacturers": {"planes": "distinct_manufacturers"},
    "models": {"planes": "distinct_models"},
    "observations": {"weather": "count"},
}
"""Countable noun -> view -> measure, the entity's own view first."""

_SLOT_MEMBERS: Mapping[str, Mapping[str, str]] = {
    "flights": {
        "carrier": "carrier", "origin": "origin", "dest": "dest",
        "manufacturer": "plane_manufacturer", "month": "month", "year": "year", "day": "day",
        "plane_year": "plane_year", "arr_delay": "arr_delay", "dep_delay": "dep_delay",
        "air_time": "air_time", "distance": "distance",
    },
    "weather": {
        "origin": "origin", "month": "month", "year": "year", "day": "day", "temp": "temp",
        "humid": "humid", "wind_speed": "wind_speed", "precip": "precip", "visib": "visib",
    },
    "planes": {"manufacturer": "manufacturer", "plane_year": "year", "seats": "seats"},
    "airports": {"origin": "faa", "dest": "faa", "airport": "faa", "alt": "alt"},
    "airlines": {"carrier": "carrier"},
}  # fmt: skip
"""View -> condition slot -> dimension."""

_DIM_MEMBERS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "flights": {
        "airlines": ("carrier_name",), "origins": ("origin", "origin_name"),
        "airports": ("origin", "origin_name"), "destinations": ("dest", "dest_name"),
        "months": ("month",), "hours": ("hour",), "days": ("day",), "years": ("year",),
        "manufacturers": ("plane_manufacturer",), "models": ("plane_model",),
        "planes": ("tailnum",),
    },
    "weather": {
        "origins": ("origin",), "airports": ("origin",), "months": ("month",),
        "hours": ("hour",), "days": ("day",), "years": ("year",),
    },
    "planes": {
        "manufacturers": ("manufacturer",), "models": ("model",), "engines": ("engine",),
        "plane_types": ("type",), "years": ("year",),
    },
    "airports": {"timezones": ("tzone",)},
    "airlines": {},
}  # fmt: skip
"""View -> breakdown noun -> dimensions to group by."""

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
    base = previous if previous is not None and (reading.followup or not reading.asks) else None
    if reading.asks:
        view = _choose_view(reading, vocabulary)
    elif base is not None:
        view = base.view
    else:
        raise UnanswerableError(_NO_MEASURE)
    if base is not None and view != base.view:
        notes.append("The question is about another view, so it starts afresh.")
        base = None
    if base is not None:
        notes.append("Follow-up: keeping what the previous question asked unless changed.")
    dims = _dimensions(reading, view, notes)
    if base is not None and not reading.dims:
        dims = () if reading.overall else base.dimensions
    measures, rank = _measures(reading, view, bool(dims), notes)
    filters = _filters(reading.conds, view, vocabulary, notes)
    if base is not None:
        replaced = {f.member for f in filters}
        filters = tuple(f for f in base.filters if f.member not in replaced) + filters
        measures = measures or base.measures
    spec = QuerySpec(view, measures, dims, filters)
    return _ordered(spec, reading, rank, base, notes), notes


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
        fits = place_ok and slots - {"place"} <= set(_SLOT_MEMBERS[view])
        if fits and {d.noun for d in reading.dims} <= set(_DIM_MEMBERS[view]):
            return view
    return common[0]


def _ask_views(ask: Ask) -> tuple[str, ...]:
    if ask.agg == "count":
        return tuple(_COUNT_MEASURES[ask.subject])
    return (METRICS[ask.subject][0],)


def _dimensions(reading: Reading, view: str, notes: list[str]) -> tuple[str, ...]:
    members: list[str] = []
    for dim in reading.dims:
        names = _DIM_MEMBERS[view].get(dim.noun)
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
    member = _COUNT_MEASURES[ask.subject].get(view)
    if member is None:
        raise UnanswerableError(f"Counting {ask.subject} is not possible with {view} conditions.")
    if ask.subject == "airports" and view == "flights" and reading.origin_role:
        member = "distinct_origins"
    return f"{view}.{member}"


_AGG_WORDS = {"avg": "average", "sum": "total", "min": "minimum", "max": "maximum"}


def _aggregated_member(ask: Ask, has_dims: bool, notes: list[str]) -> tuple[str, Direction | None]:
    view, label, _, members = METRICS[ask.subject]
    agg, rank = ask.agg, None
    if ask.superlative is not None and (agg is not None or has_dims):
        rank = ask.superlative
    elif ask.superlative is not None:
        agg = "max" if ask.superlative == "desc" else "min"
    if agg is None:
        agg = next(iter(members))
        notes.append(f"No aggregation was named for {label}; using the {_AGG_WORDS[agg]}.")
    if agg not in members:
        offered = ", ".join(_AGG_WORDS[a] for a in members)
        raise UnanswerableError(
            f"The data model has no {_AGG_WORDS[agg]} {label}; it offers the {offered}."
        )
    return f"{view}.{members[agg]}", rank


def _filters(
    conds: Sequence[Condition], view: str, vocabulary: Vocabulary, notes: list[str]
) -> tuple[Filter, ...]:
    merged: dict[tuple[str, str], Filter] = {}
    for cond in conds:
        member = f"{view}.{_slot_member(cond, view, vocabulary)}"
        key = (member, cond.operator)
        old = merged.get(key)
        values = cond.values if old is None else old.values + cond.values
        operator = cond.operator
        if operator == "equals" and len(values) > 1:
            operator = "in"
        merged[key] = Filter(member, operator, tuple(dict.fromkeys(values)))
        said = _render_filter(Filter(member, cond.operator, cond.values))
        notes.append(f"'{cond.phrase}' → filter {said}.")
    return tuple(merged.values())


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
    member = _SLOT_MEMBERS[view].get(slot)
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


# -- the plan: title, description, conditions in words, chart ------------------------------------


def plan_question(
    question: str, *, vocabulary: Vocabulary, previous: QuerySpec | None = None
) -> Plan | CannotAnswer:
    """Plans a question: maps it onto one view of the data model, or explains why it can't.

    Args:
        question: English, e.g. ``"Which 3 airlines flew the longest total distance?"``.
        vocabulary: Values to recognise (:func:`chat_api.vocabulary.load_vocabulary`).
        previous: The previous query of the thread; a follow-up ("and only from JFK?", "now by
            month", "what about Delta?") changes it instead of starting afresh.

    Returns:
        A :class:`Plan`, or a :class:`CannotAnswer` with the reason and example questions when a
        word is unknown, a subject is not in the model (revenue, passengers), a number or
        condition can't be placed, or the measures span views. Never raises for a question.
    """
    try:
        reading = read_question(question, vocabulary)
        spec, notes = _build_spec(reading, vocabulary, previous)
    except UnanswerableError as exc:
        return CannotAnswer(question, exc.reason)
    return build_plan(question, spec, vocabulary=vocabulary, reasoning=notes)


def build_plan(
    question: str, spec: QuerySpec, *, vocabulary: Vocabulary, reasoning: Sequence[str] = ()
) -> Plan:
    """Wraps a spec into a plan: Semantic SQL, title, description, search words and chart.

    Args:
        question: The question the spec answers.
        spec: The query.
        vocabulary: For naming carriers and airports in the conditions.
        reasoning: Sentences explaining the mapping.

    Returns:
        The plan.
    """
    conditions = tuple(describe_filter(f, vocabulary) for f in spec.filters)
    info = MEASURES[spec.measures[0]]
    dims = _dimension_words(spec)
    title = info.label[0].upper() + info.label[1:]
    title += "".join(f" {c}" for c in conditions) + (f" by {dims}" if dims else "")
    if spec.limit is not None and spec.order:
        title += f" ({'top' if spec.order[0][1] == 'desc' else 'bottom'} {spec.limit})"
    description = _description(spec, info, dims, conditions)
    count = ["count"] if spec.measures[0] in COUNT_LABELS else []
    words = [spec.view, *count, *info.label.split(), *dims.split()]
    search = " ".join(dict.fromkeys(w for w in words if w not in ("and", "of", "number")))
    return Plan(
        question=question,
        spec=spec,
        semantic_sql=render_semantic_sql(spec),
        title=title,
        description=description,
        search_query=search,
        chart=_chart(spec),
        reasoning=(f"Querying the {spec.view} view.", *reasoning),
        conditions=conditions,
    )


_SUBJECTS = {"weather": "weather observations"}


def _description(spec: QuerySpec, info: MeasureInfo, dims: str, conditions: tuple[str, ...]) -> str:
    """Returns: ``"Average arrival delay (minutes) of flights from JFK per carrier, lowest
    first, top 1."``"""
    text = info.label[0].upper() + info.label[1:]
    if info.unit and info.unit != info.label.split()[-1]:
        text += f" ({info.unit})"
    subject = _SUBJECTS.get(spec.view, spec.view)
    if subject not in info.label:
        text += f" of {subject}"
    text += "".join(f" {c}" for c in conditions) + (f" per {dims}" if dims else "")
    if spec.order and spec.order[0][0] in spec.measures:
        text += ", highest first" if spec.order[0][1] == "desc" else ", lowest first"
    if spec.limit is not None:
        text += f", top {spec.limit}"
    return text + "."


def _shown_columns(spec: QuerySpec) -> list[str]:
    """Returns: the breakdown columns, without a ``*_name`` column whose code is selected."""
    names = [column_name(d) for d in spec.dimensions]
    return [n for n in names if not (n.endswith("_name") and n.removesuffix("_name") in names)]


def _dimension_words(spec: QuerySpec) -> str:
    return " and ".join(DIMENSION_LABELS.get(n, n) for n in _shown_columns(spec))


def _chart(spec: QuerySpec) -> ChartHint:
    y = column_name(spec.measures[0])
    shown = _shown_columns(spec)
    if not shown:
        return ChartHint("text", None, y, "quantitative")
    timed = [name for name in shown if name in TIME_DIMENSIONS]
    x = timed[0] if timed else shown[0]
    color = next((name for name in shown if name != x), None)
    if x in TIME_DIMENSIONS and spec.limit is None:
        return ChartHint("line", x, y, "ordinal", color)
    return ChartHint("bar", x, y, "ordinal" if x in TIME_DIMENSIONS else "nominal", color)


_PREFIXES = {
    "origin": "from", "dest": "to", "carrier": "for", "month": "in", "year": "in",
    "day": "on day", "plane_manufacturer": "on planes made by", "manufacturer": "made by",
    "faa": "at", "plane_year": "built in",
}  # fmt: skip
_COMPARED = {"gt": "over", "gte": "at least", "lt": "under", "lte": "at most"}
_TIME_COMPARED = {"gt": "after", "gte": "from", "lt": "before", "lte": "through"}
_UNITS = {"arr_delay": "minutes", "dep_delay": "minutes", "air_time": "minutes",
          "distance": "miles", "temp": "°F", "wind_speed": "mph", "alt": "feet",
          "visib": "miles", "humid": "%", "precip": "inches"}  # fmt: skip


def describe_filter(f: Filter, vocabulary: Vocabulary) -> str:
    """Says a filter in words.

    Args:
        f: The filter.
        vocabulary: For carrier and airport names.

    Returns:
        ``"from JFK (John F Kennedy Intl)"``, ``"for JetBlue Airways (B6) or Delta Air Lines
        Inc. (DL)"``, ``"in March"``, ``"after June"``, ``"with arrival delay over 30 minutes"``,
        ``"not to ATL (Hartsfield Jackson Atlanta Intl)"``.
    """
    name = column_name(f.member)
    labels = [_value_label(name, value, vocabulary) for value in f.values]
    built = name == "plane_year" or f.member == "planes.year"
    if f.operator in _COMPARED and name in ("month", "year", "plane_year"):
        return f"{'built ' if built else ''}{_TIME_COMPARED[f.operator]} {labels[0]}"
    if built and f.operator in ("equals", "in"):
        return f"built in {' or '.join(labels)}"
    if f.operator in _COMPARED:
        unit = f" {_UNITS[name]}" if name in _UNITS else ""
        label = DIMENSION_LABELS.get(name, name)
        return f"with {label} {_COMPARED[f.operator]} {_literal(f.values[0])}{unit}"
    prefix = "at" if f.member == "weather.origin" else _PREFIXES.get(name, f"with {name}")
    negation = "not " if f.operator == "notEquals" else ""
    return f"{negation}{prefix} {' or '.join(labels)}"


def _value_label(name: str, value: Scalar, vocabulary: Vocabulary) -> str:
    if name == "carrier":
        return vocabulary.carrier_label(str(value))
    if name in ("origin", "dest", "faa"):
        return vocabulary.airport_label(str(value))
    if name == "month" and isinstance(value, int | float) and 1 <= value <= 12:
        return MONTH_NAMES[int(value) - 1]
    return _literal(value).strip("'")
