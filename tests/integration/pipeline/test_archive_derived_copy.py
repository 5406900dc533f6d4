"""Derived rows written with COPY (pipeline.archive.derived) against real PostgreSQL.

Values round-trip, and a refused attempt is skipped while the rest of the batch is normalised.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from models.records import JobEvent, LineEnvelope
from pipeline.archive import derived as archive_derived
from pipeline.archive.writer import ArchiveWriter
from pipeline.settings import Settings
from pipeline.transcript import normalise as transcript_module
from pipeline.transcript.normalise import Fold, Transcript

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("archive_schema")]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOOLS = ["svc_data_analyst_agent", "tools"]
RESULT = {"cubes": [{"name": "flights_view", "note": "ünïcode \u2603", "n": 1.5}], "ok": True}


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _attempt(job_id: str) -> tuple[list[LineEnvelope], JobEvent]:
    call = {"name": "svcMeta", "input": json.dumps({"searchQuery": "flights"})}
    raws = [
        _raw(id="u1", role="user", content="Which views?", sort=1),
        _raw(id="t1", role="assistant", graphPath=TOOLS, isInProcess=True, toolCall=call),
        _raw(
            id="t1",
            role="assistant",
            graphPath=TOOLS,
            isInProcess=False,
            toolCall={**call, "result": json.dumps(RESULT)},
        ),
        _raw(id="f1", role="assistant", content="flights_view.", graphPath=["final"]),
    ]
    lines = [
        LineEnvelope.from_raw(
            job_id=job_id, attempt=1, line_no=n, raw=raw, received_at=T0 + timedelta(seconds=n)
        )
        for n, raw in enumerate(raws, start=1)
    ]
    done = JobEvent(
        job_id=job_id, run_id="run-1", kind="completed", attempt=1, line_count=len(lines)
    )
    return lines, done


def _rows(engine: sa.Engine, sql: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql)))


def test_derived_rows_copied_keep_their_values(engine: sa.Engine, settings: Settings) -> None:
    writer = ArchiveWriter(engine)
    lines, done = _attempt("j-copy")
    outcome = writer.write_batch(lines, [done])
    assert outcome.normalised == (("j-copy", 1),)
    (call,) = _rows(engine, "SELECT name, kind, input, result, complete FROM tool_calls")
    assert (call.name, call.kind, call.complete) == ("svcMeta", "meta", True)
    assert call.input == {"searchQuery": "flights"} and call.result == RESULT
    messages = _rows(engine, "SELECT message_id, graph_path, sort, extra FROM messages")
    by_id = {m.message_id: m for m in messages}
    assert by_id["t1"].graph_path == TOOLS and by_id["u1"].sort == 1.0
    assert all(isinstance(m.extra, dict) for m in messages)
    (answer,) = _rows(engine, "SELECT content, source, stream_errors, normalised_at FROM answers")
    assert (answer.content, answer.source, answer.stream_errors) == ("flights_view.", "final", [])
    assert answer.normalised_at is not None  # the column default, not given by the COPY


def _bogus(transcript: Transcript) -> Transcript:
    if transcript.job_id != "j-bad":
        return transcript
    answer = dataclasses.replace(transcript.answer, source="bogus")  # type: ignore[arg-type]
    return dataclasses.replace(transcript, answer=answer)  # breaks ck_answers_source


@pytest.mark.parametrize("folded", [True, False], ids=["folded", "read-back"])
def test_refused_attempt_is_skipped_and_the_others_are_normalised(
    engine: sa.Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, folded: bool
) -> None:
    """A transcript comes from the writer's fold, or from lines read back.

    Read back: the terminal events reach a writer that saw none of the lines.
    """
    real_fold, real_normalise = Fold.transcript, transcript_module.normalise

    def breaking_fold(fold: Fold) -> Transcript:
        return _bogus(real_fold(fold))

    def breaking_normalise(
        lines: Sequence[LineEnvelope], *, job_id: str | None = None, attempt: int | None = None
    ) -> Transcript:
        return _bogus(real_normalise(lines, job_id=job_id, attempt=attempt))

    monkeypatch.setattr(Fold, "transcript", breaking_fold)
    monkeypatch.setattr(archive_derived, "normalise", breaking_normalise)
    good, good_done = _attempt("j-good")
    bad, bad_done = _attempt("j-bad")
    if folded:
        outcome = ArchiveWriter(engine).write_batch([*good, *bad], [good_done, bad_done])
        assert outcome.lines_inserted == len(good) + len(bad)  # raw lines kept either way
    else:
        ArchiveWriter(engine).write_batch([*good, *bad], [])
        outcome = ArchiveWriter(engine).write_batch([], [good_done, bad_done])
    assert outcome.normalised == (("j-good", 1),)
    for table in ("messages", "tool_calls", "answers"):
        assert {r.job_id for r in _rows(engine, f"SELECT job_id FROM {table}")} == {"j-good"}


def test_a_refusal_before_every_attempt_is_normalised_still_retries_each_attempt(
    engine: sa.Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's rows are written while its attempts are normalised (``tool_calls`` first).

    A refusal that comes after the first attempt only leaves the others to be normalised for
    the one-by-one retry.
    """
    real = archive_derived.replace_rows
    calls: list[list[tuple[str, int]]] = []

    def refusing(
        conn: sa.Connection,
        keys: Sequence[tuple[str, int]],
        transcripts: Iterable[Transcript],
        *,
        clean: Collection[tuple[str, int]] = (),
    ) -> None:
        calls.append(list(keys))
        if len(calls) == 1:
            next(iter(transcripts))  # the first attempt normalised, the others not yet
            raise psycopg.errors.CheckViolation("refused while streaming")
        real(conn, keys, transcripts, clean=clean)

    monkeypatch.setattr(archive_derived, "replace_rows", refusing)
    writer = ArchiveWriter(engine)
    attempts = [_attempt(f"j-{n}") for n in range(3)]
    lines = [line for batch, _ in attempts for line in batch]
    outcome = writer.write_batch(lines, [done for _, done in attempts])
    pairs = [(f"j-{n}", 1) for n in range(3)]
    assert outcome.normalised == tuple(pairs)
    assert calls == [pairs, *([pair] for pair in pairs)]
    assert {r.job_id for r in _rows(engine, "SELECT job_id FROM answers")} == {"j-0", "j-1", "j-2"}
