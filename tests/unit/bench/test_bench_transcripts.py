"""The send-time stamp, tool-result padding and the sink mix (pure)."""

from __future__ import annotations

import json

import pytest

from bench.transcripts import (
    TOOL_RESULT_MAX_BYTES,
    TOOL_RESULT_MIN_BYTES,
    Transcript,
    pad_tool_result,
    request_key,
    sent_at_of,
    sink_mix,
    stamp_line,
)


def test_stamp_adds_a_first_member_that_reads_back() -> None:
    stamped = stamp_line(b'{"id":"__cutoff__","sort":0}', 1700000000.123456)
    assert json.loads(stamped) == {"benchSentAt": 1700000000.123456, "id": "__cutoff__", "sort": 0}
    assert sent_at_of(stamped) == pytest.approx(1700000000.123456)


def test_stamp_of_an_empty_object_is_valid_json() -> None:
    stamped = stamp_line(b"{}", 1.5)
    assert json.loads(stamped) == {"benchSentAt": 1.5}
    assert sent_at_of(stamped) == 1.5


def test_stamp_refuses_a_line_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="object"):
        stamp_line(b"[1]", 1.0)


def test_unstamped_line_has_no_send_time() -> None:
    assert sent_at_of(b'{"id":"x"}') is None
    assert sent_at_of(b'{"benchSentAt":oops}') is None


def _tool_line(result: object) -> bytes:
    call = {"name": "svcSqlApi", "input": "{}", "result": json.dumps(result)}
    return json.dumps({"id": "t1", "toolCall": call}).encode()


def test_padding_repeats_result_rows_up_to_the_size() -> None:
    line = _tool_line({"data": [[1, "a"], [2, "b"]], "totalRows": 2})
    padded = pad_tool_result(line, 10_000)
    result = json.loads(json.loads(padded)["toolCall"]["result"])
    assert 9_000 <= len(json.dumps(result, separators=(",", ":"))) <= 11_000
    assert result["data"][:2] == [[1, "a"], [2, "b"]]
    assert result["totalRows"] == 2


def test_padding_leaves_lines_without_a_result_alone() -> None:
    line = b'{"id":"d","content":"hello","isDelta":true}'
    assert pad_tool_result(line, 5_000) is line


def test_sink_mix_is_deterministic_and_pads_tool_results_only() -> None:
    plain = b'{"id":"a","content":"x"}'
    transcript = Transcript("q", "p", {"externalId": "u"}, (plain, _tool_line({"data": [[1]]})))
    first = list(sink_mix([transcript], 5))
    assert first == list(sink_mix([transcript], 5))
    assert [(m.job, m.line_no) for m in first] == [(0, 1), (0, 2), (1, 1), (1, 2), (2, 1)]
    assert first[0].raw == plain
    sizes = [len(m.raw) for m in first if m.line_no == 2]
    assert all(TOOL_RESULT_MIN_BYTES <= s <= TOOL_RESULT_MAX_BYTES + 1024 for s in sizes)


def test_request_key_prefers_external_id() -> None:
    assert request_key("q", {"externalId": "e", "email": "m"}) == "q\x00e"
    assert request_key("q", {"email": "m"}) == "q\x00m"
    assert request_key("q", {}) == "q\x00"
