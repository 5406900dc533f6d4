"""Benchmark results: percentiles, the one-line summary, and the JSON file.

Pure (no I/O but :func:`write_json`). Every benchmark ends as one or more :class:`Result`, each a
figure of ours against a baseline measured in the same run (issue 6: "every figure is a ratio
against a baseline measured in the same run"), printed as::

    bench <name>: <ours> <unit> vs <baseline> <unit> = <ratio>[  <target check>]

and written, with its details, to ``bench/results/<stamp>.json`` and ``bench/results/latest.json``
(gitignored), and as one row per figure to ``bench/history.csv`` (tracked), the trend across runs.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

RESULTS_DIR: Final = Path(__file__).resolve().parent / "results"
HISTORY_FILE: Final = Path(__file__).resolve().parent / "history.csv"
HISTORY_COLUMNS: Final = (
    "started_at",
    "commit",
    "machine",
    "cpus",
    "scale",
    "name",
    "ours",
    "baseline",
    "unit",
    "baseline_unit",
    "ratio",
    "met",
)
"""Columns of ``bench/history.csv``: when, which tree, where, then one figure (``Result``)."""
Comparison = Literal[">=", "<="]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile by linear interpolation between closest ranks (numpy's default).

    Args:
        values: Samples, any order (not modified).
        q: Percentile in ``[0, 100]``.

    Returns:
        The percentile; the single value for one sample.

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside ``[0, 100]``.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Returns: ``n``, ``p50``, ``p90``, ``p99``, ``max`` and ``mean`` of ``values``.

    Empty ``values`` give only ``n``, 0.
    """
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": sum(values) / len(values),
    }


@dataclass(frozen=True)
class Target:
    """A goal for a result's ratio (issue 6, "What to measure").

    Attributes:
        comparison: ``">="`` (the ratio must reach ``value``) or ``"<="`` (stay at most).
        value: The bound on :attr:`Result.ratio`.
    """

    comparison: Comparison
    value: float

    def met_by(self, ratio: float) -> bool:
        """Returns: whether ``ratio`` meets the target (NaN never does)."""
        if math.isnan(ratio):
            return False
        return ratio >= self.value if self.comparison == ">=" else ratio <= self.value


@dataclass(frozen=True)
class Result:
    """One measured figure against its baseline.

    Attributes:
        name: Short kebab-case name (``sink-ingest-5k``).
        ours: Our figure, in ``unit``.
        baseline: The baseline's figure, in ``baseline_unit`` (default ``unit``).
        unit: Unit of ``ours`` (``lines/s``, ``ms``, ``KiB/stream``).
        baseline_label: What the baseline is, for the JSON and the README.
        target: Goal for the ratio, when the issue sets one.
        details: Further figures (percentiles, counts, sizes) for the JSON file only.
    """

    name: str
    ours: float
    baseline: float
    unit: str
    baseline_label: str
    baseline_unit: str | None = None
    target: Target | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """``ours / baseline``; NaN when the baseline is 0."""
        return self.ours / self.baseline if self.baseline else math.nan

    @property
    def met(self) -> bool | None:
        """Whether the target is met; None without a target."""
        return None if self.target is None else self.target.met_by(self.ratio)

    def to_dict(self) -> dict[str, Any]:
        """Returns: the result as JSON-ready data, ratio and target check included."""
        data = asdict(self)
        data["ratio"] = None if math.isnan(self.ratio) else self.ratio
        data["met"] = self.met
        return data


def format_number(value: float) -> str:
    """Returns: ``value`` with about three significant digits, no exponent below 1e9.

    Examples: ``12345.6 -> "12346"``, ``45.67 -> "45.7"``, ``3.14159 -> "3.14"``,
    ``0.012345 -> "0.0123"``, ``0 -> "0"``, NaN -> ``"nan"``.
    """
    if math.isnan(value) or math.isinf(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 100 or value == 0:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_line(result: Result) -> str:
    """Returns: ``bench <name>: <ours> <unit> vs <baseline> <unit> = <ratio>``.

    When the result has a target, ``  [target <cmp> <value>: met|MISSED]`` follows.
    """
    baseline_unit = result.baseline_unit or result.unit
    line = (
        f"bench {result.name}: {format_number(result.ours)} {result.unit} vs "
        f"{format_number(result.baseline)} {baseline_unit} = {format_number(result.ratio)}"
    )
    if result.target is not None:
        verdict = "met" if result.met else "MISSED"
        target = result.target
        line += f"  [target {target.comparison} {format_number(target.value)}: {verdict}]"
    return line


def results_document(
    results: Iterable[Result], *, scale: str, wall_time_s: float, started_at: datetime
) -> dict[str, Any]:
    """Returns: the JSON document of a run: when, scale, wall time, machine, every result."""
    return {
        "started_at": started_at.astimezone(UTC).isoformat(),
        "scale": scale,
        "wall_time_s": wall_time_s,
        "cpus": os.cpu_count(),
        "results": [result.to_dict() for result in results],
    }


def write_json(document: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    """Writes ``document`` as ``<directory>/<started_at stamp>.json`` and ``latest.json``.

    Returns:
        The path of the stamped file.

    Raises:
        OSError: The directory cannot be created or written.
        KeyError: ``document`` has no ``started_at`` (use :func:`results_document`).
    """
    directory.mkdir(parents=True, exist_ok=True)
    stamp = document["started_at"].replace(":", "").replace("-", "").split(".")[0]
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    path = directory / f"bench-{stamp}.json"
    path.write_text(text, encoding="utf-8")
    (directory / "latest.json").write_text(text, encoding="utf-8")
    return path


def append_history(
    document: dict[str, Any], *, commit: str, machine: str, path: Path = HISTORY_FILE
) -> int:
    """Appends every result of ``document`` (:func:`results_document`) as a row of ``path``.

    Args:
        document: A run's document.
        commit: The tree measured (``git rev-parse --short HEAD``, ``+`` when it had changes).
        machine: Where it ran (host name).
        path: The CSV file (:data:`HISTORY_COLUMNS`); its header is written when it is new.

    Returns:
        How many rows were appended.

    Raises:
        OSError: The file cannot be written.
        KeyError: ``document`` lacks a key :func:`results_document` writes.
    """
    new = not path.exists() or path.stat().st_size == 0
    rows = [
        {
            "started_at": document["started_at"],
            "commit": commit,
            "machine": machine,
            "cpus": document["cpus"],
            "scale": document["scale"],
            "name": result["name"],
            "ours": format_number(result["ours"]),
            "baseline": format_number(result["baseline"]),
            "unit": result["unit"],
            "baseline_unit": result["baseline_unit"] or result["unit"],
            "ratio": "" if result["ratio"] is None else format_number(result["ratio"]),
            "met": "" if result["met"] is None else ("met" if result["met"] else "MISSED"),
        }
        for result in document["results"]
    ]
    with path.open("a", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=HISTORY_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return len(rows)
