"""The typed query every reader produces: Cube's REST query format, with a few extensions.

Source of the shape: Cube documentation, "REST API › Query format" (``measures``,
``dimensions``, ``timeDimensions`` with ``granularity`` and ``dateRange``, ``filters`` with
``member``/``operator``/``values`` and ``and``/``or`` groups, ``order``, ``limit``). A language
model or a Cube user writes the same JSON; :meth:`Query.from_json` reads it.

Extensions, where Cube's query has no form (all optional, all in ``ext``-named fields):

- ``having``: filters on measures (``{"member": "orders.count", "operator": "gte",
  "values": ["1000"]}``), applied after aggregation;
- ``aggregates``: an aggregate over a numeric dimension that the model has no measure for
  (``{"agg": "median", "member": "flights.arr_delay"}``, ``percentile`` with ``p``);
- ``ratio``: the first two measures divided (``"revenue over orders"``);
- ``per_group``: top-N within each group (``{"dimensions": [...], "limit": 1}``);
- ``share``: the percentage of the whole that a part is (``{"filters": [...]}``);
- ``average_over``: the average per time bucket of a count (``"orders per day on average"``);
- ``time_parts``: calendar parts of a time dimension as filters or groups (month of year,
  weekday, hour: ``{"dimension": ..., "part": "month", "values": [3]}``).

Member names are qualified ``view.member``; one query reads one view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Operator = Literal[
    "equals", "notEquals", "contains", "notContains", "gt", "gte", "lt", "lte", "set", "notSet",
    "inDateRange", "notInDateRange", "beforeDate", "afterDate",
]  # fmt: skip
"""Cube's filter operators (Cube documentation, "Filters operators")."""
Granularity = Literal["hour", "day", "week", "month", "quarter", "year"]
TimePart = Literal["hour", "weekday", "day", "month", "quarter", "year"]
Direction = Literal["asc", "desc"]
Aggregation = Literal["count", "sum", "avg", "min", "max", "median", "percentile", "countDistinct"]

NEGATED: Mapping[str, str] = {
    "equals": "notEquals", "notEquals": "equals", "contains": "notContains",
    "notContains": "contains", "gt": "lte", "gte": "lt", "lt": "gte", "lte": "gt",
    "set": "notSet", "notSet": "set", "inDateRange": "notInDateRange",
    "notInDateRange": "inDateRange",
}  # fmt: skip
"""The operator that keeps exactly the rows another one drops ("not", "excluding")."""


@dataclass(frozen=True)
class Filter:
    """``{member, operator, values}``; ``values`` are text, as in Cube's REST query."""

    member: str
    operator: Operator
    values: tuple[str, ...] = ()

    def negated(self) -> Filter:
        """The filter that keeps the rows this one drops."""
        return replace(self, operator=NEGATED[self.operator])  # type: ignore[arg-type]


@dataclass(frozen=True)
class TimeDimension:
    """``{dimension, granularity?, dateRange?}``; ``date_range`` is two ISO dates, inclusive."""

    dimension: str
    granularity: Granularity | None = None
    date_range: tuple[str, str] | None = None


@dataclass(frozen=True)
class TimePartFilter:
    """A calendar part of a time dimension (extension): ``part`` in ``values``, or grouped."""

    dimension: str
    part: TimePart
    values: tuple[int, ...] = ()
    negate: bool = False


@dataclass(frozen=True)
class DimensionAggregate:
    """An aggregate over a numeric dimension (extension), e.g. the median of a column."""

    agg: Aggregation
    member: str
    p: float | None = None


@dataclass(frozen=True)
class PerGroup:
    """Top-N within each group (extension): the first ``limit`` rows per ``dimensions``."""

    dimensions: tuple[str, ...]
    limit: int = 1


@dataclass(frozen=True)
class Sides:
    """Two sides of one member compared by arithmetic (extension).

    "How many more flights from A than from B": the query's number for ``values[0]`` minus (or
    divided by) its number for ``values[1]``.

    Attributes:
        member: The member the sides are values of (a time dimension when ``part`` is set).
        part: The calendar part the values are of ("year", "month"), or None.
        values: The two sides, in the question's order.
        op: ``difference`` (first minus second), ``ratio`` (first divided by second) or
            ``change`` (the percent change from the first to the second,
            ``100 * (second - first) / first``).
    """

    member: str
    part: TimePart | None
    values: tuple[str, str]
    op: Literal["difference", "ratio", "change"]


@dataclass(frozen=True)
class Query:
    """One typed query over one view (module docstring).

    Attributes:
        view: The view read.
        measures: Measures, ``view.member``.
        dimensions: Grouping dimensions.
        time_dimensions: Time dimensions with granularity (a group) and/or a date range.
        filters: Row filters, all of which hold.
        time_parts: Calendar-part filters and groups (weekday, month of year, hour).
        having: Filters on measures (or on :attr:`aggregates` by their member).
        aggregates: Aggregates of numeric dimensions, output after the measures.
        order: ``(member, direction)`` pairs; a member may be a measure, a dimension or an
            aggregate's member.
        limit: Most rows, or None.
        ratio: Divide the first output number by the second (``a / b``).
        difference: Subtract the second output number from the first (``a - b``).
        sides: Two sides compared by arithmetic: their difference or ratio.
        count_groups: The answer is the number of groups (rows) the query returns: "how many
            customers have more than 500 orders" counts the customers passing the ``having``.
        per_group: Top-N within each group.
        share: Part filters: the answer is the part's percentage of the whole.
        share_parts: Calendar-part filters of the part ("orders placed on a weekend").
        average_over: A time granularity: the first measure is computed per bucket and the
            buckets aggregated with ``over_agg``.
        over_agg: ``avg`` (default), ``median``, ``max`` or ``min`` of the buckets ("median
            daily revenue").
    """

    view: str
    measures: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()
    time_dimensions: tuple[TimeDimension, ...] = ()
    filters: tuple[Filter, ...] = ()
    time_parts: tuple[TimePartFilter, ...] = ()
    having: tuple[Filter, ...] = ()
    aggregates: tuple[DimensionAggregate, ...] = ()
    order: tuple[tuple[str, Direction], ...] = ()
    limit: int | None = None
    ratio: bool = False
    difference: bool = False
    sides: Sides | None = None
    count_groups: bool = False
    per_group: PerGroup | None = None
    share: tuple[Filter, ...] = ()
    share_parts: tuple[TimePartFilter, ...] = ()
    average_over: Granularity | None = None
    over_agg: str = "avg"
    notes: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        """Returns: the query as a JSON object (Cube's keys in camelCase, extensions as named)."""
        raw = asdict(self)
        raw.pop("notes")
        raw["timeDimensions"] = [_camel(td) for td in raw.pop("time_dimensions")]  # Cube's spelling
        raw["timeParts"] = raw.pop("time_parts")
        raw["perGroup"] = raw.pop("per_group")
        raw["averageOver"] = raw.pop("average_over")
        raw["overAgg"] = raw.pop("over_agg")
        raw["countGroups"] = raw.pop("count_groups")
        raw["shareParts"] = raw.pop("share_parts")
        return raw

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Query:
        """Reads :meth:`to_json`'s output (or a Cube REST query with ``view`` added).

        Raises:
            KeyError, TypeError, ValueError: a malformed object.
        """
        per_group = raw.get("perGroup")
        return cls(
            view=str(raw["view"]),
            measures=tuple(raw.get("measures", ())),
            dimensions=tuple(raw.get("dimensions", ())),
            time_dimensions=tuple(
                TimeDimension(
                    td["dimension"],
                    td.get("granularity"),
                    tuple(td["dateRange"]) if td.get("dateRange") else None,
                )
                for td in raw.get("timeDimensions", ())
            ),
            filters=tuple(_filter(f) for f in raw.get("filters", ())),
            time_parts=tuple(_part(t) for t in raw.get("timeParts", ())),
            share_parts=tuple(_part(t) for t in raw.get("shareParts", ())),
            having=tuple(_filter(f) for f in raw.get("having", ())),
            aggregates=tuple(
                DimensionAggregate(a["agg"], a["member"], a.get("p"))
                for a in raw.get("aggregates", ())
            ),
            order=tuple((str(m), d) for m, d in raw.get("order", ())),
            limit=raw.get("limit"),
            ratio=bool(raw.get("ratio", False)),
            difference=bool(raw.get("difference", False)),
            sides=_sides(raw["sides"]) if raw.get("sides") else None,
            count_groups=bool(raw.get("countGroups", False)),
            per_group=PerGroup(tuple(per_group["dimensions"]), int(per_group["limit"]))
            if per_group
            else None,
            share=tuple(_filter(f) for f in raw.get("share", ())),
            average_over=raw.get("averageOver"),
            over_agg=str(raw.get("overAgg", "avg")),
        )

    @property
    def members(self) -> tuple[str, ...]:
        """Every member the query names, measures first."""
        found = [*self.measures, *self.dimensions, *(td.dimension for td in self.time_dimensions)]
        found += [f.member for f in (*self.filters, *self.share)]
        found += [t.dimension for t in self.time_parts] + [a.member for a in self.aggregates]
        return tuple(dict.fromkeys(found))

    @property
    def grouped(self) -> bool:
        """Whether the answer has one row per group."""
        return bool(
            self.dimensions
            or any(td.granularity for td in self.time_dimensions)
            or any(not t.values for t in self.time_parts)
        )


def _camel(td: Mapping[str, Any]) -> dict[str, Any]:
    found = {"dimension": td["dimension"], "granularity": td["granularity"]}
    found["dateRange"] = list(td["date_range"]) if td["date_range"] else None
    return found


def _sides(raw: Mapping[str, Any]) -> Sides:
    values = tuple(str(v) for v in raw["values"])
    return Sides(raw["member"], raw.get("part"), (values[0], values[1]), raw["op"])


def _part(raw: Mapping[str, Any]) -> TimePartFilter:
    return TimePartFilter(raw["dimension"], raw["part"], tuple(raw["values"]), bool(raw["negate"]))


def _filter(raw: Mapping[str, Any]) -> Filter:
    return Filter(str(raw["member"]), raw["operator"], tuple(str(v) for v in raw.get("values", ())))
