"""Hand-made hosted-service transcripts normalise with each oddity mapped.

The transcripts are in tests/data/hosted, built from field-notes.md; everything unmappable
is kept.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from models import wire
from models.records import LineEnvelope
from pipeline.transcript.normalise import Transcript, normalise
from pipeline.transcript.sql_refs import touched

HOSTED = Path(__file__).resolve().parents[2] / "data" / "hosted"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def hosted_lines(name: str) -> list[LineEnvelope]:
    raws = (HOSTED / name).read_bytes().split(b"\n")
    assert raws[-1] == b"", "hand-made transcripts end with a newline"
    return [
        LineEnvelope.from_raw(
            job_id="j1", attempt=1, line_no=n, raw=raw, received_at=T0 + timedelta(seconds=n)
        )
        for n, raw in enumerate(raws[:-1], start=1)
    ]


def _normalise(name: str) -> Transcript:
    return normalise(hosted_lines(name))


def test_hosted_tool_names_map_to_meta_and_sql_with_string_values_kept() -> None:
    t = _normalise("cube_tools.ndjson")
    assert [(c.name, c.kind, c.complete) for c in t.tool_calls] == [
        ("cubeMeta", "meta", True),
        ("cubeSqlApi", "sql", True),
    ]
    (query,) = t.sql_queries
    assert query.rows == [["completed", "245"], ["processing", "120"], ["shipped", "87"]]
    assert query.total_rows == 3 and query.returned_rows == 3
    assert query.vega_spec["mark"] == "bar"
    assert query.views == ("orders_view",)
    assert query.members == ("orders_view.count", "orders_view.status")
    assert (t.answer.source, t.answer.content) == ("final", "Most orders are completed (245).")
    assert t.chat_id == "c-hosted-1"


def test_state_and_usage_sentinels_are_kept_and_usage_is_read() -> None:
    t = _normalise("cube_tools.ndjson")
    by_id = {m.message_id: m for m in t.messages}
    assert by_id[wire.ID_STATE].extra["state"]["messages"][0]["type"] == "human"
    assert t.usage is not None and t.usage["totalTokens"] == 5432
    assert by_id["f1"].extra == {"isStructuredResponse": False}  # unknown field kept
    assert not t.aborted and not t.suspended


def test_older_sql_payload_maps_query_rows_and_schema_from_annotation() -> None:
    t = _normalise("older_sql_payload.ndjson")
    first, second = t.sql_queries
    assert first.sql_query == "SELECT status, COUNT(*) AS count FROM orders GROUP BY 1"
    assert first.rows == [
        {"Orders.status": "completed", "Orders.count": "245"},
        {"Orders.status": "shipped", "Orders.count": "87"},
    ]
    assert first.result_schema == [
        {"name": "Orders.status", "column_type": "string"},
        {"name": "Orders.count", "column_type": "number"},
    ]
    # A tool named otherwise whose input is the older {"query": {...}} counts as SQL by payload.
    assert second.tool_name == "loadData" and second.sql_query is None
    assert second.rows == first.rows
    (loader,) = [c for c in t.tool_calls if c.name == "loadData"]
    assert loader.input == {
        "query": {"measures": ["Orders.count"], "dimensions": ["Orders.status"]}
    }
    assert t.answer.source == "final"  # graphPath ["final", "answer"]: len <= 2


def test_stream_without_final_line_falls_back_to_last_complete_content() -> None:
    t = _normalise("no_final.ndjson")
    assert (t.answer.source, t.answer.content) == ("fallback", "Revenue grew 12% year over year.")
    assert t.answer.message_id == "a1"


def test_error_line_is_collected_on_the_answer() -> None:
    t = _normalise("error_line.ndjson")
    assert t.errors == ("Rate limit exceeded for model gpt-x",)
    assert t.answer.stream_errors == t.errors
    assert t.answer.source == "fallback"


def test_aborted_and_suspended_sentinels_are_flagged_and_never_an_answer() -> None:
    aborted = _normalise("aborted.ndjson")
    assert aborted.aborted and aborted.answer.message_id == "a1"
    sentinel = next(m for m in aborted.messages if m.message_id == wire.ID_ABORTED)
    assert sentinel.extra["code"] == "chat_aborted"
    suspended = _normalise("suspended.ndjson")
    assert suspended.suspended and suspended.answer.source == "none"
    resume = next(m for m in suspended.messages if m.message_id == wire.ID_SUSPENDED)
    assert resume.extra["retryable"] is True
    assert resume.extra["messageId"] == "1732370000000-message"


def test_tool_error_is_kept_on_the_call_and_the_query() -> None:
    t = _normalise("tool_error.ndjson")
    (call,) = t.tool_calls
    assert call.name == "cubeSqlApiWithChart" and call.kind == "sql"
    assert call.error == 'Error: column "statuz" does not exist'
    (query,) = t.sql_queries
    assert query.error == call.error and query.rows is None


def test_lines_out_of_sort_order_keep_line_order_and_sort_values() -> None:
    t = _normalise("out_of_order.ndjson")
    assert [m.message_id for m in t.messages][:4] == [wire.ID_CUTOFF, "f1", "u1", "a1"]
    assert {m.message_id: m.sort for m in t.messages}["f1"] == 3
    assert t.answer.content == "Two answers."


def test_unmappable_lines_and_payloads_are_reported_and_kept_raw() -> None:
    lines = hosted_lines("unmappable.ndjson")
    t = normalise(lines)
    assert [n for n, _ in t.parse_errors] == [4, 5, 6]
    assert "invalid UTF-8" in t.parse_errors[1][1]
    (call,) = t.tool_calls
    assert call.input is None and call.input_raw == "{not json"
    assert call.result is None and call.result_raw == "[1, 2]"
    assert "not JSON" in (call.payload_error or "")
    assert b"caf\xe9" in lines[4].raw  # the envelope keeps the bytes for the archive
    final = next(m for m in t.messages if m.message_id == "f1")
    assert final.extra == {"futureField": {"nested": [1, 2]}}


@pytest.mark.parametrize(
    ("sql", "views", "members", "ordered"),
    [
        ("SELECT origin, MEASURE(count) FROM flights GROUP BY 1", ["flights"], 2, False),
        (
            "SELECT f.carrier FROM flights f JOIN airlines a ON f.carrier = a.code",
            ["airlines", "flights"],
            2,
            False,
        ),
        ("SELECT x FROM t ORDER BY x", ["t"], 1, True),
        ("not sql at all (((", [], 0, False),
    ],
)
def test_sql_refs_name_views_members_and_ordering(
    sql: str, views: list[str], members: int, ordered: bool
) -> None:
    refs = touched(sql)
    assert list(refs.views) == views
    assert len(refs.members) == members
    assert refs.ordered is ordered
