"""Plans: a query spec with its title, description, search words, chart and reasoning.

:func:`build_plan` wraps a :class:`~chat_api.planner.specs.QuerySpec` into what the agent streams
(the
``svcSqlApi`` input's ``queryTitle``, ``description``, the ``svcMeta`` search words, the chart);
:func:`describe_filter` says a filter in words. :class:`CannotAnswer` is the planner's refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from chat_api.planner.members import (
    COUNT_LABELS,
    DIMENSION_LABELS,
    MEASURES,
    TIME_DIMENSIONS,
    MeasureInfo,
    column_name,
)
from chat_api.planner.reading import Scalar
from chat_api.planner.specs import Filter, QuerySpec, literal, render_semantic_sql
from chat_api.planner.vocabulary import MONTH_NAMES, Vocabulary

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
    """Returns the query's description for the agent.

    For example ``"Average arrival delay (minutes) of flights from JFK per carrier, lowest
    first, top 1."``.
    """
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
        return f"with {label} {_COMPARED[f.operator]} {literal(f.values[0])}{unit}"
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
    return literal(value).strip("'")
