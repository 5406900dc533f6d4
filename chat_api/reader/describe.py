"""The reading said back, and the answer composed from the rows, in words a user can check.

"Read as: Number of flights; Origin airport code JFK; destination LAX; month 7, day 4." is
written from the typed query and the model's titles only, so whichever reader produced the
query, the user sees what was run (the SQL is beside it in the tool call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_api.reader.index import ModelIndex
from chat_api.reader.query import Filter, Query, TimePartFilter
from chat_api.reader.sql import aggregate_name, column
from chat_api.reader.words import CALENDAR_MONTHS, WEEKDAYS

MAX_TABLE_ROWS = 15
_OPERATORS = {
    "equals": "", "notEquals": "not ", "gt": "over ", "gte": "at least ", "lt": "under ",
    "lte": "at most ", "contains": "containing ", "notContains": "not containing ",
    "set": "known", "notSet": "missing",
}  # fmt: skip
_AGG_WORDS = {
    "median": "median", "avg": "average", "sum": "total", "min": "lowest", "max": "highest",
    "count": "count of", "countDistinct": "number of distinct",
}  # fmt: skip


def title(index: ModelIndex, member: str) -> str:
    """Returns: the member's title as the model writes it, or its name."""
    try:
        return index.info(member).member.title or column(member)
    except KeyError:
        return column(member)


def read_as(query: Query, index: ModelIndex) -> str:
    """Returns: ``"Read as: ..."``, the query in the model's words."""
    parts = [_asked(query, index)]
    parts += [_filter(f, index) for f in query.filters]
    parts += [_part(p) for p in query.time_parts if p.values]
    parts += [_range(td.date_range) for td in query.time_dimensions if td.date_range]
    parts += [f"{title(index, h.member)} {_OPERATORS.get(h.operator, '')}{h.values[0]}"
              for h in query.having]  # fmt: skip
    groups = [title(index, d) for d in query.dimensions] if not query.count_groups else []
    groups += [f"{td.granularity}" for td in query.time_dimensions if td.granularity]
    groups += [p.part for p in query.time_parts if not p.values]
    if groups:
        parts.append("by " + ", ".join(groups))
    if query.share or query.share_parts:
        shared = [_filter(f, index) for f in query.share] + [_part(p) for p in query.share_parts]
        parts.append("as a percentage: " + "; ".join(shared))
    if query.sides is not None:
        sides = query.sides
        name = sides.part or title(index, sides.member)
        first, second = (f"{name} {v}" for v in sides.values)
        parts.append(
            f"percent change from {first} to {second}"
            if sides.op == "change"
            else f"{first} {'minus' if sides.op == 'difference' else 'divided by'} {second}"
        )
    if query.per_group:
        groups_of = ", ".join(title(index, d) for d in query.per_group.dimensions)
        parts.append(f"top {query.per_group.limit} in each {groups_of}")
    if query.order and query.order[0][0] not in query.dimensions:
        direction = query.order[0][1]
        word = "highest" if direction == "desc" else "lowest"
        shown = f"{query.limit} " if query.limit else ""
        parts.append(f"{shown}{word} first" if query.limit != 1 else f"the {word}")
    if query.average_over:
        word = _BUCKET_WORDS.get(query.over_agg, query.over_agg)
        parts.append(f"{word} per {query.average_over}")
    return "Read as: " + "; ".join(p for p in parts if p).rstrip(".") + "."


_BUCKET_WORDS = {"avg": "averaged", "median": "median", "max": "highest", "min": "lowest"}


def _asked(query: Query, index: ModelIndex) -> str:
    if query.count_groups:
        return "number of " + ", ".join(title(index, d) for d in query.dimensions) + " with"
    asked = [title(index, m) for m in query.measures]
    asked += [_aggregate(a.agg, a.p, title(index, a.member)) for a in query.aggregates]
    text = " and ".join(asked)
    if query.difference:
        return f"{text}, the difference"
    return f"{text} divided" if query.ratio else text


def _aggregate(agg: str, p: float | None, name: str) -> str:
    if agg == "percentile":
        return f"{round((p or 0.5) * 100)}th percentile of {name}"
    return f"{_AGG_WORDS.get(agg, agg)} {name}"


def _filter(f: Filter, index: ModelIndex) -> str:
    name = title(index, f.member)
    if f.values == ("true",):
        return name if f.operator == "equals" else f"not {name}"
    values = " or ".join(f.values)
    return f"{name} {_OPERATORS.get(f.operator, f.operator + ' ')}{values}".strip()


def _part(part: TimePartFilter) -> str:
    if part.part == "month":
        names = [CALENDAR_MONTHS[v - 1].capitalize() for v in part.values if 1 <= v <= 12]
    elif part.part == "weekday":
        names = [WEEKDAYS[v - 1].capitalize() for v in part.values if 1 <= v <= 7]
    else:
        names = [f"{part.part} {v}" for v in part.values]
    return ("not " if part.negate else "") + " or ".join(names)


def _range(date_range: tuple[str, str] | None) -> str:
    if date_range is None:
        return ""
    low, high = date_range
    if low[:4] == high[:4] and low[5:] == "01-01" and high[5:] == "12-31":
        return f"in {low[:4]}"
    if low == high:
        return f"on {low}"
    return f"from {low} to {high}"


def compose(
    query: Query, index: ModelIndex, *, columns: Sequence[str], rows: Sequence[Sequence[Any]],
    total_rows: int,
) -> str:  # fmt: skip
    """Returns: the final answer: the reading, then the numbers (a sentence or a table).

    Args:
        query: The query that ran.
        index: The model's index (titles, units).
        columns: Result column names.
        rows: Result rows.
        total_rows: Rows of the whole result.
    """
    reading = read_as(query, index)
    if not rows:
        return f"{reading}\n\nNo rows match: the answer is none (0)."
    if (query.share or query.share_parts) and len(rows) == 1:
        record = dict(zip(columns, rows[0], strict=False))
        return (
            f"{reading}\n\n{_number(record.get('percent'))}% "
            f"({_number(record.get('part'))} of {_number(record.get('whole'))})."
        )
    if len(rows) == 1 and not query.grouped:
        values = [
            f"{_label(index, query, c)}: **{_number(v)}**"
            for c, v in zip(columns, rows[0], strict=False)
        ]
        return f"{reading}\n\n" + "; ".join(values) + "."
    return f"{reading}\n\n{_table(index, query, columns, rows, total_rows)}"


def _label(index: ModelIndex, query: Query, name: str) -> str:
    for member in (*query.measures, *query.dimensions):
        if column(member) == name:
            return title(index, member)
    for item in query.aggregates:
        if aggregate_name(item) == name:
            return _aggregate(item.agg, item.p, title(index, item.member))
    return name.replace("_", " ")


def _table(
    index: ModelIndex, query: Query, columns: Sequence[str], rows: Sequence[Sequence[Any]],
    total: int,
) -> str:  # fmt: skip
    header = [_label(index, query, c) for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows[:MAX_TABLE_ROWS]:
        lines.append("| " + " | ".join(_number(v) for v in row) + " |")
    more = (
        f"\n\n{total} rows in all; the first {MAX_TABLE_ROWS} are shown."
        if total > MAX_TABLE_ROWS
        else ""
    )
    return "\n".join(lines) + more


def _number(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.1f}"
    text = str(value)
    return text[:10] if len(text) >= 19 and text[4:5] == "-" and text[10:11] == "T" else text
