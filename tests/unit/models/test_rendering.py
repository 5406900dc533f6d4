"""The one answer renderer: safe Markdown, numbers and months as people read them, safe charts."""

from __future__ import annotations

import json

import pytest

from models.rendering import answer_preview, chart_spec, format_cell, markdown_html, result_table


def test_markdown_tables_render_as_html_tables() -> None:
    html = markdown_html("Flights:\n\n| Carrier | Flights |\n|---|---|\n| UA | 58,665 |")
    assert "<table>" in html
    assert "<th>Carrier</th>" in html
    assert "<td>58,665</td>" in html
    assert "|" not in html


def test_markdown_raw_html_is_text_never_markup() -> None:
    html = markdown_html("<script>alert(1)</script> and <img src=x onerror=alert(1)>")
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_markdown_refuses_script_links_and_images() -> None:
    html = markdown_html(
        "[a](javascript:alert(1)) [b](https://example.com) ![c](http://evil/x.png)"
    )
    assert 'href="javascript' not in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">b</a>' in html
    assert "<img" not in html


def test_markdown_of_nothing_is_empty() -> None:
    assert markdown_html(None) == ""
    assert markdown_html("") == ""


def test_numbers_are_formatted_by_type_and_name() -> None:
    assert format_cell(28834, name="count", column_type="Int64") == "28,834"
    assert format_cell("28834", name="count", column_type="Int64") == "28,834"
    assert format_cell(12.345678901234567, name="avg_arr_delay", column_type="Double") == "12.35"
    assert format_cell(1266.2345, name="avg_distance", column_type="Double") == "1,266.2"
    assert format_cell(0.004531, name="avg_x", column_type="Double") == "0.00453"
    assert format_cell(0.1234, name="pct_delayed", column_type="Double") == "12.3%"
    assert format_cell(2004, name="year", column_type="Int64") == "2004"
    assert format_cell(None, name="x") == ""
    assert format_cell("JFK", name="origin", column_type="String") == "JFK"
    assert format_cell(float("nan"), name="x", column_type="Double") == "n/a"


def test_months_are_named() -> None:
    assert format_cell(1, name="month", column_type="Int64") == "Jan"
    assert format_cell("12", name="month", column_type="Int64") == "Dec"
    assert format_cell(13, name="month", column_type="Int64") == "13"


def test_result_table_formats_every_cell_and_marks_numeric_columns() -> None:
    schema = [{"name": "month", "column_type": "Int64"}, {"name": "avg", "column_type": "Double"}]
    table = result_table(schema, [[1, "3.14159"], [2, 2.0]] * 40, limit=3)
    assert table["columns"] == ["month", "avg"]
    assert table["numeric"] == [True, True]
    assert table["rows"] == [["Jan", "3.14"], ["Feb", "2"], ["Jan", "3.14"]]
    assert (table["shown"], table["total"]) == (3, 80)


def test_chart_spec_strips_urls_binds_rows_and_names_months() -> None:
    spec = {
        "data": {"url": "https://evil.example/data.json"},
        "mark": {"type": "line", "href": "https://evil.example"},
        "encoding": {
            "x": {"field": "month", "type": "ordinal"},
            "y": {"field": "n", "type": "quantitative"},
            "tooltip": [{"field": "n", "type": "quantitative"}],
        },
        "layer": [{"mark": {"type": "image", "url": "https://evil.example/x.png"}}],
    }
    schema = [{"name": "month", "column_type": "Int64"}, {"name": "n", "column_type": "Double"}]
    out = chart_spec(spec, schema, [["1", "10.5"], ["2", "11"]])
    assert out is not None
    text = json.dumps(out)
    assert "evil.example" not in text
    assert out["data"] == {"values": [{"month": 1, "n": 10.5}, {"month": 2, "n": 11}]}
    assert "'Jan'" in out["encoding"]["x"]["axis"]["labelExpr"]
    assert out["encoding"]["tooltip"][0]["format"] == ",.2~f"
    assert spec["data"] == {"url": "https://evil.example/data.json"}  # the input is not changed


def test_chart_spec_of_no_spec_is_none() -> None:
    assert chart_spec(None, [], []) is None
    assert chart_spec("not a spec", [], []) is None  # type: ignore[arg-type]


def test_chart_spec_drops_embed_options_loaded_config_and_foreign_schemas() -> None:
    spec = {
        "$schema": "https://evil.example/vega-lite.json",
        "mark": "bar",
        "config": "https://evil.example/config.json",
        "usermeta": {"embedOptions": {"patch": "https://evil.example/p", "config": "x"}},
        "layer": [{"mark": "line", "usermeta": {"embedOptions": {"loader": {}}}}],
    }
    out = chart_spec(spec, [{"name": "n", "column_type": "Int64"}], [[1]])
    assert out is not None
    assert "evil.example" not in json.dumps(out) and "usermeta" not in json.dumps(out)
    assert out["$schema"] == "https://vega.github.io/schema/vega-lite/v5.json"
    assert "config" not in out
    kept = chart_spec(
        {"$schema": "https://vega.github.io/schema/vega-lite/v5.20.json", "config": {"view": {}}},
        [],
        [],
    )
    assert kept is not None and kept["config"] == {"view": {}}
    assert kept["$schema"].endswith("v5.20.json")


TABLE = "| Carrier | Average arrival delay |\n|---|---|\n| UA | 3.5 |\n| AA | 1.2 |"


@pytest.mark.parametrize(
    ("answer", "preview"),
    [
        (
            "**United** flew the most\nflights (58,665). American was second.",
            "United flew the most flights (58,665).",
        ),
        ("The mean was 3.5 minutes. Next.", "The mean was 3.5 minutes."),
        (TABLE, "Table: Carrier, Average arrival delay"),
        ("Here they are:\n\n" + TABLE, "Here they are:"),
        ("# Delays\n\nUA led.", "Delays"),
        ("`SELECT 1` ran", "SELECT 1 ran"),
        ("", ""),
        (None, ""),
    ],
)
def test_an_answers_preview_is_its_first_sentence_as_plain_text(
    answer: str | None, preview: str
) -> None:
    assert answer_preview(answer) == preview
    assert "|" not in answer_preview(answer)


def test_a_long_first_sentence_is_cut_with_an_ellipsis() -> None:
    assert answer_preview("word " * 100, chars=20) == "word word word word…"
