"""Normalising from the lines the writer inserted (pipeline.archive.derived, "Attempts folded").

Against a real PostgreSQL, in a fresh schema per test. An attempt all of whose lines the writer
inserted itself is normalised without reading them back; every other attempt is read back, so
the derived rows always follow the lines as stored: a line stored earlier with other bytes, a
line redacted on the way in or by retention afterwards, a batch rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa

from bench.transcripts import load_transcripts
from models import wire
from models.records import JobEvent
from pipeline.archive import derived
from pipeline.archive.attempt_state import AttemptState
from pipeline.archive.parsed import ParsedLines
from pipeline.archive.redaction import Redactor
from pipeline.archive.writer import ArchiveWriter
from tests.integration.archive.archive_records import (
    T0,
    apply_retention,
    envelopes,
    opening_events,
    raw,
)
from tests.integration.archive.archive_stack import HOSTED_DIR

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

Targets = Sequence[tuple[str, int, int]]


@pytest.fixture
def read_back(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The attempts whose lines normalising read back from ``stream_lines``."""
    attempts: list[tuple[str, int]] = []
    real = derived.read_lines

    def spy(conn: sa.Connection, targets: Targets, known: Any) -> Any:
        attempts.extend((job_id, attempt) for job_id, attempt, _ in targets)
        return real(conn, targets, known)

    monkeypatch.setattr(derived, "read_lines", spy)
    return attempts


def _transcript(answer: str) -> list[bytes]:
    return [
        raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "c1"}),
        raw(id="u1", role="user", content="Mail ann@corp.io the count"),
        raw(id="f1", role="assistant", content=answer, graphPath=["final"], isDelta=True),
        raw(id="f1", role="assistant", content=" (42).", graphPath=["final"], isDelta=True),
        raw(id=wire.ID_USAGE, usage={"totalTokens": 3}),
    ]


def _completed(job_id: str, line_count: int) -> JobEvent:
    return JobEvent(
        job_id=job_id, run_id="r1", kind="completed", attempt=1, line_count=line_count, at=T0
    )


def _answer(engine: sa.Engine, job_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT content, source FROM answers WHERE job_id = :j"), {"j": job_id}
        ).one()


def _messages(engine: sa.Engine, job_id: str) -> dict[str, str | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT message_id, content FROM messages WHERE job_id = :j"), {"j": job_id}
        )
        return {r.message_id: r.content for r in rows}


def test_an_attempt_the_writer_inserted_is_normalised_without_reading_it_back(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    writer = ArchiveWriter(engine)
    lines = envelopes("j-held", _transcript("Sent"))
    writer.write_batch(lines[:2], opening_events("j-held"))
    writer.write_batch(lines[2:], [])
    outcome = writer.write_batch([], [_completed("j-held", len(lines))])
    assert outcome.normalised == (("j-held", 1),)
    assert read_back == []
    assert tuple(_answer(engine, "j-held")) == ("Sent (42).", "final")
    assert len(_messages(engine, "j-held")) == 4


def test_lines_arriving_out_of_order_across_batches_are_folded_without_reading_back(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """Line 4 waits, kept, until line 3 arrives; then both go into the attempt's fold."""
    writer = ArchiveWriter(engine)
    lines = envelopes("j-order", _transcript("Sent"))
    writer.write_batch([lines[3], lines[0], lines[1]], opening_events("j-order"))
    writer.write_batch([lines[4], lines[2]], [_completed("j-order", len(lines))])
    assert read_back == []
    assert tuple(_answer(engine, "j-order")) == ("Sent (42).", "final")
    assert _messages(engine, "j-order")["f1"] == "Sent (42)."


def test_an_attempt_whose_fold_left_the_budget_is_read_back(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    every_fold_dropped = AttemptState(parsed=ParsedLines(max_folded_bytes=1))
    writer = ArchiveWriter(engine, state=every_fold_dropped)
    lines = envelopes("j-budget", _transcript("Sent"))
    writer.write_batch(lines[:2], opening_events("j-budget"))
    outcome = writer.write_batch(lines[2:], [_completed("j-budget", len(lines))])
    assert outcome.normalised == (("j-budget", 1),)
    assert read_back == [("j-budget", 1)]
    assert tuple(_answer(engine, "j-budget")) == ("Sent (42).", "final")


def test_a_redelivered_line_keeps_the_attempt_held(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """A duplicate absorbed by ``ON CONFLICT`` (the staging path) leaves the stored row ours."""
    writer = ArchiveWriter(engine)
    lines = envelopes("j-again", _transcript("Sent"))
    writer.write_batch(lines[:3], opening_events("j-again"))
    outcome = writer.write_batch(lines[1:], [_completed("j-again", len(lines))])
    assert outcome.lines_inserted == 2 and outcome.normalised == (("j-again", 1),)
    assert read_back == []
    assert _answer(engine, "j-again").content == "Sent (42)."


def test_a_line_stored_earlier_with_other_bytes_is_normalised_as_stored(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """Another sink (or a replay) stored line 3 first; this writer's line 3 went nowhere."""
    earlier = envelopes("j-other", _transcript("Stored first"))
    ours = envelopes("j-other", _transcript("Received later"))
    ArchiveWriter(engine).write_batch(earlier[2:3], opening_events("j-other"))
    writer = ArchiveWriter(engine)
    outcome = writer.write_batch(ours, [_completed("j-other", len(ours))])
    assert outcome.lines_inserted == len(ours) - 1 and outcome.normalised == (("j-other", 1),)
    assert read_back == [("j-other", 1)]
    assert _answer(engine, "j-other").content == "Stored first (42)."


def test_a_key_twice_in_one_batch_is_read_back(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """Which of the two went in is not tracked: the stored one decides."""
    first = envelopes("j-twice", _transcript("First copy"))
    second = envelopes("j-twice", _transcript("Second copy"))
    writer = ArchiveWriter(engine)
    batch = [*first, second[2]]
    outcome = writer.write_batch(batch, [*opening_events("j-twice"), _completed("j-twice", 5)])
    assert outcome.lines_inserted == 5 and outcome.normalised == (("j-twice", 1),)
    assert read_back == [("j-twice", 1)]
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT raw FROM stream_lines WHERE job_id = 'j-twice' AND line_no = 3")
        ).scalar_one()
    expected = "First copy" if bytes(stored) == first[2].raw else "Second copy"
    assert _answer(engine, "j-twice").content == f"{expected} (42)."


def test_lines_redacted_on_the_way_in_are_held_as_stored(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    writer = ArchiveWriter(engine, redactor=Redactor.build(detectors=["email"]))
    lines = envelopes("j-red", _transcript("Sent to ann@corp.io"))
    writer.write_batch(lines, opening_events("j-red"))
    outcome = writer.write_batch([], [_completed("j-red", len(lines))])
    assert outcome.normalised == (("j-red", 1),)
    assert read_back == []
    assert _answer(engine, "j-red").content == "Sent to [REDACTED:email] (42)."
    assert _messages(engine, "j-red")["u1"] == "Mail [REDACTED:email] the count"


@pytest.mark.parametrize("action", ["redact", "delete"])
def test_lines_retention_rewrote_after_they_were_written_are_read_back(
    engine: sa.Engine, read_back: list[tuple[str, int]], action: str
) -> None:
    """``retention apply`` ran between the lines and the terminal event.

    The sink redacted line 3 on the way in (its mark must still match); retention then redacts
    the unmarked line 2 (``redact``) or empties every line (``delete``).
    """
    writer = ArchiveWriter(engine, redactor=Redactor.build(detectors=["ipv4"]))
    lines = envelopes("j-ret", _transcript("Sent from 10.0.0.1"))
    writer.write_batch(lines, opening_events("j-ret"))
    apply_retention(engine, action)
    outcome = writer.write_batch([], [_completed("j-ret", len(lines))])
    assert outcome.normalised == (("j-ret", 1),)
    assert read_back == [("j-ret", 1)]
    if action == "redact":
        assert _messages(engine, "j-ret")["u1"] == "Mail [REDACTED:email] the count"
        assert _answer(engine, "j-ret").content == "Sent from [REDACTED:ipv4] (42)."
    else:
        assert _messages(engine, "j-ret") == {}
        assert _answer(engine, "j-ret").source == "none"


def test_an_attempt_with_only_its_own_marks_stays_held(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """Retention ran but changed nothing of the attempt: its marks are the sink's own."""
    writer = ArchiveWriter(engine, redactor=Redactor.build(detectors=["email"]))
    lines = envelopes("j-same", _transcript("Sent to ann@corp.io"))
    writer.write_batch(lines, opening_events("j-same"))
    outcome = apply_retention(engine)
    assert outcome.lines_changed == 0
    writer.write_batch([], [_completed("j-same", len(lines))])
    assert read_back == []
    assert _answer(engine, "j-same").content == "Sent to [REDACTED:email] (42)."


def test_lines_of_a_rolled_back_batch_are_not_held(
    engine: sa.Engine, read_back: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's insert was rolled back; another sink stored the lines with other bytes."""
    ours = envelopes("j-rolled", _transcript("Rolled back"))
    theirs = envelopes("j-rolled", _transcript("Committed"))
    writer = ArchiveWriter(engine)
    real = derived.normalise_ready

    def failing(*args: Any, **kwargs: Any) -> list[tuple[str, int]]:
        raise RuntimeError("the batch fails after its lines were written")

    monkeypatch.setattr(derived, "normalise_ready", failing)
    with pytest.raises(RuntimeError):
        writer.write_batch(ours, opening_events("j-rolled"))
    monkeypatch.setattr(derived, "normalise_ready", real)
    ArchiveWriter(engine).write_batch(theirs, opening_events("j-rolled"))
    outcome = writer.write_batch([], [_completed("j-rolled", len(ours))])
    assert outcome.normalised == (("j-rolled", 1),)
    assert read_back == [("j-rolled", 1)]
    assert _answer(engine, "j-rolled").content == "Committed (42)."


DERIVED = {
    "messages": "SELECT job_id, message_id, role, content, thinking, is_final, first_line,"
    " last_line, tool_name, extra::text FROM messages ORDER BY 1, 2",
    "tool_calls": "SELECT job_id, message_id, name, kind, input::text, result::text, error,"
    " payload_error, complete FROM tool_calls ORDER BY 1, 2",
    "sql_queries": "SELECT job_id, message_id, sql_query, views, members, total_rows,"
    " returned_rows, rows::text FROM sql_queries ORDER BY 1, 2",
    "answers": "SELECT job_id, chat_id, content, source, message_id, line_no, stream_errors"
    " FROM answers ORDER BY 1",
}


def _derived(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {t: [tuple(r) for r in conn.execute(sa.text(q))] for t, q in DERIVED.items()}


def test_recorded_transcripts_folded_in_thin_batches_equal_their_lines_read_back(
    engine: sa.Engine, read_back: list[tuple[str, int]]
) -> None:
    """The folds' rows are the rows ``renormalise`` makes from the stored lines.

    Every recorded transcript (tool calls, SQL, sentinels, deltas) and every hand-made hosted
    one (error lines, unparsable lines, aborts, out-of-order ids), one or two lines per job per
    batch, as many open streams give them.
    """
    raws = [list(t.lines) for t in load_transcripts()]
    raws += [p.read_bytes().splitlines() for p in sorted(HOSTED_DIR.glob("*.ndjson"))]
    jobs = {f"j-rec-{n}": envelopes(f"j-rec-{n}", lines) for n, lines in enumerate(raws)}
    writer = ArchiveWriter(engine)
    writer.write_batch([], [e for job_id in jobs for e in opening_events(job_id)])
    longest = max(len(lines) for lines in jobs.values())
    for start in range(0, longest, 2):
        writer.write_batch([x for lines in jobs.values() for x in lines[start : start + 2]], [])
    ends = [_completed(job_id, len(lines)) for job_id, lines in jobs.items()]
    outcome = writer.write_batch([], ends)
    assert len(outcome.normalised) == len(jobs) and read_back == []
    folded = _derived(engine)
    assert len(folded["sql_queries"]) > 0 and len(folded["tool_calls"]) > 0
    assert all(writer.renormalise(job_id, 1) for job_id in jobs)
    assert _derived(engine) == folded


def test_a_float_literal_too_long_for_a_float_beside_a_huge_integer_is_stored_as_null(
    engine: sa.Engine,
) -> None:
    """``1`` and 400 zeros then ``.5`` is ``inf`` to ``json.loads``, and no exponent flags it.

    Beside an integer beyond 64 bits, the result is written with ``json.dumps`` (orjson refuses
    such integers), which writes ``Infinity``; ``jsonb`` refused it and the attempt's derived
    rows were not stored, until a run of 100 digits made the line unclean (cleaning: null).
    """
    huge = 123456789012345678901234567890
    result = '{"data":[{"v":1' + "0" * 400 + '.5,"w":' + str(huge) + "}]}"
    call = raw(
        id="t1",
        role="assistant",
        toolCall={"name": "cubeSqlApi", "input": '{"sqlQuery":"SELECT 1"}', "result": result},
    )
    lines = envelopes("j-inf", [*_transcript("Sent")[:2], call, *_transcript("Sent")[2:]])
    writer = ArchiveWriter(engine)
    writer.write_batch(lines, opening_events("j-inf"))
    outcome = writer.write_batch([], [_completed("j-inf", len(lines))])
    assert outcome.normalised == (("j-inf", 1),)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT result FROM tool_calls WHERE job_id = 'j-inf'"))
        assert stored.scalar_one() == {"data": [{"v": None, "w": huge}]}
