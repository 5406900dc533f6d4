"""Truths: what the right answer to an evaluation question is, computed with pandas.

A question's ``truth`` in the questions file is a small mapping, read here and computed on the
frames of :mod:`chat_api.evaluation.frames` (never through the agent's model or SQL):

- ``{value: count|mean|median|sum|min|max|nunique|share, col: arr_delay, of: {...},
  where: {...}}``: one number (``share``: the percentage of the ``where`` rows that also meet
  ``of``);
- ``{rows: <aggregation>, col, by: carrier|[origin, dest], where, order: desc|asc, limit: 3}``:
  one number per group; ``order`` makes it a ranking (the first ``limit`` rows, in order);
- ``{compare: <aggregation>, col, sides: {"JFK": {origin: JFK}, "LGA": {origin: LGA}}, where}``:
  one number per side, the side's label (``"UA|United"``: aliases split on ``|``);
- ``{refuse: true}``: the data cannot answer (prices, passengers, other years...);
- ``{limited: true}``: the persona's access policy hides what is asked; the answer must say so.

``where`` / ``of`` map a column to a value: a scalar (equals), a list (one of), a string starting
with ``>``, ``>=``, ``<``, ``<=`` or ``!=`` (compared as a number when it reads as one), ``"a..b"``
(inclusive range) or null (missing). ``frame`` names the frame (default ``flights``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd  # type: ignore[import-untyped]

from chat_api.errors import TruthSpecError
from chat_api.evaluation.frames import frame

TruthKind = Literal["value", "rows", "refuse", "limited"]
_ALIASES = {
    "carrier": "carrier_name", "origin": "origin_name", "dest": "dest_name",
}  # fmt: skip
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


@dataclass(frozen=True)
class ExpectedRow:
    """One expected row: label groups and its number.

    Each label group holds aliases, one of which a cell must hold.
    """

    labels: tuple[tuple[str, ...], ...]
    value: float


@dataclass(frozen=True)
class Truth:
    """The right answer.

    Attributes:
        kind: ``value``, ``rows``, ``refuse`` or ``limited``.
        value: The number for ``value``.
        rows: Expected rows for ``rows`` (a comparison is rows, one per side, unordered).
        ordered: The rows are a ranking: the answer's first rows must be these, in order.
        percent: The number is a percentage (a fraction of it is accepted too).
    """

    kind: TruthKind
    value: float | None = None
    rows: tuple[ExpectedRow, ...] = ()
    ordered: bool = False
    percent: bool = False


def sql_truth(spec: Mapping[str, Any], run: Callable[[str], Sequence[Any]]) -> Truth:
    """Computes a truth written as hand-written SQL over the warehouse's tables.

    Args:
        spec: ``{kind: value|rows|ranking, sql: "..."}`` (labels first, the number last).
        run: Runs trusted SQL and returns rows (``Warehouse.query_raw``).

    Raises:
        TruthSpecError: an unknown kind, or a ``value`` SQL that is not one number.
    """
    kind = str(spec.get("kind", "value"))
    rows = run(str(spec["sql"]))
    if kind == "value":
        if len(rows) != 1 or not rows[0]:
            raise TruthSpecError(f"a value truth must return one row: {spec['sql']}")
        value = rows[0][-1]
        return Truth("value", value=float(value) if value is not None else 0.0)
    if kind not in ("rows", "ranking"):
        raise TruthSpecError(f"unknown truth kind {kind!r}")
    expected = tuple(
        ExpectedRow(tuple((_text(cell),) for cell in row[:-1]), float(row[-1] or 0.0))
        for row in rows
    )
    return Truth("rows", rows=expected, ordered=kind == "ranking")


def compute_truth(spec: Mapping[str, Any], *, sees: Mapping[str, Any] | None = None) -> Truth:
    """Computes a truth mapping (module docstring).

    Args:
        spec: The question's ``truth`` mapping.
        sees: The persona's visible rows of flights as a ``where`` mapping (``{origin: JFK}``),
            applied before everything else; None for a persona that sees everything.

    Returns:
        The truth.

    Raises:
        TruthSpecError: An unknown key, aggregation or column.
    """
    if spec.get("refuse"):
        return Truth("refuse")
    if spec.get("limited"):
        return Truth("limited")
    data = frame(str(spec.get("frame", "flights")))
    if sees and spec.get("frame", "flights") == "flights":
        data = data[_mask(data, sees)]
    data = data[_mask(data, spec.get("where") or {})]
    try:
        if "value" in spec:
            value = _aggregate(data, str(spec["value"]), spec)
            return Truth("value", value=value, percent=spec["value"] == "share")
        if "rows" in spec:
            return _grouped(data, spec)
        if "compare" in spec:
            return _compared(data, spec)
    except KeyError as exc:
        raise TruthSpecError(f"unknown column {exc} in {dict(spec)}") from exc
    raise TruthSpecError(f"a truth needs value, rows, compare, refuse or limited: {dict(spec)}")


def _aggregate(data: pd.DataFrame, agg: str, spec: Mapping[str, Any]) -> float:
    if agg == "count":
        return float(len(data))
    if agg == "share":
        if len(data) == 0:
            return 0.0
        return 100.0 * float(_mask(data, spec["of"]).sum()) / len(data)
    column = data[str(spec["col"])]
    if agg == "nunique":
        return float(column.nunique())
    if agg not in ("mean", "median", "sum", "min", "max"):
        raise TruthSpecError(f"unknown aggregation {agg!r}")
    return float(getattr(column, agg)())


def _grouped(data: pd.DataFrame, spec: Mapping[str, Any]) -> Truth:
    by = spec["by"] if isinstance(spec["by"], list) else [spec["by"]]
    agg = str(spec["rows"])
    found: list[tuple[tuple[Any, ...], float, pd.Series]] = []
    for key, group in data.groupby(by, sort=True):
        keys = key if isinstance(key, tuple) else (key,)
        found.append((keys, _aggregate(group, agg, spec), group.iloc[0]))
    order = spec.get("order")
    if order in ("desc", "asc"):
        sign = -1.0 if order == "desc" else 1.0
        found.sort(key=lambda item: (math.isnan(item[1]), sign * item[1]))
    limit = spec.get("limit")
    if limit is not None:
        found = found[: int(limit)]
    rows = tuple(
        ExpectedRow(tuple(_labels(col, key, first) for col, key in zip(by, keys, strict=True)), v)
        for keys, v, first in found
    )
    return Truth("rows", rows=rows, ordered=order in ("desc", "asc"), percent=agg == "share")


def _labels(column: str, key: Any, first: pd.Series) -> tuple[str, ...]:
    labels = [_text(key)]
    alias = _ALIASES.get(column)
    if alias is not None and isinstance(first.get(alias), str):
        labels.append(str(first[alias]))
    if column == "month":
        labels.append(_MONTHS[int(key) - 1])
    return tuple(labels)


def _compared(data: pd.DataFrame, spec: Mapping[str, Any]) -> Truth:
    agg = str(spec["compare"])
    rows = []
    for label, where in dict(spec["sides"]).items():
        value = _aggregate(data[_mask(data, where)], agg, spec)
        rows.append(ExpectedRow((tuple(str(label).split("|")),), value))
    return Truth("rows", rows=tuple(rows), percent=agg == "share")


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _mask(data: pd.DataFrame, where: Mapping[str, Any]) -> pd.Series:
    mask = pd.Series(True, index=data.index)
    for column, wanted in where.items():
        mask &= _condition(data[column], wanted)
    return mask


def _condition(column: pd.Series, wanted: Any) -> pd.Series:
    if wanted is None:
        return column.isna()
    if isinstance(wanted, Sequence) and not isinstance(wanted, str):
        return column.isin(list(wanted))
    if isinstance(wanted, str):
        for op in (">=", "<=", "!=", ">", "<"):
            if wanted.startswith(op):
                return _compare(column, op, _number(wanted[len(op) :].strip()))
        if ".." in wanted:
            low, high = (_number(part.strip()) for part in wanted.split("..", 1))
            return (column >= low) & (column <= high)
    return column == wanted


def _compare(column: pd.Series, op: str, value: Any) -> pd.Series:
    ops = {
        ">=": column.ge, "<=": column.le, "!=": column.ne, ">": column.gt, "<": column.lt,
    }  # fmt: skip
    return ops[op](value)


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text
