from __future__ import annotations

import io
import json

from rich.console import Console

from pipeline.archive.runs import JobResult
from pipeline.reports.run_report import render_json, render_table, summary


def _result(status: str = "completed", **kw: object) -> JobResult:
    values: dict[str, object] = {
        "job_id": "j1",
        "run_id": "r1",
        "persona": "analyst",
        "question": "How many flights?",
        "identity": "external:analyst-1",
        "status": status,
        "chat_id": "c1",
        "final_answer": "There were 336,776 flights.",
        "answer_source": "final",
        "sql": ("SELECT MEASURE(flights.count) FROM flights",),
        "total_rows": (1,),
        "error": None,
        "http_status": None,
        "line_count": 12,
        "started_at": None,
        "finished_at": None,
    }
    values.update(kw)
    return JobResult(**values)  # type: ignore[arg-type]


def test_json_report_has_the_documented_keys() -> None:
    (line,) = render_json([_result()]).splitlines()
    record = json.loads(line)
    for key in (
        "job_id",
        "run_id",
        "persona",
        "question",
        "status",
        "chat_id",
        "final_answer",
        "sql",
        "total_rows",
    ):
        assert key in record
    assert record["sql"] == ["SELECT MEASURE(flights.count) FROM flights"]
    assert record["total_rows"] == [1]


def test_table_report_shows_answer_sql_and_errors() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    render_table(
        console,
        [
            _result(),
            _result("failed", error="HTTP 500: boom", sql=(), total_rows=(), final_answer=None),
        ],
        title="run r1",
    )
    text = out.getvalue()
    assert "336,776 flights" in text
    assert "MEASURE(flights.count)" in text
    assert "HTTP 500: boom" in text


def test_fallback_answers_are_marked() -> None:
    out = io.StringIO()
    render_table(Console(file=out, width=200), [_result(answer_source="fallback")], title="t")
    assert "best available" in out.getvalue()


def test_summary_counts_statuses() -> None:
    results = [_result(), _result(), _result("failed", sql=())]
    assert summary(results) == "3 jobs: 2 completed, 1 failed; 2 with SQL"
