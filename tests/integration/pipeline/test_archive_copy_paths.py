"""The two ways lines reach stream_lines store the same rows.

Direct COPY, and staging + ON CONFLICT, against a real PostgreSQL in a fresh schema per
test.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from models.records import LineEnvelope
from pipeline.archive.writer import ArchiveWriter
from pipeline.settings import Settings

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("archive_schema")]
RAWS = [
    json.dumps({"id": "__cutoff__", "state": {"chatId": "c-1"}}).encode(),
    json.dumps({"id": "m1", "content": "caf\u00e9 \U0001f600", "toolCall": {"name": "x"}}).encode(),
    b"\xff not utf-8",
    b'{"id":"x","content":"nul \\u0000 inside"}',
    b'{"id":"n","sort":NaN}',
    b'{"id": "cut',
]
COLUMNS = (
    "line_no, raw, terminated, chat_id, parse_error, raw_sha256, message_id, payload,"
    " chain_hash IS NOT NULL AS chained"
)


def _lines(job_id: str) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(
            job_id=job_id,
            attempt=1,
            line_no=n,
            raw=raw,
            received_at=T0 + timedelta(milliseconds=n),
            chat_id="c-1",
        )
        for n, raw in enumerate(RAWS, start=1)
    ]


def _stored(engine: sa.Engine, schema: str, job_id: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        query = f'SELECT {COLUMNS} FROM "{schema}".stream_lines WHERE job_id = :j ORDER BY line_no'
        return [tuple(row) for row in conn.execute(sa.text(query), {"j": job_id})]


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    found = [r.getMessage() for r in caplog.records if "direct COPY refused" in r.getMessage()]
    caplog.clear()
    return found


def test_direct_copy_and_staging_store_identical_rows(
    engine: sa.Engine, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pipeline.archive.lines")
    writer = ArchiveWriter(engine)
    clean = [line for line in _lines("j-direct") if line.line_no != 5]  # NaN: jsonb refuses
    direct = writer.write_batch(clean, [])
    assert _refusals(caplog) == []
    staged_lines = _lines("j-staged")
    staged = writer.write_batch(staged_lines + staged_lines[:1], [])  # a duplicate: staging
    assert len(_refusals(caplog)) == 1
    rest = writer.write_batch([line for line in _lines("j-direct") if line.line_no == 5], [])
    assert len(_refusals(caplog)) == 1
    assert (direct.lines_inserted, staged.lines_inserted, rest.lines_inserted) == (5, 6, 1)
    schema = settings.database_schema
    assert _stored(engine, schema, "j-direct") == _stored(engine, schema, "j-staged")
    rows = _stored(engine, schema, "j-direct")
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[1][7] == {"id": "m1", "content": "caf\u00e9 \U0001f600", "toolCall": {"name": "x"}}
    assert all(r[-1] for r in rows)


def test_a_batch_written_twice_changes_nothing_the_second_time(
    engine: sa.Engine, settings: Settings
) -> None:
    writer = ArchiveWriter(engine)
    lines = [line for line in _lines("j-twice") if line.line_no != 5]
    first = writer.write_batch(lines, [])
    before = _stored(engine, settings.database_schema, "j-twice")
    second = writer.write_batch(lines, [])
    assert (first.lines_inserted, second.lines_inserted) == (5, 0)
    assert _stored(engine, settings.database_schema, "j-twice") == before
