"""The agent's words and chart for a planned query and its result.

- :func:`compose_answer`: a short markdown answer quoting the real numbers of the result: one
  sentence for a single number ("There were 28,834 flights in March."), the top row named for a
  "which ... highest/lowest" question, a compact table (at most 15 rows) for a breakdown;
  the active filters are always said.
- :func:`vega_spec`: a Vega-Lite v5 specification without data; the rows are bound to the
  data set named ``result`` (interface, "svcSqlApi tool": ``vegaSpec`` holds no data).
- :func:`compose_cannot_answer`: the honest refusal with questions that can be answered.

Pure functions over the plan and the rows of ``Warehouse.run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_api.planner.members import (
    COUNT_LABELS,
    DIMENSION_LABELS,
    MEASURES,
    TIME_DIMENSIONS,
    column_name,
)
from chat_api.planner.plans import CannotAnswer, Plan
from chat_api.planner.vocabulary import MONTH_NAMES

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
DATA_NAME = "result"
"""Name of the Vega-Lite data set the client fills with ``toolCall.result.data``."""
MAX_TABLE_ROWS = 15
SMALL_GROUP = 30
"""A ranked average over fewer rows than this is flagged as resting on few flights."""

_COUNT_NOUNS = {
    "flights.count": "flight", "weather.count": "weather observation", "planes.count": "plane",
    "airlines.count": "airline", "airports.count": "airport",
    "flights.distinct_destinations": "distinct destination",
    "flights.distinct_origins": "distinct origin airport",
    "flights.distinct_carriers": "distinct airline", "flights.distinct_planes": "distinct plane",
    "planes.distinct_manufacturers": "distinct manufacturer",
    "planes.distinct_models": "distinct model",
}  # fmt: skip
_TIGHT_UNITS = frozenset({"°F", "%"})
_PAIRED = {"origin": "origin_name", "dest": "dest_name"}
_STATIC_VIEWS = frozenset({"planes", "airlines", "airports"})
_YEAR_COLUMNS = frozenset({"year", "plane_year", "avg_year", "min_year", "max_year"})


def compose_answer(
    plan: Plan,
    *,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    total_rows: int,
) -> str:
    """Writes the final answer from the result of the plan's query.

    Args:
        plan: The plan whose query ran.
        columns: ``(name, column_type)`` per result column (``QueryResult.columns``).
        rows: The returned rows (``QueryResult.rows``), at most the warehouse's row limit.
        total_rows: Rows of the whole result.

    Returns:
        Markdown: a sentence for one number, or a sentence and a table for a breakdown.
    """
    names = [name for name, _ in columns]
    records = [dict(zip(names, row, strict=False)) for row in rows]
    where = "".join(f" {c}" for c in plan.conditions)
    if not records:
        return f"No {_subject(plan)} matched{where or ' the question'}, so there is no result."
    from chat_api.planner import shape_answers  # it builds on this module's formatting

    if not plan.spec.dimensions:
        if plan.spec.measures[0].endswith(".cancellation_rate"):
            sentence = _single_sentence(plan, plan.spec.measures[0], records[0], where)
            return f"{sentence} {shape_answers.cancellation_note(plan.spec, records[0])}"
        return " ".join(
            _single_sentence(plan, member, records[0], where) for member in _answered(plan)
        )
    if plan.spec.compare:
        sentence = shape_answers.comparison_sentence(plan, records)
        return f"{sentence}\n\n{_breakdown(plan, names, records, total_rows)}".strip()
    ranked = (
        plan.spec.limit is not None
        and plan.spec.order[:1]
        and plan.spec.order[0][0] in plan.spec.measures
    )
    if ranked and plan.spec.limit == 1:
        return _top_row(plan, records[0], where)
    table = _breakdown(plan, names, records, total_rows)
    if plan.spec.measures[0].endswith(".cancellation_rate"):
        table += f"\n\n{shape_answers.CANCELLED_RULE}."
    return f"{_top_row(plan, records[0], where)}\n\n{table}" if ranked else table


def _answered(plan: Plan) -> list[str]:
    """The measures the question asked for (not the supporting count of a ranking)."""
    measures = list(plan.spec.measures)
    if len(measures) > 1 and plan.spec.order and measures[-1].endswith(".count"):
        measures.pop()
    return measures


def _subject(plan: Plan) -> str:
    return "weather observations" if plan.spec.view == "weather" else plan.spec.view


def _single_sentence(plan: Plan, member: str, record: dict[str, Any], where: str) -> str:
    value = record.get(column_name(member))
    verb = "is" if plan.spec.view in _STATIC_VIEWS else "was"
    if member in _COUNT_NOUNS:
        noun = _COUNT_NOUNS[member]
        count = int(value or 0)
        plural = "" if count == 1 else "s"
        are = ("is" if count == 1 else "are") if verb == "is" else ("was" if count == 1 else "were")
        return f"There {are} {format_value(member, value)} {noun}{plural}{where}."
    label = MEASURES[member].label
    if value is None:
        return f"There is no {label}{where}: no {_subject(plan)} with a value matched."
    return f"The {label}{where} {verb} {format_value(member, value, unit=True)}."


def _top_row(plan: Plan, record: dict[str, Any], where: str) -> str:
    member, direction = plan.spec.order[0]
    word = "highest" if direction == "desc" else "lowest"
    label = MEASURES[member].label
    if member in COUNT_LABELS:
        word, label = ("most" if direction == "desc" else "fewest"), label.replace("number of ", "")
    text = f"**{row_label(plan, record)}** had the {word} {label}{where}"
    text += f": {format_value(member, record.get(column_name(member)), unit=True)}"
    count = record.get("count") if member not in COUNT_LABELS else None
    if isinstance(count, int):
        noun = _COUNT_NOUNS.get(f"{plan.spec.view}.count", "row")
        noun += "" if count == 1 else "s"
        text += f" (from only {count:,} {noun})" if count < SMALL_GROUP else f" ({count:,} {noun})"
    return text + "."


def row_label(plan: Plan, record: dict[str, Any]) -> str:
    """Returns: the breakdown values of a result row in words ("JFK (John F Kennedy Intl)")."""
    parts = []
    for name in _shown_dimensions(plan):
        parts.append(_cell(name, record))
    return ", ".join(parts)


def _shown_dimensions(plan: Plan) -> list[str]:
    names = [column_name(d) for d in plan.spec.dimensions]
    return [n for n in names if not (n.endswith("_name") and n.removesuffix("_name") in names)]


def _cell(name: str, record: dict[str, Any]) -> str:
    value = record.get(name)
    if value is None:
        return "(missing)"
    if name == "month" and isinstance(value, int) and 1 <= value <= 12:
        return MONTH_NAMES[value - 1]
    paired = record.get(_PAIRED.get(name, ""))
    if paired:
        return f"{value} ({paired})"
    return str(value) if name in _YEAR_COLUMNS or not isinstance(value, int) else f"{value:,}"


def _breakdown(plan: Plan, names: list[str], records: list[dict[str, Any]], total_rows: int) -> str:
    dims = _shown_dimensions(plan)
    measures = [m for m in plan.spec.measures if column_name(m) in names]
    header = [DIMENSION_LABELS.get(n, n).capitalize() for n in dims]
    header += [_measure_header(m) for m in measures]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for record in records[:MAX_TABLE_ROWS]:
        cells = [_cell(n, record) for n in dims]
        cells += [format_value(m, record.get(column_name(m))) for m in measures]
        lines.append("| " + " | ".join(cells) + " |")
    intro = f"{plan.title}:"
    shown = min(len(records), MAX_TABLE_ROWS)
    if total_rows > shown:
        lines.append(f"\nShowing {shown} of {total_rows:,} rows.")
    return intro + "\n\n" + "\n".join(lines)


def _measure_header(member: str) -> str:
    info = MEASURES[member]
    label = info.label[0].upper() + info.label[1:]
    return f"{label} ({info.unit})" if info.unit and info.unit != info.label else label


def format_value(member: str, value: Any, *, unit: bool = False) -> str:
    """Formats a result value of a measure or dimension for the answer text.

    Args:
        member: Qualified member or column name (``"flights.avg_arr_delay"``, ``"count"``).
        value: The value: int, float, str or None.
        unit: Append the measure's unit (``"minutes"``, ``"°F"``).

    Returns:
        ``"28,834"`` for counts and integral sums; one decimal from 100 up (``"1,266.2"``), two
        below (``"21.92"``), three significant digits under 0.1 (``"0.00453"``); years without
        separators (``"2004"``); ``"n/a"`` for None.
    """
    name = column_name(member)
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if name in _YEAR_COLUMNS:
        text = f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    elif float(value).is_integer():
        text = f"{int(value):,}"
    elif abs(value) >= 100:
        text = f"{value:,.1f}"
    elif abs(value) >= 0.1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    info = MEASURES.get(member)
    if not unit or info is None or not info.unit or name in _YEAR_COLUMNS:
        return text
    return f"{text}{info.unit}" if info.unit in _TIGHT_UNITS else f"{text} {info.unit}"


def vega_spec(plan: Plan, *, columns: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Builds a Vega-Lite v5 specification for the plan's result, without data.

    Args:
        plan: The plan; its chart hint picks the mark and the x/y fields.
        columns: ``(name, column_type)`` of the result; field names are these column names.

    Returns:
        ``{"$schema": ..., "title", "data": {"name": "result"}, "mark", "encoding"}``: a text
        mark for one number, a bar chart for categories, a line over months/hours/days. Every
        column is in the tooltip.
    """
    chart = plan.chart
    types = {name: _field_type(name, kind) for name, kind in columns}
    y = chart.y if chart.y in types else columns[-1][0]
    tooltip = [{"field": n, "type": t, "title": _field_title(n, plan)} for n, t in types.items()]
    spec: dict[str, Any] = {"$schema": VEGA_LITE_SCHEMA, "title": plan.title}
    spec["data"] = {"name": DATA_NAME}
    if chart.mark == "text" or chart.x is None or chart.x not in types:
        spec["mark"] = {"type": "text", "fontSize": 28}
        spec["encoding"] = {"text": {"field": y, "type": "quantitative", "format": ",.2~f"}}
        return spec
    x: dict[str, Any] = {"field": chart.x, "type": chart.x_type, "title": _field_title(chart.x)}
    if chart.mark == "bar" and chart.x_type == "nominal":
        x["sort"] = "-y" if plan.spec.order and plan.spec.order[0][1] == "desc" else "y"
    spec["mark"] = {
        "type": chart.mark,
        "tooltip": True,
        **({"point": True} if chart.mark == "line" else {}),
    }
    spec["encoding"] = {
        "x": x,
        "y": {"field": y, "type": "quantitative", "title": _field_title(y, plan)},
        "tooltip": tooltip,
    }
    if chart.color is not None and chart.color in types:
        color = {"field": chart.color, "type": types[chart.color]}
        spec["encoding"]["color"] = color | {"title": _field_title(chart.color)}
        if chart.mark == "bar":
            spec["encoding"]["xOffset"] = {"field": chart.color}
    return spec


def _field_type(name: str, column_type: str) -> str:
    if name in TIME_DIMENSIONS:
        return "ordinal"
    if column_type in ("Int64", "Double"):
        return "quantitative"
    return "temporal" if column_type == "Timestamp" else "nominal"


def _field_title(name: str, plan: Plan | None = None) -> str:
    if plan is not None:
        for member in plan.spec.measures:
            if column_name(member) == name:
                return _measure_header(member)
    return DIMENSION_LABELS.get(name, name.replace("_", " ")).capitalize()


def compose_cannot_answer(c: CannotAnswer) -> str:
    """Writes the refusal for a question the planner cannot map.

    Args:
        c: The planner's refusal.

    Returns:
        Markdown: the reason, then a bulleted list of questions that can be answered.
    """
    examples = "\n".join(f"- {question}" for question in c.suggestions)
    return f"I can't answer that from the data: {c.reason}\n\nQuestions I can answer:\n{examples}"
