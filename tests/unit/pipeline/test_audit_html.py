"""The audit report: HTML with the one answer renderer (models/rendering.py), escaped; CSV safe."""

from __future__ import annotations

import csv
import html
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.archive.audit import AuditEntry, AuditFilter
from pipeline.reports.audit_formats import csv_cell, to_csv, to_html, to_json
from pipeline.runs.scores import JobScore


def _entry(answer: str, queries: list[dict[str, object]]) -> AuditEntry:
    return AuditEntry(
        asked_at=None, job_id="j1", run_id="r1", persona="analyst", identity="external:a",
        external_id="a", internal_id=None, groups=[], user_attributes={}, security_context=None,
        question="<script>alert(1)</script>?", status="completed", aborted=False, answer=answer,
        answer_source="final", error=None, stream_errors=[], queries=queries,
    )  # fmt: skip


def test_the_answer_table_is_a_table_and_its_html_is_text(tmp_path: Path) -> None:
    answer = "Flights:\n\n| Month | Flights |\n|---|---|\n| Jan | 27,004 |\n\n<img src=x onerror=1>"
    page = to_html([_entry(answer, [])], AuditFilter(), static_dir=tmp_path)
    assert "<th>Month</th>" in page and "<td>27,004</td>" in page
    assert "| Month |" not in page
    assert "<img" not in page and "&lt;img src=x onerror=1&gt;" in page
    assert "<script>alert" not in page


def test_result_cells_are_formatted_by_type_and_charts_lose_their_urls(tmp_path: Path) -> None:
    query = {
        "sql": "SELECT 1",
        "schema": [
            {"name": "month", "column_type": "Int64"},
            {"name": "avg", "column_type": "Double"},
        ],
        "rows": [[1, 12.345678901234567]],
        "total_rows": 1,
        "vega_spec": {"data": {"url": "https://evil.example/x"}, "mark": "bar"},
    }
    static = tmp_path / "static"
    static.mkdir()
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        (static / name).write_text("/* stub */")
    page = to_html([_entry("ok", [query])], AuditFilter(), static_dir=static)
    assert "<td>Jan</td>" in page and "<td>12.35</td>" in page
    assert "12.345678901234567</td>" not in page
    assert "evil.example" not in page


HOSTILE = "<img src=x onerror=alert(1)>"


def test_every_archived_string_of_the_report_is_escaped_ids_included(tmp_path: Path) -> None:
    entry = replace(
        _entry("ok", [{"title": HOSTILE, "sql": HOSTILE, "members": [HOSTILE], "total_rows": 1}]),
        job_id=f"j-{HOSTILE}",
        run_id=f"r-{HOSTILE}",
        persona=HOSTILE,
        external_id=HOSTILE,
        groups=[HOSTILE],
        user_attributes={HOSTILE: HOSTILE},
        status=HOSTILE,
        answer_source=HOSTILE,
        error=HOSTILE,
        stream_errors=[HOSTILE],
        tool_errors=[{"tool": HOSTILE, "error": HOSTILE}],
    )
    page = to_html([entry], AuditFilter(user=HOSTILE), static_dir=tmp_path)
    assert "<img" not in page
    assert f"job j-{html.escape(HOSTILE)} · run r-{html.escape(HOSTILE)}" in page


def test_the_report_sanitises_chart_specs_and_forbids_loading_anything(tmp_path: Path) -> None:
    spec = {
        "$schema": "https://evil.example/schema.json",
        "mark": "bar",
        "config": "https://evil.example/config.json",
        "usermeta": {
            "embedOptions": {
                "config": "https://evil.example/c.json",
                "patch": "https://evil.example/p.json",
                "loader": {"baseURL": "https://evil.example/"},
            }
        },
    }
    query = {
        "schema": [{"name": "n", "column_type": "Int64"}],
        "rows": [[1]],
        "total_rows": 1,
        "vega_spec": spec,
    }
    static = tmp_path / "static"
    static.mkdir()
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        (static / name).write_text("/* stub */")
    page = to_html([_entry("ok", [query])], AuditFilter(), static_dir=static)
    assert "evil.example" not in page and "usermeta" not in page
    assert "vegaEmbed('#chart-1-1'" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cells_that_a_spreadsheet_reads_as_formulas_are_prefixed(start: str) -> None:
    formula = f'{start}HYPERLINK("https://evil.example","x")'
    entry = replace(_entry(formula, []), question=formula, persona=formula, error=formula)
    (row,) = csv.DictReader(io.StringIO(to_csv([entry])))
    for column in ("question", "persona", "answer", "error"):
        assert row[column] == "'" + formula
    assert row["rows_returned"] == "0" and row["job_id"] == "j1"
    assert csv_cell(-5) == -5 and csv_cell("a=b") == "a=b"


def test_csv_and_json_carry_each_scored_jobs_scores_and_leave_others_empty() -> None:
    scored = JobScore(
        matched=False, partial_credit=0.5, case_runs=5, case_pass_rate=0.6, flaky=True
    )
    entries = [_entry("ok", []), replace(_entry("ok", []), job_id="j2")]
    rows = list(csv.DictReader(io.StringIO(to_csv(entries, {"j1": scored}))))
    assert (rows[0]["matched"], rows[0]["partial_credit"], rows[0]["flaky"]) == (
        "False",
        "0.5",
        "True",
    )
    assert (rows[0]["case_runs"], rows[0]["case_pass_rate"]) == ("5", "0.6")
    assert rows[1]["matched"] == rows[1]["flaky"] == ""
    doc = json.loads(to_json(entries, AuditFilter(), {"j1": scored}))
    assert doc["entries"][0]["score"]["case_pass_rate"] == 0.6
    assert doc["entries"][1]["score"] is None
