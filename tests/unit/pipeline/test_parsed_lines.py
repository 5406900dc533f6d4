"""Parse once: the sink's parsed lines kept across batches, and the storable test on raw lines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.archive import storable_as_parsed, storable_row
from models.records import LineEnvelope
from pipeline.archive.parsed import KnownLine, ParsedLines, known_line


def _line(job: str, attempt: int, line_no: int, raw: bytes = b'{"id":"m"}') -> LineEnvelope:
    return LineEnvelope.from_raw(
        job_id=job, attempt=attempt, line_no=line_no, raw=raw, received_at=datetime.now(UTC)
    )


def test_parsed_lines_are_kept_until_their_attempt_is_forgotten() -> None:
    parsed = ParsedLines()
    lines = [_line("a", 1, 1), _line("a", 1, 2), _line("b", 1, 1)]
    parsed.add(lines)
    assert parsed.known[("a", 1, 2)].line is lines[1]
    parsed.forget([("a", 1)])
    assert set(parsed.known) == {("b", 1, 1)}
    assert parsed.bytes == len(lines[2].raw)


def test_parsed_lines_stay_within_their_byte_budget_oldest_first() -> None:
    parsed = ParsedLines(max_bytes=25)
    parsed.add([_line("a", 1, n, b'{"id":"%d"}' % n) for n in range(1, 5)])  # 10 bytes each
    assert list(parsed.known) == [("a", 1, 3), ("a", 1, 4)]
    assert parsed.bytes == 20


def test_a_line_added_again_replaces_the_earlier_one() -> None:
    parsed = ParsedLines()
    parsed.add([_line("a", 1, 1, b'{"id":"x"}')])
    newer = _line("a", 1, 1, b'{"id":"yy"}')
    parsed.add([newer])
    assert parsed.known[("a", 1, 1)].line is newer and parsed.bytes == len(newer.raw)


def _stored(line: LineEnvelope) -> dict[tuple[str, int, int], KnownLine]:
    return {(line.job_id, line.attempt, line.line_no): known_line(line, inserted=True)}


def test_a_line_inserted_by_the_batch_is_kept_as_stored_and_claimed() -> None:
    parsed = ParsedLines()
    received = _line("a", 1, 1, b'{"id":"m","content":"ann@corp.io"}')
    as_stored = _line("a", 1, 1, b'{"id":"m","content":"[REDACTED:email]"}')
    assert parsed.add([received], _stored(as_stored)) == [("a", 1, 1)]
    kept = parsed.known[("a", 1, 1)]
    assert kept.inserted and kept.line is as_stored and parsed.bytes == len(as_stored.raw)


def test_a_duplicate_not_inserted_leaves_the_inserted_line_kept() -> None:
    parsed = ParsedLines()
    first = _line("a", 1, 1, b'{"id":"x"}')
    parsed.add([first], _stored(first))
    assert parsed.add([_line("a", 1, 1, b'{"id":"other"}')]) == []
    assert parsed.known[("a", 1, 1)].line is first and parsed.known[("a", 1, 1)].inserted


def test_a_duplicate_not_inserted_is_kept_as_received_but_not_as_inserted() -> None:
    parsed = ParsedLines()
    line = _line("a", 1, 1)
    parsed.add([line])
    assert not parsed.known[("a", 1, 1)].inserted


def test_dropped_claims_leave_nothing_known() -> None:
    parsed = ParsedLines()
    line = _line("a", 1, 1)
    claimed = parsed.add([line, _line("b", 1, 1)], _stored(line))
    parsed.drop(claimed)
    assert set(parsed.known) == {("b", 1, 1)} and parsed.bytes == len(line.raw)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [(b'{"id":"m","content":"x"}', True), (b'{"id":"m","n":NaN}', False), (b"not json", False)],
)
def test_known_lines_carry_the_clean_verdict(raw: bytes, clean: bool) -> None:
    assert known_line(_line("a", 1, 1, raw)).clean is clean


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (b'{"content":"plain text","n":1.5e10}', True),
        (b'{"content":"nul \\u0000"}', False),
        (b'{"result":"{\\"x\\":\\"\\\\u0000\\"}"}', False),  # NUL nested in a payload string
        (b'{"content":"\\ud800"}', False),
        (b'{"n":NaN}', False),
        (b'{"n":1e999}', False),  # overflows to inf
        (b'{"r":"[\\n-1.5E+400]"}', False),  # in nested JSON, after an escaped newline
        (b'{"id":"0b5e123-4430"}', True),  # an id, not a number
        (b'{"n":-5E308}', False),  # upper case, after a sign
        (b'{"n":[1,2E-400]}', False),
        (b'{"n":1.5e99,"m":"x9e999y"}', True),  # two-digit exponent; in a word, no number
        (b'{"id":"\\u00e9"}', True),  # an escape that is neither NUL nor a surrogate
        (b'{"n":1' + b"0" * 400 + b".5}", False),  # no exponent, yet inf to json.loads
        (b'{"r":"{\\"v\\":-1' + b"0" * 400 + b'e0}"}', False),  # the same, nested
        (b'{"n":123456789012345678901}', True),  # beyond 64 bits: stored exactly
        (b'{"n":2' + b"0" * 209 + b"e99}", False),  # 2e308: inf, with a two-digit exponent
        (b'{"n":1e+400}', False),  # an explicit plus sign
        (b'{"id":"ab12e+345","t":"x00e-300"}', True),  # marks, no number
    ],
)
def test_storable_as_parsed_flags_what_cleaning_would_change(raw: bytes, clean: bool) -> None:
    assert storable_as_parsed(raw) is clean


def test_storable_row_of_a_clean_parse_still_applies_the_integer_rule() -> None:
    row = {"total_rows": 2**40, "rows": [[1, "a"]], "content": "x"}
    assert storable_row(row, parsed_clean=True) == {
        "total_rows": None,
        "rows": [[1, "a"]],
        "content": "x",
    }
    assert storable_row(row, parsed_clean=True) == storable_row(row)


@pytest.mark.parametrize(
    "value",
    [
        {"rows": [[1, "é", 2.5, None, True]], "nested": {"a": []}},
        {"big": 2**70},  # beyond orjson's 64 bits: json.dumps writes it
        {1: "a"},  # a key that is not a string: json.dumps writes it as "1"
        [1, 2],
    ],
)
def test_jsonb_text_writes_what_json_dumps_would_mean(value: object) -> None:
    import json

    from pipeline.archive.derived import jsonb_text

    assert json.loads(jsonb_text(value)) == json.loads(json.dumps(value))


def _inserted(*lines: LineEnvelope) -> dict[tuple[str, int, int], KnownLine]:
    return {(x.job_id, x.attempt, x.line_no): known_line(x, inserted=True) for x in lines}


def test_inserted_lines_fold_in_line_order_and_leave_the_kept_lines() -> None:
    parsed = ParsedLines()
    lines = [_line("a", 1, n, b'{"id":"m","isDelta":true,"content":"%d"}' % n) for n in (1, 2, 4)]
    parsed.add(lines, _inserted(*lines))
    parsed.fold([("a", 1)])
    folded = parsed.folds[("a", 1)]
    assert folded.count == 2 and set(parsed.known) == {("a", 1, 4)}  # 3 is missing: a gap
    assert parsed.folded_bytes == len(lines[0].raw) + len(lines[1].raw)
    third = _line("a", 1, 3, b'{"id":"m","isDelta":true,"content":"3"}')
    parsed.add([third], _inserted(third))
    parsed.fold([("a", 1)])
    assert folded.count == 4 and not parsed.known and parsed.bytes == 0
    (message,) = folded.fold.transcript().messages
    assert message.content == "1234"


def test_a_line_the_writer_did_not_insert_stops_the_fold() -> None:
    parsed = ParsedLines()
    first, second, third = (_line("a", 1, n) for n in (1, 2, 3))
    parsed.add([first, second, third], _inserted(first, third))
    parsed.fold([("a", 1)])
    assert parsed.folds[("a", 1)].count == 1
    assert set(parsed.known) == {("a", 1, 2), ("a", 1, 3)}


def test_no_fold_starts_without_an_inserted_first_line() -> None:
    parsed = ParsedLines()
    lines = [_line("a", 1, n) for n in (1, 2)]
    parsed.add(lines, _inserted(lines[1]))
    parsed.fold([("a", 1)])
    assert not parsed.folds and len(parsed.known) == 2


def test_a_duplicate_of_a_folded_line_is_not_kept_and_a_second_insertion_ends_the_fold() -> None:
    parsed = ParsedLines()
    first = _line("a", 1, 1)
    parsed.add([first], _inserted(first))
    parsed.fold([("a", 1)])
    assert parsed.add([_line("a", 1, 1, b'{"id":"other"}')]) == []
    assert not parsed.known and parsed.folds[("a", 1)].count == 1
    again = _line("a", 1, 1, b'{"id":"again"}')
    assert parsed.add([again], _inserted(again)) == [("a", 1, 1)]
    assert not parsed.folds and parsed.folded_bytes == 0
    assert parsed.known[("a", 1, 1)].line is again


def test_dropped_claims_drop_the_fold_they_went_into() -> None:
    parsed = ParsedLines()
    lines = [_line("a", 1, n) for n in (1, 2)]
    claimed = parsed.add(lines, _inserted(*lines))
    parsed.fold([("a", 1)])
    parsed.drop(claimed)
    assert not parsed.folds and parsed.folded_bytes == 0 and not parsed.known


def test_folds_stay_within_their_byte_budget_oldest_first() -> None:
    parsed = ParsedLines(max_folded_bytes=25)
    lines = [_line(job, 1, 1, b'{"id":"%s"}' % job.encode()) for job in ("a", "b", "c")]  # 10 B
    for line in lines:
        parsed.add([line], _inserted(line))
        parsed.fold([(line.job_id, 1)])
    assert list(parsed.folds) == [("b", 1), ("c", 1)] and parsed.folded_bytes == 20


def test_a_fold_notes_the_redaction_marks_and_whether_every_line_was_clean() -> None:
    parsed = ParsedLines()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    plain, marked = _line("a", 1, 1), _line("a", 1, 2, b'{"id":"m","content":"\\u0000"}')
    stored = _inserted(plain) | {
        ("a", 1, 2): known_line(marked, inserted=True, redaction="redacted", redacted_at=at)
    }
    parsed.add([plain, marked], stored)
    parsed.fold([("a", 1)])
    folded = parsed.folds[("a", 1)]
    assert folded.marks == {(2, "redacted", at)}
    assert folded.clean is False  # the NUL escape needs cleaning to be stored
    parsed.forget([("a", 1)])
    assert not parsed.folds and parsed.folded_bytes == 0
