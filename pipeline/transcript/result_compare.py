"""Comparing SQL results the way text-to-SQL evaluations score execution accuracy (pure).

Two results match when they hold the same bag of rows (Spider's execution-accuracy rule, as in
the test-suite evaluation of Zhong et al., 2020):

* Column order is free: a row is compared as the multiset of its values.
* Row order counts only when the query orders its rows (``ORDER BY`` in the outermost SELECT,
  :func:`pipeline.transcript.sql_refs.orders_rows`); otherwise rows are matched as a bag.
* Numbers match within a tolerance (``rel_tol``/``abs_tol`` of :func:`math.isclose`); a string
  that reads as a number is a number (hosted services send ``"245"``).
* ``total_rows`` must agree when both sides report it, since at most 100 rows are returned.

Rows come as arrays in the order of ``schema`` or, in the older payload, as objects; both
normalise to value tuples (:func:`normal_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

REL_TOL: Final = 1e-6
ABS_TOL: Final = 1e-9

Value = float | str | bool | None
Row = tuple[Value, ...]


@dataclass(frozen=True)
class Result:
    """A query result to compare: normalised rows, ``total_rows`` and whether order counts."""

    rows: tuple[Row, ...]
    total_rows: int | None = None
    ordered: bool = False


def normal_value(value: Any) -> Value:
    """Returns: numbers (and numeric strings) as float.

    Booleans and None as they are, anything else as its text (nested values as their JSON-ish
    ``str``).
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return str(value)


def normal_rows(rows: Sequence[Any] | None) -> tuple[Row, ...]:
    """Returns: rows (arrays, or objects of the older payload) as tuples of normal values."""
    out = []
    for row in rows or ():
        values = row.values() if isinstance(row, dict) else row if isinstance(row, list) else [row]
        out.append(tuple(normal_value(v) for v in values))
    return tuple(out)


def values_match(a: Value, b: Value, *, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """Returns: True when two normal values are equal (floats within the tolerance)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    return type(a) is type(b) and a == b


def _sort_key(value: Value) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, float):
        return (2, value)
    return (3, value)


def rows_match(a: Row, b: Row, *, rel_tol: float = REL_TOL) -> bool:
    """Returns: True when two rows hold the same multiset of values (column order free)."""
    if len(a) != len(b):
        return False
    left, right = sorted(a, key=_sort_key), sorted(b, key=_sort_key)
    return all(values_match(x, y, rel_tol=rel_tol) for x, y in zip(left, right, strict=True))


def results_match(a: Result, b: Result, *, rel_tol: float = REL_TOL) -> bool:
    """Says whether two results match (module docstring).

    Args:
        a: One result; row order counts only when both are ``ordered``.
        b: The other result.
        rel_tol: Relative tolerance for numbers.

    Returns:
        True when the rows match as a bag (or as sequences when ordered) and the total row
        counts agree where both are known.
    """
    if a.total_rows is not None and b.total_rows is not None and a.total_rows != b.total_rows:
        return False
    if len(a.rows) != len(b.rows):
        return False
    if a.ordered and b.ordered:
        return all(rows_match(x, y, rel_tol=rel_tol) for x, y in zip(a.rows, b.rows, strict=True))
    unmatched = list(b.rows)
    for row in a.rows:
        found = next((i for i, other in enumerate(unmatched) if rows_match(row, other)), None)
        if found is None:
            return False
        unmatched.pop(found)
    return True


def cells_in_common(a: Row, b: Row, *, rel_tol: float = REL_TOL) -> int:
    """Returns: how many values two rows share as multisets (column order free).

    Each value of ``b`` pairs with at most one equal value of ``a`` (:func:`values_match`).
    """
    unmatched = list(b)
    common = 0
    for value in a:
        found = next(
            (i for i, o in enumerate(unmatched) if values_match(value, o, rel_tol=rel_tol)), None
        )
        if found is not None:
            unmatched.pop(found)
            common += 1
    return common


def soft_f1(got: Result, want: Result, *, rel_tol: float = REL_TOL) -> float:
    """Scores a result with partial credit: a soft F1 over cells, row order free.

    The Soft F1 of BIRD Mini-Dev (Li et al., 2024), with rows paired by content instead of by
    position: each row of ``want`` pairs with at most one row of ``got``, best pairs first (the
    pair sharing the most cells, ties in row order). A paired row's shared cells are true
    positives; its other cells, and every cell of an unpaired row, are false positives (in
    ``got``) or false negatives (in ``want``). ``total_rows`` and row order do not count.

    Args:
        got: The job's result.
        want: The expected result.
        rel_tol: Relative tolerance for numbers.

    Returns:
        ``2·tp / (2·tp + fp + fn)`` in [0, 1]; 1.0 when both hold no cell, 1.0 exactly when
        the rows match as a bag.
    """
    pairs = sorted(
        (
            (-cells_in_common(g, w, rel_tol=rel_tol), gi, wi)
            for gi, g in enumerate(got.rows)
            for wi, w in enumerate(want.rows)
        ),
    )
    used_got: set[int] = set()
    used_want: set[int] = set()
    true_positives = 0
    for negative_common, gi, wi in pairs:
        if negative_common == 0 or gi in used_got or wi in used_want:
            continue
        used_got.add(gi)
        used_want.add(wi)
        true_positives -= negative_common
    cells = sum(len(row) for row in got.rows) + sum(len(row) for row in want.rows)
    if cells == 0:
        return 1.0
    return 2 * true_positives / cells


class ExpectedResult(BaseModel):
    """The rows a question should return for a persona.

    Attributes:
        rows: Rows as arrays (any column order).
        ordered: Whether row order counts; None: when the job's SQL has ``ORDER BY``.
        total_rows: Expected ``totalRows``, when given.
        rel_tol: Relative tolerance for numbers.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    rows: list[list[Any]]
    ordered: bool | None = None
    total_rows: int | None = Field(default=None, alias="totalRows", ge=0)
    rel_tol: float = Field(default=REL_TOL, alias="relTol", ge=0)
