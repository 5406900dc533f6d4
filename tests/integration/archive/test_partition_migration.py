"""Migration 0006 takes an archive to the partitioned layout without losing a line.

An archive is filled through the real :class:`ArchiveWriter` (lines over three months, duplicates,
lines after a gap, redacted lines, lines ``jsonb`` refuses, invalid UTF-8, a truncated line,
normalised attempts), taken down to revision 0004 (the unpartitioned table), then upgraded to
the head again; every line must come back with the same key, time, bytes (sha256), hashes and
columns, the derived rows and the views must be there, and ``chain.verify`` must pass.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.archive import chain
from pipeline.archive.engine import MIGRATIONS_DIR
from pipeline.archive.redaction import Redactor
from pipeline.archive.writer import ArchiveWriter
from pipeline.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

MONTHS = (datetime(2026, 9, 14, tzinfo=UTC), datetime(2026, 10, 3, tzinfo=UTC))
URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
LINES_PER_JOB = 12
JOBS = 36
SNAPSHOT = """
SELECT job_id, attempt, line_no, received_at, sha256(raw) AS raw_digest, raw_sha256, chain_hash,
       terminated, chat_id, parse_error, message_id, payload::text AS payload, redaction,
       redacted_at, archived_at
FROM stream_lines ORDER BY job_id, attempt, line_no
"""
DERIVED = ("jobs", "job_events", "messages", "tool_calls", "sql_queries", "answers")


def _alembic(settings: Settings, action: str, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["settings"] = settings
    getattr(command, action)(config, revision)


def _rows(engine: sa.Engine, query: str) -> list[Any]:
    with engine.connect() as conn:  # search_path is the archive's schema (create_engine)
        return list(conn.execute(sa.text(query)))


def _raw(n: int, job: int) -> bytes:
    if n == 1:
        return json.dumps({"id": "__cutoff__", "state": {"chatId": f"c-{job}"}}).encode()
    if n == LINES_PER_JOB:
        return json.dumps({"id": "a", "content": "done", "graphPath": ["final"]}).encode()
    odd = {
        3: b"\xff not utf-8",
        4: b'{"id":"x","content":"nul \\u0000 inside"}',
        5: b'{"id":"n","sort":NaN}',
        6: json.dumps({"id": "p", "content": f"mail analyst{job}@example.com"}).encode(),
    }
    if job % 3 == 0 and n in odd:
        return odd[n]
    content = f"delta {n} of job {job} " + "x" * (n * 7)
    return json.dumps({"id": "a", "content": content, "isDelta": True}).encode()


def _job(job: int) -> tuple[list[LineEnvelope], list[JobEvent]]:
    job_id, started = f"job-{job:03d}", MONTHS[job % 2] + timedelta(hours=job)
    chat_job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": f"run-{job % 4}",
            "question": f"question {job}",
            "session_settings": {"externalId": f"analyst-{job % 5}"},
            "chat_url": URL,
            "submitted_at": started,
        }
    )
    lines = [
        LineEnvelope.from_raw(
            job_id=job_id,
            attempt=1,
            line_no=n,
            raw=_raw(n, job),
            received_at=started + timedelta(seconds=n),
            terminated=n != LINES_PER_JOB or job % 7 != 0,
            job_at=started if job % 2 else None,  # half as records before the header existed
        )
        for n in range(1, LINES_PER_JOB + 1)
    ]
    common = {"job_id": job_id, "run_id": chat_job.run_id}
    events = [
        JobEvent(**common, kind="accepted", job=chat_job, at=started),
        JobEvent(**common, kind="started", attempt=1, job=chat_job, at=started),
        JobEvent(**common, kind="completed", attempt=1, line_count=LINES_PER_JOB, at=started),
    ]
    return lines, events


def _fill(writer: ArchiveWriter) -> list[LineEnvelope]:
    everything: list[LineEnvelope] = []
    for job in range(JOBS):
        lines, events = _job(job)
        everything += lines
        if job % 4 == 0:  # a gap: the late lines arrive first, unchained, and are linked later
            writer.write_batch(lines[6:], [])
            writer.write_batch(lines[:6] + lines[8:10], events)  # with duplicates
        else:
            writer.write_batch(lines, events)
    writer.write_batch(everything[:40], [])  # a batch read again after a crash
    return everything


def test_upgrade_from_0004_keeps_every_line(settings: Settings, engine: sa.Engine) -> None:
    redactor = Redactor.build(detectors=["email"])
    writer = ArchiveWriter(engine, redactor=redactor)
    lines = _fill(writer)
    before = _rows(engine, SNAPSHOT)
    derived = {t: _rows(engine, f"SELECT count(*) FROM {t}")[0][0] for t in DERIVED}
    assert len(before) == JOBS * LINES_PER_JOB == len({(x.job_id, x.line_no) for x in lines})
    assert sum(1 for r in before if r.redaction == "redacted") >= 6
    assert sum(1 for r in before if r.chain_hash is None) == 0  # every gap was linked

    _alembic(settings, "downgrade", "0004")
    assert _rows(engine, "SELECT version_num FROM alembic_version")[0][0] == "0004"
    kind = "SELECT relkind FROM pg_class WHERE oid = 'stream_lines'::regclass"
    assert _rows(engine, kind)[0][0] == "r"  # a plain table, as revision 0004 made it
    assert _rows(engine, SNAPSHOT) == before

    _alembic(settings, "upgrade", "head")
    assert _rows(engine, kind)[0][0] == "p"
    after = _rows(engine, SNAPSHOT)
    assert after == before  # counts, keys, times, sha256 of the bytes, hashes, every column
    assert {t: _rows(engine, f"SELECT count(*) FROM {t}")[0][0] for t in DERIVED} == derived
    assert _rows(engine, "SELECT count(*) FROM stream_lines WHERE partition_at <> received_at") == [
        (0,)
    ]  # rows of 0004 had no job time: received_at is their partition key
    placed = _rows(
        engine,
        "SELECT tableoid::regclass::text AS part, count(*) FROM stream_lines GROUP BY 1 ORDER BY 1",
    )
    assert [p for p, _ in placed] == ["stream_lines_p2026_09", "stream_lines_p2026_10"]
    assert _rows(engine, "SELECT count(*) FROM dash_job_facts")[0][0] == JOBS

    with engine.connect() as conn:
        report = chain.verify(conn)
    assert report.problems == []
    assert (report.lines, report.attempts) == (JOBS * LINES_PER_JOB, JOBS)

    old_records = [line.model_copy(update={"job_at": None}) for line in lines]
    again = writer.write_batch(old_records[:200], [])  # 0004-era records delivered again
    assert again.lines_inserted == 0
    assert len(_rows(engine, SNAPSHOT)) == JOBS * LINES_PER_JOB
