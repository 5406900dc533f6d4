"""The pure parts of the benchmark report: percentiles, result lines, the JSON file."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.results import (
    Result,
    Target,
    append_history,
    format_line,
    format_number,
    percentile,
    results_document,
    summary,
    write_json,
)


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 99) == pytest.approx(3.97)
    assert values == [4.0, 1.0, 3.0, 2.0]


def test_percentile_of_one_value_is_that_value() -> None:
    assert percentile([7.0], 99) == 7.0


@pytest.mark.parametrize("q", [-1, 100.5])
def test_percentile_refuses_q_outside_0_100(q: float) -> None:
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], q)


def test_percentile_refuses_no_values() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_summary_gives_percentiles_and_count() -> None:
    found = summary([float(n) for n in range(1, 101)])
    assert found["n"] == 100
    assert found["p50"] == pytest.approx(50.5)
    assert found["max"] == 100
    assert found["mean"] == pytest.approx(50.5)
    assert summary([]) == {"n": 0}


@pytest.mark.parametrize(
    ("value", "text"),
    [(12345.6, "12346"), (45.67, "45.7"), (3.14159, "3.14"), (0.012345, "0.0123"), (0, "0")],
)
def test_format_number_keeps_about_three_significant_digits(value: float, text: str) -> None:
    assert format_number(value) == text


def test_format_line_shows_ours_baseline_and_ratio() -> None:
    result = Result("sink-ingest-5k", 30_000.0, 60_000.0, "lines/s", "COPY")
    assert format_line(result) == "bench sink-ingest-5k: 30000 lines/s vs 60000 lines/s = 0.5"


def test_format_line_states_whether_the_target_is_met() -> None:
    target = Target(">=", 0.8)
    met = Result("stream-c100", 90.0, 100.0, "lines/s", "httpx", target=target)
    missed = Result("stream-c100", 50.0, 100.0, "lines/s", "httpx", target=target)
    assert format_line(met).endswith("= 0.9  [target >= 0.8: met]")
    assert format_line(missed).endswith("= 0.5  [target >= 0.8: MISSED]")
    lower = Result("delay", 1.5, 1.0, "s", "target", target=Target("<=", 1.0))
    assert lower.met is False


def test_zero_baseline_gives_nan_ratio_and_never_meets_a_target() -> None:
    result = Result("x", 1.0, 0.0, "ms", "none", target=Target(">=", 0.0))
    assert math.isnan(result.ratio)
    assert result.met is False
    assert result.to_dict()["ratio"] is None
    assert format_line(result).endswith("= nan  [target >= 0: MISSED]")


def test_write_json_writes_stamped_and_latest_files(tmp_path: Path) -> None:
    results = [
        Result("a", 2.0, 4.0, "lines/s", "COPY", target=Target(">=", 0.5), details={"n": 3}),
        Result("b", 1.0, 1.0, "ms", "httpx", baseline_unit="ms"),
    ]
    started = datetime(2026, 11, 23, 12, 30, 5, 123, tzinfo=UTC)
    document = results_document(results, scale="small", wall_time_s=12.5, started_at=started)
    path = write_json(document, tmp_path)
    assert path.name == "bench-20261123T123005.json"
    stored = json.loads(path.read_text())
    assert stored == json.loads((tmp_path / "latest.json").read_text())
    assert stored["scale"] == "small"
    assert stored["wall_time_s"] == 12.5
    first = stored["results"][0]
    assert (first["name"], first["ratio"], first["met"]) == ("a", 0.5, True)
    assert first["target"] == {"comparison": ">=", "value": 0.5}
    assert first["details"] == {"n": 3}
    assert stored["results"][1]["met"] is None


def test_history_gets_one_row_per_figure_and_its_header_once(tmp_path: Path) -> None:
    history = tmp_path / "history.csv"
    results = [
        Result("a", 2.0, 4.0, "lines/s", "COPY", target=Target(">=", 0.5)),
        Result("b", 3.0, 0.0, "ms", "httpx", baseline_unit="s"),
    ]
    first = datetime(2026, 11, 23, 12, 30, 5, tzinfo=UTC)
    for started, commit in ((first, "abc1234"), (first.replace(hour=13), "def5678+")):
        document = results_document(results, scale="small", wall_time_s=1.0, started_at=started)
        assert append_history(document, commit=commit, machine="box", path=history) == 2
    rows = list(csv.DictReader(history.open(encoding="utf-8")))
    assert history.read_text().count("started_at,commit,") == 1
    assert [(r["commit"], r["name"], r["ratio"], r["met"]) for r in rows] == [
        ("abc1234", "a", "0.5", "met"),
        ("abc1234", "b", "", ""),
        ("def5678+", "a", "0.5", "met"),
        ("def5678+", "b", "", ""),
    ]
    assert (rows[1]["unit"], rows[1]["baseline_unit"], rows[1]["machine"]) == ("ms", "s", "box")
    assert rows[2]["started_at"].startswith("2026-11-23T13:30:05")
