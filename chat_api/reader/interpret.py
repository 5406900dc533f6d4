"""From linked words to one typed query: the rule reader's grammar.

The links of a question (:mod:`chat_api.reader.linking`) are read left to right by a small
state machine whose states are the grammar words' kinds: a negation turns the next condition
around, a comparator waits for its number, a grouping word makes the next member a breakdown,
an aggregation word applies to the next numeric member, an ordering word orders the breakdown
by the first measure (and a number beside it limits it). What each link *is* decides the rest:
a value is a filter on its member, a measure is asked for, an entity is counted or broken down,
a calendar word filters the view's time dimension.

The view is the one that holds the most of the question's links; a link no view shares with
the others refuses, naming its words. A follow-up (a question with follow-up words, or one
without a measure on a thread) changes the thread's previous query instead of starting afresh.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from chat_api.errors import UnreadableQuestionError
from chat_api.reader.followups import merged
from chat_api.reader.index import Entity, MemberInfo, ModelIndex, ValueHit, ViewIndex
from chat_api.reader.linking import Link, link
from chat_api.reader.query import (
    DimensionAggregate,
    Direction,
    Filter,
    PerGroup,
    Query,
    Sides,
    TimeDimension,
    TimePart,
    TimePartFilter,
)
from chat_api.reader.text import Token, is_inflected_verb, tokens
from chat_api.reader.views import CONTENT as _CONTENT
from chat_api.reader.views import choose_view, fitted, is_year
from chat_api.reader.words import AGGREGATIONS, DIRECTIONS, LIST_JOINERS, YEAR_SPANS

DEFAULT_TOP = 10
SUPERLATIVES = frozenset(
    {"highest", "largest", "biggest", "longest", "greatest", "worst", "lowest", "smallest",
     "shortest", "least", "peak", "maximum", "minimum"}
)  # fmt: skip
"""Aggregation words that also order a breakdown ("the highest average")."""
_MORE_WORDS = frozenset({"more", "fewer", "less", "higher", "lower", "bigger", "smaller", "larger"})
"""Comparatives that, with "than" and two sides, ask for their difference."""
INTENSITY_WORDS = frozenset({"popular", "common", "frequent", "busy"})
"""Ordering words that keep a direction already given ("least popular", "most common")."""
_EDGE = "'\"?!.,;:()[]"


@dataclass
class _Draft:
    """What has been read so far, and what the grammar words wait for."""

    view: ViewIndex
    tokens: Sequence[Token]
    measures: list[str] = field(default_factory=list)
    aggregates: list[DimensionAggregate] = field(default_factory=list)
    dimensions: list[str] = field(default_factory=list)
    grains: list[TimeDimension] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    parts: list[TimePartFilter] = field(default_factory=list)
    date_range: tuple[str, str] | None = None
    years: list[int] = field(default_factory=list)
    having: list[Filter] = field(default_factory=list)
    direction: Direction | None = None
    limit: int | None = None
    negate: bool = False
    comparator: str | None = None
    grouping: str | None = None
    agg: str | None = None
    share: bool = False
    versus: bool = False
    ratio: bool = False
    difference: bool = False
    change: bool = False
    counted: Entity | None = None
    count_groups: bool = False
    each: list[str] = field(default_factory=list)
    followup: bool = False
    drop: bool = False
    overall: bool = False
    subject: Entity | None = None
    numeric: MemberInfo | None = None
    numbers: list[Link] = field(default_factory=list)
    average_over: str | None = None
    over_agg: str = "avg"
    averaged: bool = False
    totalled: bool = False
    which_singular: bool = False
    negated_member: str | None = None
    restated: Filter | None = None
    whole: bool = False
    shift: int = 0
    last: Link | None = None
    sides: set[str] = field(default_factory=set)
    skip: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def read(question: str, index: ModelIndex, *, previous: Query | None = None) -> Query:
    """Reads a question into a typed query.

    Args:
        question: English, as typed.
        index: The model's index (:func:`chat_api.reader.index.build_index`).
        previous: The thread's last answered query, for a follow-up.

    Returns:
        The query.

    Raises:
        UnreadableQuestionError: a word links to nothing, the words span views, or no measure or
            number can be placed; ``reason`` names the words.
    """
    found = tokens(question)
    words = question.split()
    upper = frozenset(w.lower().strip(_EDGE) for w in words if w.isupper() and len(w) > 1)
    upper |= frozenset(w.lower().strip(_EDGE) for w in words[1:] if w[:1].isupper())
    links = link(found, index, upper=upper)
    unknown = [lk.text for lk in links if lk.kind == "unknown"]
    if unknown:
        listed = ", ".join(f"'{w}'" for w in dict.fromkeys(unknown))
        raise UnreadableQuestionError(
            f"I don't know {listed}: nothing in the data model is called that.",
            words=tuple(dict.fromkeys(unknown)),
        )
    view = choose_view(links, index, previous)
    links = fitted(links, index, index.views[view])
    draft = _Draft(index.views[view], found)
    for position, item in enumerate(links):
        _step(draft, item, links[position + 1 :])
    return _finish(draft, previous, links)


def _step(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    if item.start in draft.skip:
        return
    if item.kind != "value" and item.text not in LIST_JOINERS:
        draft.negated_member = None  # "not X and Y" negates Y too; any other word ends the list
    if item.kind != "value":
        draft.restated = None
    handler = _HANDLERS[item.kind]
    handler(draft, item, rest)
    draft.last = item


def _grammar(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    for word in item.words:
        handler = _GRAMMAR_HANDLERS.get(word.kind)
        if handler is not None and handler(draft, word.value, item, rest):
            return


def _on_not(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    draft.negate = True
    return True


def _on_cmp(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    postfix = item.text.split()[0] in ("or", "and") and draft.numbers  # "5 or more orders"
    if postfix:
        number = draft.numbers.pop()
        draft.comparator = value
        _threshold(draft, number.number or 0.0, rest)
        return True
    if not any(lk.kind in ("number", "date") for lk in rest[:3]):
        return False
    draft.comparator = value
    return True


def _on_by(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    after = draft.tokens[item.end].text if item.end < len(draft.tokens) else ""
    if value == "which" and item.text == "what" and after in ("is", "was", "are", "were", "s"):
        return True  # "what's the median wait": a question word, not a breakdown
    before = draft.tokens[item.start - 1].text if item.start else ""
    if value == "by" and item.text == "by" and is_inflected_verb(before):
        return True  # "nights booked by guests from X": the passive's agent, not a breakdown
    if value == "which":
        nxt = next(iter(rest), None)
        if nxt is None or nxt.kind not in ("member", "entity", "number"):
            return False
        draft.which_singular = not nxt.text.endswith("s") or nxt.kind == "number"
    if value == "trend":
        td = draft.view.time_dimension
        if td and not draft.grains:
            draft.grains.append(TimeDimension(td, "month"))
        return True
    draft.grouping = value
    return True


def _on_agg(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if item.text == "overall" and not any(lk.kind in _CONTENT for lk in rest[:2]):
        return False  # "overall instead": the follow-up word, not a total
    if value == "count" and draft.agg == "avg":
        return True  # "average number of requests": the average of the quantity
    draft.averaged = draft.averaged or value == "avg"
    draft.totalled = value == "sum" and item.text != "how much"
    if value in ("max", "min") and item.text in SUPERLATIVES:
        draft.direction = draft.direction or ("desc" if value == "max" else "asc")
        if _names_its_aggregate(draft, next(iter(rest), None)):
            return True  # "the highest average wait": the average, ordered
    draft.agg = value
    if value == "percentile":
        number = next((lk for lk in reversed(draft.numbers) if lk.number), None)
        if number is not None:
            draft.numbers.remove(number)
            draft.agg = f"p{number.number}"
    return True


def _names_its_aggregate(draft: _Draft, nxt: Link | None) -> bool:
    """Whether the link after a superlative is an aggregation word or a measure."""
    if nxt is None:
        return False
    if nxt.kind == "grammar":
        return nxt.means("agg")
    return nxt.kind == "member" and any(
        m in draft.view.members and draft.view.members[m].member.kind == "measure"
        for m in nxt.members[:1]
    )


def _on_whole(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    draft.whole = True
    draft.grouping = None
    if not any(lk.kind in _CONTENT for lk in rest):  # "for all of them": the previous, whole
        draft.overall = draft.followup = True
    return True


def _on_order(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if item.text in INTENSITY_WORDS and draft.direction:
        return True  # "least popular": the direction "least" gave
    draft.direction = value  # type: ignore[assignment]
    nxt = next(iter(rest), None)
    if nxt is not None and nxt.kind == "number" and nxt.exact:
        draft.limit = int(nxt.number or 1)
    elif nxt is not None and nxt.kind in ("member", "entity", "grammar") and item.text != "top":
        draft.which_singular = draft.which_singular or not nxt.text.endswith("s")
    return True


def _on_grain(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if draft.drop:
        return True  # "remove the month filter": names what to drop
    before = " ".join(t.text for t in draft.tokens[max(0, item.start - 2) : item.start])
    if before in ("of the", "in the", "of a", "in a") and draft.grouping is None:
        return True  # "busiest day of the year": the year is the whole data, not a breakdown
    named = next((m for m in draft.view.members if m.endswith(f".{value}")), None)
    if draft.view.time_dimension and (value in ("day", "week") or draft.view.years != 1):
        named = None  # "by day" is each date; "by month" over years is each month of each year
    if draft.agg == "avg" and item.text.endswith("s") and _follows_agg(draft, item):
        raise UnreadableQuestionError(  # "average days on market": a duration nothing measures
            f"I don't know '{item.text}' as something to average: the {draft.view.name} data "
            "has no such measure."
        )
    if _bucketed(draft, value, item):
        return True
    if named is not None and draft.view.members[named].member.kind == "dimension":
        draft.dimensions.append(named)
    elif draft.view.time_dimension:
        draft.grains.append(TimeDimension(draft.view.time_dimension, value))  # type: ignore[arg-type]
    else:
        raise UnreadableQuestionError(
            f"The {draft.view.name} data has no date to group by {value}."
        )
    if draft.grouping == "each":
        draft.each.append(named or draft.view.time_dimension or "")
    draft.grouping = None
    return True


def _bucketed(draft: _Draft, value: str, item: Link) -> bool:
    """Whether a grain word asks for a measure per time bucket, aggregated over the buckets.

    "Median daily revenue" (an aggregation, then the grain as an adjective); "average orders per
    month" (an average of a count or sum per bucket); "on average, how many listings per month".
    """
    adjective = item.text.endswith("ly")
    over = draft.agg == "avg" or (adjective and draft.agg in ("median", "max", "min"))
    if over and draft.grouping is None and not draft.measures and draft.agg:
        draft.average_over, draft.over_agg, draft.agg = value, draft.agg, None
        return True
    per = item.start > 0 and draft.tokens[item.start - 1].text == "per"
    additive = any(
        draft.view.members[m].member.agg_type in ("count", "sum") for m in draft.measures
    )
    texts = [t.text for t in draft.tokens]
    said = any(a == "on" and b == "average" for a, b in itertools.pairwise(texts))
    if per and draft.averaged and (additive or said):
        draft.average_over, draft.grouping = value, None
        return True
    return False


def _follows_agg(draft: _Draft, item: Link) -> bool:
    before = draft.tokens[item.start - 1].text if item.start else ""
    return before in AGGREGATIONS


def _on_share(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if value == "ratio":
        draft.ratio = True
    else:
        draft.share = True
    return True


def _on_versus(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if value == "and" and not draft.filters:
        return False
    draft.versus = True
    return True


def _on_arith(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    nxt = next(iter(rest), None)
    numeric = nxt is not None and (nxt.kind == "member" or nxt.means("agg"))
    if numeric and (draft.measures or draft.numeric or draft.aggregates):
        if draft.numeric is not None:  # "distance divided by air time": both sides numbers
            _numeric(draft, draft.numeric, agg=_quantity_agg(draft, draft.numeric))
        draft.ratio = value == "ratio"
        draft.difference = value == "difference"
        return True
    return False


def _on_change(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    draft.change = True
    return True


def _on_followup(draft: _Draft, value: str, item: Link, rest: Sequence[Link]) -> bool:
    if value == "drop":
        draft.drop = True
    elif value == "overall":
        draft.overall = True
    elif value in ("earlier", "later"):
        draft.shift = -1 if value == "earlier" else 1  # "the year before": the previous year's
    draft.followup = True
    return True


_GRAMMAR_HANDLERS = {
    "not": _on_not, "cmp": _on_cmp, "by": _on_by, "agg": _on_agg, "order": _on_order,
    "grain": _on_grain, "share": _on_share, "versus": _on_versus, "arith": _on_arith,
    "followup": _on_followup, "whole": _on_whole, "change": _on_change,
}  # fmt: skip


def _on_number(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    value = item.number or 0.0
    nxt = next(iter(rest), None)
    if (
        nxt is not None
        and nxt.kind == "grammar"
        and any(w.kind == "agg" and w.value == "percentile" for w in nxt.words)
    ):
        draft.numbers.append(item)
        return
    if draft.comparator is not None and is_year(item) and not _quantity_follows(rest):
        _year_condition(draft, int(value))  # "since 2017", "before 2019"
        return
    if draft.comparator is not None:
        _threshold(draft, value, rest)
        return
    if 1900 <= value <= 2100 and item.exact:
        _year(draft, int(value), item)
        return
    quantity = _quantity_member(draft, nxt)
    if quantity is not None and item.exact:  # "3 pallets", "7 crates or more"
        _counted_quantity(draft, value, quantity, rest)
        return
    if nxt is not None and nxt.kind in ("member", "entity") and item.exact and value >= 1:
        draft.limit = int(value)
        return
    draft.numbers.append(item)


def _quantity_member(draft: _Draft, item: Link | None) -> MemberInfo | None:
    """The numeric dimension a link names, when it is one ("pallets", "crates")."""
    if item is None or item.kind != "member":
        return None
    found = [draft.view.members[m] for m in item.members if m in draft.view.members]
    if not found:
        return None
    member = found[0].member
    quantity = member.kind == "dimension" and member.type == "number" and not member.primary_key
    return found[0] if quantity else None


def _counted_quantity(draft: _Draft, value: float, info: MemberInfo, rest: Sequence[Link]) -> None:
    """A number before a quantity is a value of it ("3 pallets").

    A comparator after the quantity compares it ("7 crates or more").
    """
    draft.skip.add(rest[0].start)
    after = rest[1] if len(rest) > 1 else None
    comparator = "equals"
    if after is not None and after.means("cmp") and after.text.split()[0] in ("or", "and"):
        comparator = next(w.value for w in after.words if w.kind == "cmp")
        draft.skip.add(after.start)
    draft.filters.append(Filter(info.name, comparator, (_text(value),)))  # type: ignore[arg-type]


def _quantity_follows(rest: Sequence[Link]) -> bool:
    return any(lk.kind in ("member", "unit", "entity") for lk in rest[:2])


def _year_condition(draft: _Draft, year: int) -> None:
    """A year after a comparator.

    "Since 2017" runs from its first day, "before 2017" to the day before it.
    """
    comparator, draft.comparator = draft.comparator, None
    low, high = f"{year}-01-01", f"{year}-12-31"
    if comparator == "between":  # "between 2016 and 2017": the second year ends the range
        draft.years.append(year)
    elif comparator in ("gt", "gte"):
        low, high = (f"{year + 1}-01-01" if comparator == "gt" else low), "2999-12-31"
    elif comparator in ("lt", "lte"):
        low, high = "1900-01-01", (f"{year - 1}-12-31" if comparator == "lt" else high)
    draft.date_range = (low, high)


def _year(draft: _Draft, year: int, item: Link) -> None:
    """A year of the question.

    After "2010 to", "2008 through" or "between 2008 and" it ends the range; otherwise it is
    one more year to compare ("2014 compared with 2007": both, one row each).
    """
    before = draft.tokens[item.start - 1].text if item.start else ""
    between = any(t.text == "between" for t in draft.tokens[: item.start])
    if draft.years and (before in YEAR_SPANS or (before == "and" and between)):
        draft.date_range = (f"{draft.years.pop()}-01-01", f"{year}-12-31")
        return
    draft.years.append(year)
    draft.date_range = (f"{year}-01-01", f"{year}-12-31")


def _threshold(draft: _Draft, value: float, rest: Sequence[Link]) -> None:
    comparator, draft.comparator = draft.comparator or "gt", None
    if comparator == "between":
        _between(draft, value, rest)
        return
    unit = next((lk for lk in rest[:2] if lk.kind == "unit"), None)
    target = next((lk for lk in rest[:3] if lk.kind in ("member", "entity")), None)
    if target is not None and target.kind == "entity":
        measure = _entity_measure(draft, target)
        if measure is not None:
            draft.having.append(Filter(measure, comparator, (_text(value),)))  # type: ignore[arg-type]
            return
    info = _numeric_target(draft, target, unit)
    measure = _measure_compared(draft, info)
    if measure is not None:
        draft.having.append(Filter(measure, comparator, (_text(value),)))  # type: ignore[arg-type]
        return
    if info is None:
        raise UnreadableQuestionError(f"I couldn't tell what the number {_text(value)} applies to.")
    if unit is not None and (not unit.unit or info.unit == unit.unit):
        value *= unit.number or 1.0  # "1 billion", "2 hours" for a member in minutes
    if draft.agg and info.member.kind == "dimension":  # "averaging more than 10 mins of delay"
        _numeric(draft, info, agg=draft.agg)
        compared = draft.measures[-1] if draft.measures else info.name
        draft.having.append(Filter(compared, comparator, (_text(value),)))  # type: ignore[arg-type]
        return
    if info.member.kind == "measure":
        draft.having.append(Filter(info.name, comparator, (_text(value),)))  # type: ignore[arg-type]
        return
    draft.filters.append(Filter(info.name, comparator, (_text(value),)))  # type: ignore[arg-type]
    if draft.numeric is info:
        draft.numeric = None


def _between(draft: _Draft, value: float, rest: Sequence[Link]) -> None:
    """Reads "between 100 and 200": at least the first number and at most the second."""
    high = next((lk for lk in rest[:3] if lk.kind == "number"), None)
    if high is None:
        raise UnreadableQuestionError(f"Between {_text(value)} and what?")
    draft.skip.update(range(rest[0].start, high.end))
    after = rest[rest.index(high) + 1 :]
    draft.comparator = "gte"
    _threshold(draft, value, after)
    draft.comparator = "lte"
    _threshold(draft, high.number or 0.0, after)


def _measure_compared(draft: _Draft, info: MemberInfo | None) -> str | None:
    """The measure a threshold compares, when it is a named measure's.

    "Segments where the average stay is over 4 nights": the quantity is the column the named
    average aggregates. "Months with an average rate above 150": nothing after the number, so
    the last measure named.
    """
    if info is None:
        return draft.measures[-1] if draft.measures else None
    over = [
        m for m in draft.measures if info.column and draft.view.members[m].column == info.column
    ]
    return over[-1] if over and info.member.kind == "dimension" else None


def _numeric_target(draft: _Draft, target: Link | None, unit: Link | None) -> MemberInfo | None:
    members = draft.view.members
    if target is not None and target.kind == "member":
        for name in target.members:
            if name in members and members[name].member.type == "number":
                return members[name]
    if draft.numeric is not None:
        return draft.numeric
    if unit is not None and unit.unit:
        same = [i for i in members.values() if i.unit == unit.unit and i.member.kind == "dimension"]
        if same:
            return same[0]
    return None


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _on_member(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    info = _pick_member(draft, item)
    member = info.member
    if _restates_measure(draft, item, info):
        return  # "distinct planes (tail numbers)": the column the measure counts, said again
    if draft.whole and member.kind == "dimension" and member.type == "string":
        draft.whole = False  # "across all suppliers": every supplier together
        return
    if member.kind == "measure":
        _measure(draft, info)
    elif _ranks_by(draft, info):
        draft.grouping = None
        _numeric(draft, info, agg=_quantity_agg(draft, info))
    elif member.type == "time" and draft.grouping is None:
        pass  # "shipments" of "shipment date": the date is what a grain or a range reads
    elif _counts_values(draft, info):
        draft.agg = None  # "how many different products": distinct values, not a breakdown
        draft.aggregates.append(DimensionAggregate("countDistinct", info.name))
    elif draft.grouping is not None or (
        member.type != "boolean" and _wants_breakdown(draft, item, rest)
    ):
        _group(
            draft, info.name
        )  # a flag named in a ranking filters it ("top months for cancelled")
    else:
        _on_dimension(draft, info, rest)


def _restates_measure(draft: _Draft, item: Link, info: MemberInfo) -> bool:
    """Whether a dimension right after a measure names the column that measure aggregates."""
    last = draft.last
    beside = last is not None and last.kind in ("member", "entity") and last.end == item.start
    if not beside or info.member.kind != "dimension" or not draft.measures:
        return False
    measure = draft.view.members[draft.measures[-1]]
    return bool(info.column) and measure.column == info.column


def _on_dimension(draft: _Draft, info: MemberInfo, rest: Sequence[Link]) -> None:
    """A dimension named without a grouping word.

    A flag is a filter, a number waits for its aggregation or comparison, a label is a
    breakdown unless it labels a value beside it.
    """
    member = info.member
    if member.type == "boolean":
        draft.filters.append(
            Filter(info.name, "notEquals" if draft.negate else "equals", ("true",))
        )
        draft.negate = False
    elif member.type == "number" and draft.negate:
        draft.filters.append(Filter(info.name, "notSet", ()))  # "orders without a wait"
        draft.negate = False
    elif member.type == "number":
        _numeric(draft, info)
    elif member.type == "string" and not draft.negate and not _labels_a_value(draft, info, rest):
        _group(draft, info.name)


def _labels_a_value(draft: _Draft, info: MemberInfo, rest: Sequence[Link]) -> bool:
    """Whether a member is named beside one of its values.

    "The corporate segment", "customer types other than transient": the value's label, not a
    breakdown.
    """
    filtered = any(f.member == info.name for f in draft.filters)
    nxt = next((lk for lk in rest if lk.kind != "grammar" or not lk.means("not")), None)
    named = (
        nxt is not None and nxt.kind == "value" and any(h.member == info.name for h in nxt.values)
    )
    return filtered or named


def _counts_values(draft: _Draft, info: MemberInfo) -> bool:
    string = info.member.type == "string" and info.member.kind == "dimension"
    return string and draft.agg in ("count", "countDistinct") and draft.grouping is None


def _ranks_by(draft: _Draft, info: MemberInfo) -> bool:
    """Whether a quantity after "by" in a ranking orders it ("top 5 areas by sales")."""
    member = info.member
    quantity = member.type == "number" and member.kind == "dimension" and not member.primary_key
    unnamed = not draft.measures and not draft.aggregates  # "best month for sales"
    return quantity and draft.direction is not None and (draft.grouping == "by" or unnamed)


def _quantity_agg(draft: _Draft, info: MemberInfo) -> str:
    """The aggregation of a quantity column.

    As asked; else its sum when the model sums it (a modeller defines a sum over additive
    columns only), else its average. "Number of sales" over a column of sales is its sum too.
    """
    agg, draft.agg = draft.agg, None
    if agg and agg not in ("count", "countDistinct"):
        return agg
    return "sum" if draft.view.measure_over(info.column, "sum") is not None else "avg"


def _pick_member(draft: _Draft, item: Link) -> MemberInfo:
    members = [draft.view.members[m] for m in item.members if m in draft.view.members]
    if not members:
        raise UnreadableQuestionError(f"'{item.text}' is not in the {draft.view.name} data.")
    if draft.agg and any(m.member.type == "number" for m in members):
        members = [m for m in members if m.member.type == "number"]
        same = [m for m in members if m.member.agg_type == draft.agg]  # "avg stay": the average
        members = same or members
    if draft.grouping is not None:
        members = [m for m in members if m.member.kind == "dimension"] or members
    return members[0]


def _wants_breakdown(draft: _Draft, item: Link, rest: Sequence[Link]) -> bool:
    if draft.direction is not None and not draft.agg:
        return True
    return draft.which_singular or draft.limit is not None


def _measure(draft: _Draft, info: MemberInfo) -> None:
    """A measure, or the aggregation asked of its column ("median order total")."""
    agg, draft.agg = draft.agg, None
    distribution = agg is not None and (agg.startswith("p") or agg == "median")
    other = agg not in (None, "count", "sum", "countDistinct", info.member.agg_type, "number")
    if distribution or other:
        column_member = _dimension_over(draft.view, info.column)
        if column_member is not None:
            _numeric(draft, column_member, agg=agg)
            return
        if distribution:  # the row values are not in the view: say so rather than drop it
            raise UnreadableQuestionError(
                f"The {draft.view.name} data has no per-row values of {info.member.title} to "
                f"take a {'median' if agg == 'median' else 'percentile'} of."
            )
    if info.name not in draft.measures:
        draft.measures.append(info.name)


def _dimension_over(view: ViewIndex, column: str) -> MemberInfo | None:
    return next(
        (
            i
            for i in view.members.values()
            if i.member.kind == "dimension" and i.column == column and column
        ),
        None,
    )


def _numeric(draft: _Draft, info: MemberInfo, *, agg: str | None = None) -> None:
    agg = agg or draft.agg
    draft.agg = None
    if agg is None:
        draft.numeric = info
        return
    if agg.startswith("p"):
        draft.aggregates.append(DimensionAggregate("percentile", info.name, float(agg[1:]) / 100))
        return
    named = draft.view.measure_over(info.column, agg) if agg != "median" else None
    if named is not None:
        draft.measures.append(named.name)
    else:
        draft.aggregates.append(DimensionAggregate(agg, info.name))  # type: ignore[arg-type]
    draft.numeric = None


def _group(draft: _Draft, name: str) -> None:
    if draft.grouping == "each":
        draft.each.append(name)
    if name not in draft.dimensions:
        draft.dimensions.append(name)
    draft.grouping = None


def _on_entity(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    entity = _pick_entity(draft, item)
    if draft.whole:
        draft.whole = False
        return
    before = draft.tokens[item.start - 1].text if item.start else ""
    if before == "per" and entity.cube == draft.view.view.root and draft.averaged:
        draft.grouping = None  # "average requests per booking": per row of the view, not by it
        return
    ranking_by = draft.grouping == "by" and draft.direction is not None and entity.count
    if ranking_by and entity.cube == draft.view.view.root:  # "rank segments by orders"
        draft.agg = "count"
    counted = draft.agg in ("count", "countDistinct") or (draft.agg == "sum" and draft.totalled)
    if counted:  # "by number of orders", "total orders" (but not "how much ... flights")
        draft.agg = None
        draft.grouping = None if draft.grouping == "by" else draft.grouping
        draft.counted = draft.counted or entity
        measure = _entity_measure(draft, item)
        if measure:
            draft.measures.append(measure)
            return
    breakdown = (
        draft.grouping is not None
        or (draft.direction and draft.subject is not None)
        or (draft.which_singular and entity.cube != draft.view.view.root)
    )
    if breakdown and entity.label:
        _group(draft, entity.label)
        return
    if draft.direction and entity.label and entity.cube != draft.view.view.root:
        _group(draft, entity.label)
        return
    draft.subject = draft.subject or entity


def _pick_entity(draft: _Draft, item: Link) -> Entity:
    cubes = [c for v, c in item.entities if v == draft.view.name]
    found = next((e for e in draft.view.entities if e.cube in cubes), None)
    if found is None:
        raise UnreadableQuestionError(f"'{item.text}' is not in the {draft.view.name} data.")
    return found


def _entity_measure(draft: _Draft, item: Link) -> str | None:
    entity = _pick_entity(draft, item)
    if entity.count:
        return entity.count
    if entity.key:
        draft.aggregates.append(DimensionAggregate("countDistinct", entity.key))
        return None
    return None


def _on_value(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    hits = [h for h in item.values if h.member in draft.view.members]
    if not hits:
        raise UnreadableQuestionError(
            f"'{item.text}' is not a value of the {draft.view.name} data."
        )
    hit = _pick_hit(draft, item, hits, rest)
    values = tuple(dict.fromkeys(h.value for h in hits if h.member == hit.member))
    negate, draft.negate = draft.negate or draft.negated_member == hit.member, False
    draft.negated_member = hit.member if negate else None
    if draft.grouping is not None:
        draft.grouping = None
    for existing in draft.filters:
        if existing.member == hit.member and existing.operator == (
            "notEquals" if negate else "equals"
        ):
            merged = replace(existing, values=tuple(dict.fromkeys(existing.values + values)))
            draft.filters[draft.filters.index(existing)] = merged
            return
    found = Filter(hit.member, "notEquals" if negate else "equals", values)
    restated = draft.restated
    beside = draft.last is not None and draft.last.end == item.start
    if (
        restated is not None
        and restated in draft.filters
        and hit.exact
        and beside
        and restated.member != hit.member
    ):
        draft.filters.remove(restated)  # "Springfield (SPF)": the code beside it restates it
    draft.filters.append(found)
    draft.restated = None if hit.exact else found


def _pick_hit(
    draft: _Draft, item: Link, hits: list[ValueHit], rest: Sequence[Link] = ()
) -> ValueHit:
    """The hit a value means.

    Of the member named beside it ("the corporate *segment*"), of the member its preposition
    points to ("from X"), else the exact one with the most rows.
    """
    around = (draft.last, next(iter(rest), None))
    beside = [
        lk for lk in around
        if lk and lk.kind == "member" and (lk.end == item.start or lk.start == item.end)
    ]  # fmt: skip
    named = [h for h in hits if any(h.member in lk.members for lk in beside)]
    said = {*draft.dimensions, *(f.member for f in draft.filters)}
    hits = named or [h for h in hits if h.member in said] or hits  # "segments ... but not direct"
    before = draft.tokens[item.start - 1].text if item.start else ""
    pair = f"{draft.tokens[item.start - 2].text} {before}" if item.start > 1 else ""
    words = DIRECTIONS.get(pair) or DIRECTIONS.get(before) or ()
    if words:
        pointed = [h for h in hits if _points(draft.view.members[h.member], words)]
        hits = pointed or hits
    return max(hits, key=lambda h: (h.exact, h.rows))


def _points(info: MemberInfo, words: Sequence[str]) -> bool:
    names = {w for p in info.phrases for w in p}
    return bool(names & set(words))


def _on_calendar(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    td = draft.view.time_dimension
    if td is None:
        raise UnreadableQuestionError(f"The {draft.view.name} data has no date for '{item.text}'.")
    calendar = item.calendar
    day = _calendar_date(draft, calendar)
    if day is not None:
        _date_condition(draft, _range_start(draft, item) or day, day)
        return
    if "hour" in calendar:
        comparator, draft.comparator = draft.comparator, None
        _hour(draft, td, int(calendar["hour"]), comparator)
        return
    negate, draft.negate = draft.negate, False
    for part, values in calendar.items():
        found = TimePartFilter(td, cast(TimePart, part), tuple(int(v) for v in values), negate)
        same = next((p for p in draft.parts if p.part == found.part and p.negate == negate), None)
        if same is not None and same.values:  # "Q1 vs Q2", "in July and August": either
            merged = replace(same, values=tuple(dict.fromkeys(same.values + found.values)))
            draft.parts[draft.parts.index(same)] = merged
            if not set(found.values) <= set(same.values):  # "Q1 vs Q2", not "H1 2020 vs H1 2021"
                draft.sides.add(found.part)
        else:
            draft.parts.append(found)


def _calendar_date(draft: _Draft, calendar: dict[str, object]) -> str | None:
    """The date a calendar link names, ISO.

    A month and day without a year ("7/1") name a date when the view's data spans one year.
    """
    if "date" in calendar:
        return str(calendar["date"])
    span = draft.view.span
    if set(calendar) != {"month", "day"} or not span or span[0][:4] != span[1][:4]:
        return None
    months, days = cast(list[int], calendar["month"]), cast(list[int], calendar["day"])
    return f"{span[0][:4]}-{int(months[0]):02d}-{int(days[0]):02d}"


def _range_start(draft: _Draft, item: Link) -> str | None:
    """The first date of "<date> to <date>" or "between <date> and <date>" ending at ``item``."""
    texts = [t.text for t in draft.tokens[: item.start]]
    between = "between" in texts
    joined = len(texts) >= 2 and (texts[-1] in YEAR_SPANS or (texts[-1] == "and" and between))
    if joined and draft.tokens[item.start - 2].kind == "date" and draft.date_range:
        return draft.date_range[0]
    return None


def _hour(draft: _Draft, td: str, hour: int, comparator: str | None) -> None:
    named = next((m for m in draft.view.members if m.endswith(".hour")), None)
    if named is not None:
        draft.filters.append(Filter(named, comparator or "equals", (str(hour),)))  # type: ignore[arg-type]
        return
    draft.parts.append(TimePartFilter(td, "hour", (hour,)))


def _date_condition(draft: _Draft, low: str, high: str) -> None:
    comparator, draft.comparator = draft.comparator, None
    if comparator in ("lt", "lte"):
        low = "1900-01-01"
    elif comparator in ("gt", "gte"):
        high = "2999-12-31"
    draft.date_range = (low, high)


def _ignored(draft: _Draft, item: Link, rest: Sequence[Link]) -> None:
    """Units and unknown words change nothing by themselves (an unknown word refuses earlier)."""


_HANDLERS: dict[str, Callable[[_Draft, Link, Sequence[Link]], None]] = {
    "grammar": _grammar, "number": _on_number, "member": _on_member, "entity": _on_entity,
    "value": _on_value, "calendar": _on_calendar, "date": _on_calendar,
    "unit": _ignored, "unknown": _ignored,
}  # fmt: skip


def _finish(draft: _Draft, previous: Query | None, links: Sequence[Link]) -> Query:
    if draft.agg and (draft.agg.startswith("p") or draft.agg == "median"):
        raise UnreadableQuestionError(  # "90th percentile of <nothing the data has>"
            "I couldn't find what to take the median or percentile of."
        )
    _compared_years(draft)
    _buckets(draft)
    if draft.versus:
        _compared_sides(draft)
    if (draft.ratio or draft.difference) and draft.numeric is not None and draft.measures:
        _numeric(draft, draft.numeric, agg=_quantity_agg(draft, draft.numeric))  # "a over b"
    followup = previous is not None and _is_followup(draft, links)
    if not followup:
        _default_measure(draft, previous)
    _count_groups(draft)
    _groups_passing(draft)
    sides = _changed_sides(draft) or _side_arithmetic(draft)
    query = replace(_assemble(draft), sides=sides) if sides else _assemble(draft)
    if previous is not None and followup:
        query = merged(previous, query, draft)
    return _ordered(query, draft)


def _changed_sides(draft: _Draft) -> Sides | None:
    """How one number moved between two years ("grow from 2010 to 2014", "% change 2011 to 2012").

    The sides are the two years in the question's order: the later minus the earlier, or with a
    percent word the percent change from the first to the second.
    """
    td = draft.view.time_dimension
    years = sorted(set(draft.years))
    if len(years) != 2 and draft.date_range:
        years = sorted({int(draft.date_range[0][:4]), int(draft.date_range[1][:4])})
    if not draft.change or td is None or len(years) != 2:
        return None
    if len(draft.measures) + len(draft.aggregates) != 1:
        return None
    percent, draft.share = draft.share, False
    draft.date_range = None
    draft.parts = [p for p in draft.parts if p.part != "year"]
    draft.grains = [g for g in draft.grains if g.granularity != "year"]
    first, second = str(years[0]), str(years[1])
    if percent:
        return Sides(td, "year", (first, second), "change")
    return Sides(td, "year", (second, first), "difference")


def _side_arithmetic(draft: _Draft) -> Sides | None:
    """Two sides of one member and arithmetic between them, when the question asks for it.

    "How many more flights from A than from B", "United minus Delta", "ratio of July flights to
    February flights": one number of the query per side, subtracted or divided. The grouping
    the comparison added is left to the arithmetic.
    """
    texts = {t.text for t in draft.tokens}
    more = "than" in texts and bool(texts & _MORE_WORDS)
    op = (
        "ratio"
        if texts & {"ratio", "times"} or draft.ratio
        else "difference"
        if more or texts & {"minus", "difference"}
        else None
    )
    if op is None or len(draft.measures) + len(draft.aggregates) != 1:
        return None
    pair = next((f for f in draft.filters if f.operator == "equals" and len(f.values) == 2), None)
    if pair is not None:
        draft.dimensions = [d for d in draft.dimensions if d != pair.member]
        return Sides(pair.member, None, (pair.values[0], pair.values[1]), op)  # type: ignore[arg-type]
    years = list(dict.fromkeys(draft.years))
    part = next((p for p in draft.parts if p.part in draft.sides and len(p.values) == 2), None)
    if part is None and len(years) == 2 and draft.view.time_dimension:
        part = TimePartFilter(draft.view.time_dimension, "year", (years[0], years[1]))
    if part is None:
        return None
    draft.parts = [p for p in draft.parts if p.values or p.part != part.part]
    draft.grains = [g for g in draft.grains if g.granularity != part.part]
    values = (str(part.values[0]), str(part.values[1]))
    return Sides(part.dimension, part.part, values, op)  # type: ignore[arg-type]


def _compared_sides(draft: _Draft) -> None:
    """Sides compared ("North vs South", "Q1 vs Q2"): one row per side."""
    for f in draft.filters:
        if len(f.values) > 1 and f.operator == "equals" and f.member not in draft.dimensions:
            draft.dimensions.append(f.member)
    for part in list(draft.parts):
        grouped = any(p.part == part.part and not p.values for p in draft.parts)
        if part.part in draft.sides and not part.negate and not grouped:
            draft.parts.append(TimePartFilter(part.dimension, part.part, ()))


def _compared_years(draft: _Draft) -> None:
    """Several years not joined as a range: each year filtered and one row per year."""
    years = sorted(set(draft.years))
    if len(years) > 1 and draft.view.time_dimension:
        td = draft.view.time_dimension
        draft.date_range = None
        draft.parts.append(TimePartFilter(td, "year", tuple(years)))
        if not draft.grains:
            draft.grains.append(TimeDimension(td, "year"))


def _buckets(draft: _Draft) -> None:
    """Averages over time buckets ("orders per day on average"): the count per day, averaged."""
    if draft.agg == "avg" and draft.grains and not draft.measures and not draft.numeric:
        draft.average_over = draft.grains.pop().granularity
        draft.agg = None
    if draft.average_over and draft.view.time_dimension and not draft.grains:
        draft.grains.append(TimeDimension(draft.view.time_dimension))


def _groups_passing(draft: _Draft) -> None:
    """Names the things passing a threshold ("countries bringing in over 500k of revenue")."""
    subject = draft.subject
    grouped = bool(draft.dimensions or draft.grains)
    if draft.having and not grouped and subject and subject.label:
        draft.dimensions += [subject.label] if subject.cube != draft.view.view.root else []


def _count_groups(draft: _Draft) -> None:
    """Counts the groups passing a threshold ("how many customers placed over 500 orders").

    The counted entity becomes the group, its threshold the ``having``, and the answer the
    number of groups.
    """
    entity = draft.counted
    key = entity.key or entity.label if entity else None
    if not draft.having or key is None or entity is None or draft.dimensions or draft.grains:
        return
    draft.measures = [m for m in draft.measures if m != entity.count]
    draft.aggregates = [a for a in draft.aggregates if a.member != entity.key]
    draft.dimensions = [key]
    draft.count_groups = True


def _default_measure(draft: _Draft, previous: Query | None) -> None:
    if draft.numeric is not None and not draft.measures and not draft.aggregates:
        named = draft.agg
        _numeric(draft, draft.numeric, agg=_quantity_agg(draft, draft.numeric))
        if not named:
            draft.notes.append("No aggregation was named; using the model's own total or average.")
    if draft.measures or draft.aggregates:
        return
    if draft.agg in ("avg", "sum", "median"):  # "how much did X earn", "cost on average"
        raise UnreadableQuestionError(
            "I couldn't find the quantity to total or average: nothing in the data model is "
            "named in the question for it."
        )
    entity = draft.subject or draft.view.root_entity()
    if entity is not None and entity.count:
        draft.measures.append(entity.count)
    elif entity is not None and entity.key:
        draft.aggregates.append(DimensionAggregate("countDistinct", entity.key))
    elif previous is None:
        raise UnreadableQuestionError("I couldn't find a measure in the question.")


def _assemble(draft: _Draft) -> Query:
    grains = list(draft.grains)
    time = draft.view.time_dimension
    if draft.date_range and time is None:
        raise UnreadableQuestionError(
            f"The {draft.view.name} data has no date, so I can't limit it to "
            f"{draft.date_range[0][:4]}."
        )
    span = draft.view.span
    if (
        draft.date_range
        and span
        and (draft.date_range[1] < span[0] or draft.date_range[0] > span[1])
    ):
        raise UnreadableQuestionError(  # "flights in 2015" over 2013's data: not a zero
            f"The {draft.view.name} data runs from {span[0]} to {span[1]}; "
            f"{draft.date_range[0]} to {draft.date_range[1]} is outside it."
        )
    if draft.date_range and time:
        if grains:
            grains[0] = replace(grains[0], date_range=draft.date_range)
        else:
            grains.append(TimeDimension(time, None, draft.date_range))
    share: tuple[Filter, ...] = ()
    share_parts: tuple[TimePartFilter, ...] = ()
    filters, parts = list(draft.filters), list(draft.parts)
    if draft.share and filters:
        part = next((f for f in filters if f.values == ("true",)), filters[-1])
        filters.remove(part)
        share = (part,)
    elif draft.share and any(p.values for p in parts):
        calendar = [p for p in parts if p.values][-1]  # "share of orders placed on a weekend"
        parts.remove(calendar)
        share_parts = (calendar,)
    per_group = None
    if draft.each and draft.direction and len(draft.dimensions) + len(draft.grains) > 1:
        per_group = PerGroup(tuple(draft.each), draft.limit or 1)
    return Query(
        view=draft.view.name,
        measures=tuple(dict.fromkeys(draft.measures)),
        dimensions=tuple(draft.dimensions),
        time_dimensions=tuple(grains),
        filters=tuple(filters),
        time_parts=tuple(parts),
        having=tuple(draft.having),
        aggregates=tuple(draft.aggregates),
        ratio=draft.ratio and len(draft.measures) + len(draft.aggregates) >= 2,
        difference=draft.difference and len(draft.measures) + len(draft.aggregates) >= 2,
        share=share,
        share_parts=share_parts,
        per_group=per_group,
        average_over=draft.average_over,  # type: ignore[arg-type]
        over_agg=draft.over_agg,
        count_groups=draft.count_groups,
        notes=tuple(draft.notes),
    )


def _is_followup(draft: _Draft, links: Sequence[Link]) -> bool:
    asks = bool(draft.measures or draft.aggregates or draft.numeric or draft.subject)
    return draft.followup or not asks


def _ordered(query: Query, draft: _Draft) -> Query:
    if not query.grouped:
        return query
    first = next(iter(query.measures), None) or next((a.member for a in query.aggregates), None)
    if query.order and not draft.direction:
        return query
    if draft.direction and first:
        limit = draft.limit or (1 if draft.which_singular else None)
        if limit is None and draft.direction and _top_without_number(draft):
            limit = DEFAULT_TOP
        if query.per_group:
            limit = None
        ranked = replace(query, order=((first, draft.direction),), limit=limit)
        return _known_labels(ranked, draft.view) if limit or query.per_group else ranked
    if query.time_dimensions and any(td.granularity for td in query.time_dimensions):
        td = next(td for td in query.time_dimensions if td.granularity)
        return replace(
            query, order=((f"{td.dimension}_{td.granularity}", "asc"),), limit=draft.limit
        )
    if query.dimensions and _ordinal(draft.view, query.dimensions[0]):
        return replace(query, order=((query.dimensions[0], "asc"),), limit=draft.limit)
    if first and not (query.share or query.share_parts):
        return replace(query, order=((first, "desc"),), limit=draft.limit)
    return query


def _known_labels(query: Query, view: ViewIndex) -> Query:
    """A ranking ranks known labels: a missing label (NULL) is not a "top" anything."""
    said = {f.member for f in query.filters}
    labels = [
        Filter(d, "set", ())
        for d in query.dimensions
        if d not in said and view.members[d].member.type == "string"
    ]
    return replace(query, filters=query.filters + tuple(labels)) if labels else query


def _ordinal(view: ViewIndex, member: str) -> bool:
    """Numbers and dates read in their own order (months, hours), not by the measure."""
    info = view.members.get(member)
    return info is not None and info.member.type in ("number", "time")


def _top_without_number(draft: _Draft) -> bool:
    return any(t.text == "top" for t in draft.tokens)
