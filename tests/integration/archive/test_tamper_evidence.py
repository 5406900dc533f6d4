"""``chatscribe verify`` against someone with write access to the archive (issue 24, class 1).

Each attack edits a complete, archived job the way a database user could; ``verify`` must
report it. The job is a hosted transcript with a SQL tool call (``tests/data/hosted``), written
by the real :class:`ArchiveWriter` into a fresh schema of a real PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from models.records import JobEvent, LineEnvelope
from pipeline.archive import chain, seals
from pipeline.archive.chain import verify
from pipeline.archive.writer import ArchiveWriter
from pipeline.errors import ArchiveRejectedError
from tests.integration.archive.archive_records import (
    T0,
    apply_retention,
    envelopes,
    opening_events,
)
from tests.integration.archive.archive_stack import HOSTED_DIR

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

JOB = "j-tamper"
TRANSCRIPT = (HOSTED_DIR / "cube_tools.ndjson").read_bytes().splitlines()


def _lines() -> list[LineEnvelope]:
    return envelopes(JOB, TRANSCRIPT)


def _events() -> list[JobEvent]:
    completed = JobEvent(
        job_id=JOB, run_id="r1", kind="completed", attempt=1, line_count=len(TRANSCRIPT), at=T0
    )
    return [*opening_events(JOB), completed]


def _archive(engine: sa.Engine, anchor: seals.Anchor | None = None) -> None:
    ArchiveWriter(engine, anchor=anchor).write_batch(_lines(), _events())


def _run(engine: sa.Engine, statement: str, **params: Any) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(statement), params)


def _report(engine: sa.Engine, anchor: seals.Anchor | None = None) -> chain.VerifyReport:
    with engine.connect() as conn:
        return chain.verify(conn, job_id=JOB, anchor=anchor)


def _kinds(report: chain.VerifyReport) -> set[str]:
    return {p.kind for p in report.problems}


def _raw_marked_redacted(engine: sa.Engine) -> None:
    _run(
        engine,
        "UPDATE stream_lines SET raw = CAST(:raw AS bytea), redaction = 'redacted'"
        " WHERE job_id = :j AND line_no = 2",
        raw=b'{"id":"x","content":"forged"}',
        j=JOB,
    )


def _raw_with_hashes_nulled(engine: sa.Engine) -> None:
    _run(
        engine,
        "UPDATE stream_lines SET raw = CAST(:raw AS bytea), raw_sha256 = NULL, chain_hash = NULL"
        " WHERE job_id = :j AND line_no = 2",
        raw=b'{"id":"x","content":"forged"}',
        j=JOB,
    )


def _line_appended(engine: sa.Engine) -> None:
    _run(
        engine,
        "INSERT INTO stream_lines (job_id, attempt, line_no, received_at, raw, terminated,"
        " partition_at) SELECT job_id, attempt, line_no + 1, received_at, CAST(:raw AS bytea),"
        " true, partition_at FROM stream_lines WHERE job_id = :j"
        " ORDER BY line_no DESC LIMIT 1",
        raw=b'{"id":"f9","role":"assistant","content":"forged","graphPath":["final"]}',
        j=JOB,
    )


def _answer_changed(engine: sa.Engine) -> None:
    _run(engine, "UPDATE answers SET content = 'forged' WHERE job_id = :j", j=JOB)


def _message_changed(engine: sa.Engine) -> None:
    _run(engine, "UPDATE messages SET content = 'forged' WHERE job_id = :j", j=JOB)


def _sql_changed(engine: sa.Engine) -> None:
    _run(engine, "UPDATE sql_queries SET sql_query = 'SELECT 1' WHERE job_id = :j", j=JOB)


def _tool_call_changed(engine: sa.Engine) -> None:
    _run(engine, "UPDATE tool_calls SET result = '{\"rows\": []}' WHERE job_id = :j", j=JOB)


def _identity_changed(engine: sa.Engine) -> None:
    _run(
        engine,
        "UPDATE jobs SET identity = 'bob', session_settings = '{\"externalId\": \"bob\"}'"
        " WHERE job_id = :j",
        j=JOB,
    )


def _question_changed(engine: sa.Engine) -> None:
    _run(engine, "UPDATE jobs SET question = 'another question' WHERE job_id = :j", j=JOB)


ATTACKS: dict[str, Callable[[sa.Engine], None]] = {
    "raw changed and marked redacted": _raw_marked_redacted,
    "raw changed, raw_sha256 and chain_hash NULL": _raw_with_hashes_nulled,
    "forged line appended without hashes": _line_appended,
    "answer text changed": _answer_changed,
    "message content changed": _message_changed,
    "SQL text changed": _sql_changed,
    "tool call result changed": _tool_call_changed,
    "who asked changed": _identity_changed,
    "question changed": _question_changed,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_verify_reports_each_edit_of_a_complete_job(engine: sa.Engine, attack: str) -> None:
    _archive(engine)
    with engine.connect() as conn:
        assert verify(conn, job_id=JOB).ok
        counts = conn.execute(
            sa.text("SELECT (SELECT count(*) FROM sql_queries), (SELECT count(*) FROM tool_calls)")
        ).one()
    assert counts == (1, 2)  # the transcript calls two tools, one of them SQL
    ATTACKS[attack](engine)
    with engine.connect() as conn:
        report = verify(conn, job_id=JOB)
    assert not report.ok, attack


def test_each_edit_is_named_per_job_and_part(engine: sa.Engine) -> None:
    _archive(engine)
    _raw_marked_redacted(engine)
    _answer_changed(engine)
    _identity_changed(engine)
    problems = {(p.job_id, p.line_no, p.kind) for p in _report(engine).problems}
    assert (JOB, 2, "redaction_changed") in problems
    assert (JOB, None, "job_changed") in problems
    assert (JOB, None, "derived_changed") in problems


def _rewrite_whole_chain(engine: sa.Engine) -> None:
    """Changes line 2 and recomputes every hash and the seal, as the archive's code would."""
    forged = b'{"id":"x","content":"forged"}'
    with engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT line_no, received_at, terminated, raw FROM stream_lines"
                " WHERE job_id = :j ORDER BY line_no"
            ),
            {"j": JOB},
        ).all()
        previous = chain.GENESIS
        for row in rows:
            raw = forged if row.line_no == 2 else bytes(row.raw)
            digest = chain.raw_sha256(raw)
            key = chain.line_key(JOB, 1, row.line_no, row.received_at, row.terminated)
            previous = chain.link(previous, key, digest)
            conn.execute(
                sa.text(
                    "UPDATE stream_lines SET raw = :raw, raw_sha256 = :d, chain_hash = :h"
                    " WHERE job_id = :j AND line_no = :n"
                ),
                {"raw": raw, "d": digest, "h": previous, "j": JOB, "n": row.line_no},
            )
        conn.execute(sa.text("UPDATE answers SET content = 'forged' WHERE job_id = :j"), {"j": JOB})
        seals.seal_attempts(conn, [(JOB, 1)], reason="normalised")


def test_a_chain_rewritten_consistently_inside_postgresql_is_caught_by_the_anchor(
    engine: sa.Engine, tmp_path: Path
) -> None:
    anchor = seals.Anchor(tmp_path / "anchor")
    _archive(engine, anchor)
    report = _report(engine, anchor)
    assert report.ok and (report.sealed, report.anchored) == (1, 1)
    _rewrite_whole_chain(engine)
    assert _report(engine).ok  # the database alone cannot tell
    assert _kinds(_report(engine, anchor)) == {"anchor_mismatch"}


def test_an_anchored_job_deleted_from_the_archive_is_reported(
    engine: sa.Engine, tmp_path: Path
) -> None:
    anchor = seals.Anchor(tmp_path / "anchor")
    _archive(engine, anchor)
    for table in ("stream_lines", "messages", "tool_calls", "sql_queries", "answers"):
        _run(engine, f"DELETE FROM {table} WHERE job_id = :j", j=JOB)
    _run(engine, "DELETE FROM attempt_seals WHERE job_id = :j", j=JOB)
    assert "seal_missing" in _kinds(_report(engine, anchor))


def test_retention_reseals_and_anchors_so_verify_still_passes(
    engine: sa.Engine, tmp_path: Path
) -> None:
    anchor = seals.Anchor(tmp_path / "anchor")
    _archive(engine, anchor)
    apply_retention(engine, "delete", anchor=anchor)
    report = _report(engine, anchor)
    assert report.ok and report.redacted == len(TRANSCRIPT) and report.anchored == 1
    _run(engine, "UPDATE answers SET content = 'restored' WHERE job_id = :j", j=JOB)
    assert "derived_changed" in _kinds(_report(engine, anchor))


def test_a_line_forged_for_a_completed_attempt_is_refused_not_merged(engine: sa.Engine) -> None:
    writer = ArchiveWriter(engine)
    writer.write_batch(_lines(), _events())
    forged = LineEnvelope.from_raw(
        job_id=JOB,
        attempt=1,
        line_no=len(TRANSCRIPT) + 1,
        raw=b'{"id":"f9","role":"assistant","content":"forged","graphPath":["final"]}',
        received_at=T0,
    )
    with pytest.raises(ArchiveRejectedError, match="after the attempt ended"):
        writer.write_batch([forged], [])
    changed = LineEnvelope.from_raw(
        job_id=JOB, attempt=1, line_no=2, raw=b'{"id":"x","content":"forged"}', received_at=T0
    )
    with pytest.raises(ArchiveRejectedError, match="differs from the line archived"):
        writer.write_batch([changed], [])
    writer.write_batch(_lines()[1:3], [])  # a redelivery of the same lines is absorbed
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT count(*) FROM stream_lines WHERE job_id = :j"), {"j": JOB}
        ).scalar()
        assert verify(conn, job_id=JOB).ok
    assert stored == len(TRANSCRIPT)
