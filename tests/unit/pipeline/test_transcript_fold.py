"""pipeline.transcript.normalise.Fold: an attempt normalised one line at a time."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlglot

from bench.transcripts import load_transcripts
from models import wire
from models.records import LineEnvelope
from pipeline.transcript import sql_refs
from pipeline.transcript.normalise import Fold, normalise

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _lines(raws: list[bytes], job_id: str = "j1", attempt: int = 1) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(job_id=job_id, attempt=attempt, line_no=n, raw=raw, received_at=AT)
        for n, raw in enumerate(raws, start=1)
    ]


def _sql_call(sql: str) -> list[bytes]:
    path = ["svc_data_analyst_agent", "tools"]
    given = {"sqlQuery": sql}
    got = {**given, "schema": [{"name": "n"}], "data": [["1"]]}
    call = {"name": wire.TOOL_SQL, "input": json.dumps(given)}
    line = {"id": "t1", "role": "assistant", "graphPath": path}
    return [
        json.dumps({**line, "isInProcess": True, "toolCall": call}).encode(),
        json.dumps(
            {**line, "isInProcess": False, "toolCall": {**call, "result": json.dumps(got)}}
        ).encode(),
    ]


def test_a_fold_taken_part_way_and_continued_ends_as_normalise_of_all_lines() -> None:
    lines = _lines(list(load_transcripts()[0].lines))
    fold = Fold("j1", 1)
    for n, line in enumerate(lines, start=1):
        fold.add(line)
        if n == len(lines) // 2:
            half = fold.transcript()
    assert half == normalise(lines[: len(lines) // 2])
    assert fold.transcript() == normalise(lines)
    assert (fold.last_line_no, fold.lines_added) == (len(lines), len(lines))


def test_lines_with_gaps_fold_as_normalise_of_the_same_lines() -> None:
    lines = _lines(list(load_transcripts()[1].lines))
    kept = [line for line in lines if line.line_no % 3]
    fold = Fold("j1", 1)
    for line in kept:
        fold.add(line)
    assert fold.transcript() == normalise(random.Random(7).sample(kept, len(kept)))


def test_a_line_out_of_order_or_of_another_attempt_is_refused() -> None:
    first, second = _lines([b'{"id": "a"}', b'{"id": "b"}'])
    fold = Fold("j1", 1)
    fold.add(second)
    with pytest.raises(ValueError, match="line 1 added after line 2"):
        fold.add(first)
    with pytest.raises(ValueError, match="added to the fold"):
        fold.add(_lines([b"{}", b"{}", b"{}"], attempt=2)[2])
    assert fold.lines_added == 1


@pytest.mark.parametrize(
    ("raws", "chat_id"),
    [
        ([b'{"id": "a"}'], "from-header"),
        ([b'{"id": "__state__", "state": {"chatId": "from-message"}}'], "from-message"),
        (
            [
                b'{"id": "__state__", "state": {"chatId": "from-message"}}',
                b'{"id": "__cutoff__", "state": {"chatId": "from-cutoff"}}',
            ],
            "from-cutoff",
        ),
    ],
)
def test_the_chat_id_is_the_cutoffs_then_a_messages_then_a_headers(
    raws: list[bytes], chat_id: str
) -> None:
    lines = [
        line.model_copy(update={"chat_id": "from-header"}) if line.line_no == 1 else line
        for line in _lines(raws)
    ]
    fold = Fold("j1", 1)
    for line in lines:
        fold.add(line)
    assert fold.transcript().chat_id == chat_id == normalise(lines).chat_id


def test_a_sql_call_is_read_when_its_result_arrives_not_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sql = "SELECT carrier, MEASURE(flight_count) FROM flights_fold_test GROUP BY 1"
    fold = Fold("j1", 1)
    for line in _lines(_sql_call(sql)):
        fold.add(line)

    def no_parsing(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the query was read again at the attempt's end")

    monkeypatch.setattr(sqlglot, "parse_one", no_parsing)
    (query,) = fold.transcript().sql_queries
    assert query.views == ("flights_fold_test",)
    assert query.members == ("flights_fold_test.carrier", "flights_fold_test.flight_count")


def test_a_query_longer_than_the_cache_takes_is_read_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    columns = ", ".join(f"c{n}" for n in range(sql_refs.CACHED_QUERY_CHARS // 4))
    sql = f"SELECT {columns} FROM long_view"
    assert sql_refs.touched(sql).views == ("long_view",)
    calls: list[int] = []
    real = sqlglot.parse_one

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", counted)
    assert sql_refs.touched(sql).views == ("long_view",)
    assert calls == [1]


def test_sql_nested_past_the_recursion_limit_reads_as_touching_nothing() -> None:
    """An agent's query may be anything; a fold (inside the sink's batch) must not raise."""
    sql = "SELECT " + "(" * 5000 + "1" + ")" * 5000 + " FROM flights"
    assert sql_refs.touched(sql) == sql_refs.NOTHING
    fold = Fold("j1", 1)
    for line in _lines(_sql_call(sql)):
        fold.add(line)
    (query,) = fold.transcript().sql_queries
    assert query.sql_query == sql and query.views == ()
