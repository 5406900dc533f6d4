"""The HTML audit report renders answers with the one answer renderer (models/rendering.py)."""

from __future__ import annotations

from pathlib import Path

from pipeline.archive.audit import AuditEntry, AuditFilter
from pipeline.reports.audit_formats import to_html


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
