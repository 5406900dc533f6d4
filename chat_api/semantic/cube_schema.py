"""The shape of Cube's YAML data model files, as pydantic models.

Source: Cube documentation, "Data modeling" (cubes, dimensions, measures, joins, views) and
"Access policies"; the subset we read is summarised in ``field-notes.md`` § "Semantic data
model". Every model ignores keys it does not know (``pre_aggregations``, ``segments``, ...): the
hosted format has many. ``meta`` (Cube's free-form map) is kept: the agent reads its
``synonyms``, ``unit`` and ``value_synonyms`` there (README, "Serve your own model").
``chat_api.semantic.model`` loads files into these models, checks them and resolves the views;
import the models from there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DimensionType = Literal["string", "number", "time", "boolean"]
MeasureType = Literal["count", "count_distinct", "sum", "avg", "min", "max", "number"]
Relationship = Literal[
    "many_to_one", "one_to_one", "one_to_many", "belongs_to", "has_one", "has_many"
]
FilterOperator = Literal[
    "equals", "notEquals", "contains", "notContains", "startsWith", "notStartsWith", "endsWith",
    "notEndsWith", "in", "notIn", "gt", "gte", "lt", "lte", "set", "notSet", "inDateRange",
    "notInDateRange", "beforeDate", "beforeOrOnDate", "afterDate", "afterOrOnDate",
]  # fmt: skip
"""Cube's filter operators (Cube documentation, "REST API › Query format › Filters operators")."""


class _Node(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Dimension(_Node):
    """A cube dimension as declared (Cube: "Dimensions")."""

    name: str
    type: DimensionType
    sql: str | None = None
    title: str = ""
    description: str = ""
    primary_key: bool = False
    public: bool = True
    meta: dict[str, Any] = Field(default_factory=dict)


class MeasureFilter(_Node):
    """A filter of a measure (Cube: "Measures", ``filters``)."""

    sql: str


class Measure(_Node):
    """A cube measure as declared (Cube: "Measures")."""

    name: str
    type: MeasureType
    sql: str | None = None
    title: str = ""
    description: str = ""
    filters: tuple[MeasureFilter, ...] = ()
    public: bool = True
    meta: dict[str, Any] = Field(default_factory=dict)


class Join(_Node):
    """A join from one cube to another (Cube: "Joins")."""

    name: str
    relationship: Relationship
    sql: str


class FilterRule(_Node):
    """One row-level filter: ``{member, operator, values}`` or a nested ``or``/``and`` list."""

    member: str | None = None
    operator: FilterOperator | None = None
    values: tuple[str | int | float | bool, ...] = ()
    or_: tuple[FilterRule, ...] | None = Field(default=None, alias="or")
    and_: tuple[FilterRule, ...] | None = Field(default=None, alias="and")

    @field_validator("values", mode="before")
    @classmethod
    def _dates_as_text(cls, values: Any) -> Any:
        """YAML reads an unquoted ``2013-01-01`` as a date; filters take it as ISO text."""
        if isinstance(values, list | tuple):
            return [v.isoformat() if isinstance(v, dt.date) else v for v in values]
        return values


class RowLevel(_Node):
    """``row_level``.

    ``filters`` (all must hold), or ``allow_all``: true for every row, false (with no filters)
    for none; unset with no filters means every row.
    """

    filters: tuple[FilterRule, ...] = ()
    allow_all: bool | None = None


class MemberLevel(_Node):
    """``member_level``.

    Members allowed (``includes``, ``"*"`` for all) minus ``excludes`` (``"*"`` for all).
    """

    includes: Literal["*"] | tuple[str, ...] = "*"
    excludes: Literal["*"] | tuple[str, ...] = ()


class PolicyCondition(_Node):
    """A condition of an access policy (Cube: "Data access policies")."""

    if_: str = Field(alias="if")


class AccessPolicy(_Node):
    """One ``access_policy`` entry; ``group``, ``groups`` or the legacy ``role`` selects users."""

    group: str | None = None
    groups: tuple[str, ...] | None = None
    role: str | None = None
    conditions: tuple[PolicyCondition, ...] = ()
    member_level: MemberLevel | None = None
    row_level: RowLevel | None = None

    @property
    def group_names(self) -> tuple[str, ...]:
        """The groups the entry applies to; ``("*",)`` means every user."""
        names = (self.group, *(self.groups or ()), self.role)
        return tuple(name for name in names if name is not None)


class Cube(_Node):
    """A cube: its table or SQL, dimensions, measures and joins (Cube: "Cubes")."""

    name: str
    sql_table: str | None = None
    sql: str | None = None
    title: str = ""
    description: str = ""
    joins: tuple[Join, ...] = ()
    dimensions: tuple[Dimension, ...] = ()
    measures: tuple[Measure, ...] = ()
    access_policy: tuple[AccessPolicy, ...] = ()
    public: bool = True
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def members(self) -> tuple[Dimension | Measure, ...]:
        """The dimensions, then the measures."""
        return (*self.dimensions, *self.measures)

    def find(self, name: str) -> Dimension | Measure | None:
        """The dimension or measure called ``name``, or ``None``."""
        for member in self.members:
            if member.name == name:
                return member
        return None

    def join(self, name: str) -> Join | None:
        """The join to the cube called ``name``, or ``None``."""
        return next((join for join in self.joins if join.name == name), None)


class IncludeItem(_Node):
    """A member a view includes, optionally renamed (Cube: "Views", ``includes``)."""

    name: str
    alias: str | None = None
    title: str | None = None
    description: str | None = None
    meta: dict[str, Any] | None = None


class ViewCube(_Node):
    """A cube a view reaches through a join path (Cube: "Views", ``cubes``)."""

    join_path: str
    includes: Literal["*"] | tuple[str | IncludeItem, ...] = ()
    excludes: tuple[str, ...] = ()
    prefix: bool = False
    alias: str | None = None


class View(_Node):
    """A view: the members it exposes and its access policies (Cube: "Views")."""

    name: str
    title: str = ""
    description: str = ""
    cubes: tuple[ViewCube, ...] = ()
    access_policy: tuple[AccessPolicy, ...] = ()
    public: bool = True
    meta: dict[str, Any] = Field(default_factory=dict)


class ModelFile(_Node):
    """One YAML file of the data model: its cubes and views."""

    cubes: tuple[Cube, ...] = ()
    views: tuple[View, ...] = ()
