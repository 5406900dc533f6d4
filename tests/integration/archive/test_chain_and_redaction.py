"""Hash chains and redaction in the archive writer, against a real PostgreSQL (fresh schema)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline.archive import chain
from pipeline.archive import derived as archive_derived
from pipeline.archive.chain import verify
from pipeline.archive.redaction import Redactor
from pipeline.archive.writer import ArchiveWriter
from pipeline.errors import ArchiveUnavailableError
from pipeline.settings import Settings
from tests.integration.archive.archive_records import (
    T0,
    apply_retention,
    envelopes,
    opening_events,
    raw,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]


TRANSCRIPT = [
    raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "c1"}),
    raw(id="u1", role="user", content="Mail ann@corp.io the count"),
    raw(id="f1", role="assistant", content="Sent to ann@corp.io: 42.", graphPath=["final"]),
    raw(id=wire.ID_USAGE, usage={"totalTokens": 3}),
]


def _lines(job_id: str) -> list[LineEnvelope]:
    return envelopes(job_id, TRANSCRIPT)


def _events(job_id: str) -> list[JobEvent]:
    completed = JobEvent(
        job_id=job_id, run_id="r1", kind="completed", attempt=1, line_count=len(TRANSCRIPT), at=T0
    )
    return [*opening_events(job_id), completed]


def _verify(engine: sa.Engine, settings: Settings, job_id: str) -> Any:
    with engine.connect() as conn:
        return verify(conn, job_id=job_id)


def test_lines_arriving_out_of_order_across_batches_end_fully_chained(
    engine: sa.Engine, settings: Settings
) -> None:
    writer = ArchiveWriter(engine)
    lines = _lines("j-gap")
    writer.write_batch([lines[3], lines[1]], _events("j-gap"))  # 4 and 2: 2 waits for 1
    writer.write_batch([lines[0]], [])  # 1 arrives: 1 and 2 chain, 4 still waits for 3
    early = _verify(engine, settings, "j-gap")  # complete (line_count 4): line 4 must be hashed
    assert early.unchained == 0 and [p.kind for p in early.problems] == ["missing", "unhashed"]
    writer.write_batch([lines[2], lines[2]], [])  # 3 (twice): 3 and 4 chain
    report = _verify(engine, settings, "j-gap")
    assert report.ok and report.lines == 4 and report.unchained == 0


def test_redaction_before_storage_keeps_the_hash_of_the_original(
    engine: sa.Engine, settings: Settings
) -> None:
    redactor = Redactor.build(detectors=["email"])
    writer = ArchiveWriter(engine, redactor=redactor)
    writer.write_batch(_lines("j-red"), _events("j-red"))
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text(
                f'SELECT line_no, raw, redaction FROM "{settings.database_schema}".stream_lines'
                " WHERE job_id = 'j-red' ORDER BY line_no"
            )
        ).all()
        answer = conn.execute(
            sa.text(f'SELECT content FROM "{settings.database_schema}".answers WHERE job_id = :j'),
            {"j": "j-red"},
        ).scalar()
    assert [r.redaction for r in stored] == [None, "redacted", "redacted", None]
    assert all(b"ann@corp.io" not in bytes(r.raw) for r in stored)
    assert answer == "Sent to [REDACTED:email]: 42."
    report = _verify(engine, settings, "j-red")
    assert report.ok and report.redacted == 2


def test_retention_redact_rewrites_old_content_and_verify_still_passes(
    engine: sa.Engine, settings: Settings
) -> None:
    writer = ArchiveWriter(engine)
    writer.write_batch(_lines("j-old"), _events("j-old"))
    outcome = apply_retention(engine)
    assert (outcome.redacted_jobs, outcome.lines_changed) == (1, 2)
    with engine.connect() as conn:
        schema = settings.database_schema
        question = conn.execute(
            sa.text(f'SELECT question FROM "{schema}".jobs WHERE job_id = :j'), {"j": "j-old"}
        ).scalar()
        answer = conn.execute(
            sa.text(f'SELECT content FROM "{schema}".answers WHERE job_id = :j'), {"j": "j-old"}
        ).scalar()
    assert question == "Mail [REDACTED:email] the count"
    assert answer == "Sent to [REDACTED:email]: 42."
    assert _verify(engine, settings, "j-old").ok


LONG = [raw(id="f1", role="assistant", content=f"part {n} ", isDelta=True) for n in range(6)]


def test_a_writer_that_knows_a_head_reads_no_head_and_the_chain_verifies(
    engine: sa.Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed: list[set[tuple[str, int]]] = []
    real = chain.read_heads

    def spy(conn: sa.Connection, pairs: Any) -> Any:
        probed.append(set(pairs))
        return real(conn, pairs)

    monkeypatch.setattr(chain, "read_heads", spy)
    writer = ArchiveWriter(engine)
    lines = envelopes("j-known", LONG)
    writer.write_batch(lines[:2], opening_events("j-known"))
    writer.write_batch(lines[2:4], [])
    writer.write_batch(lines[4:], [])
    assert probed == [{("j-known", 1)}, set(), set()]
    report = _verify(engine, settings, "j-known")
    assert report.ok and report.lines == 6 and report.unchained == 0


def test_two_sinks_taking_turns_on_one_attempt_still_chain_every_line(
    engine: sa.Engine, settings: Settings
) -> None:
    """Sink A's known head falls behind what sink B chained; A's next lines wait, then link."""
    first, second = ArchiveWriter(engine), ArchiveWriter(engine)
    lines = envelopes("j-turns", LONG)
    first.write_batch(lines[:2], opening_events("j-turns"))
    second.write_batch(lines[2:4], [])
    first.write_batch(lines[4:5], [])  # A knows head 2; line 5 follows B's head 4
    first.write_batch(lines[5:], [])
    report = _verify(engine, settings, "j-turns")
    assert report.ok and report.lines == 6 and report.unchained == 0


def test_a_rolled_back_batch_teaches_no_head(
    engine: sa.Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ArchiveWriter(engine)
    lines = envelopes("j-undo", LONG)
    writer.write_batch(lines[:2], opening_events("j-undo"))
    real = archive_derived.normalise_ready

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise ArchiveUnavailableError("connection lost mid-batch")

    monkeypatch.setattr(archive_derived, "normalise_ready", failing)
    with pytest.raises(ArchiveUnavailableError):
        writer.write_batch(lines[2:4], [])  # rolled back: lines 3-4 were never stored
    monkeypatch.setattr(archive_derived, "normalise_ready", real)
    writer.write_batch(lines[4:], [])  # 5-6 must wait for 3-4, not chain after a head of 4
    early = _verify(engine, settings, "j-undo")
    assert early.unchained == 2
    writer.write_batch(lines[2:4], [])
    report = _verify(engine, settings, "j-undo")
    assert report.ok and report.lines == 6 and report.unchained == 0
