"""The archive writer against a real PostgreSQL, in a fresh schema per test."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import dbapi20
from psycopg.adapt import PyFormat
from psycopg.pq import Format
from pydantic import SecretStr

from models import wire
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.archive import tables as archive
from pipeline.archive.engine import create_engine, upgrade
from pipeline.archive.lines import JSONB_REFUSED, NUL_REFUSED
from pipeline.archive.writer import ArchiveWriter
from pipeline.errors import ArchiveSchemaError, ArchiveUnavailableError
from pipeline.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("archive_schema"),
]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
BIG_LINE_BYTES = 10 * 1024 * 1024


@pytest.fixture
def writer(engine: sa.Engine, settings: Settings) -> ArchiveWriter:
    return ArchiveWriter(engine)


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _lines(job_id: str, raws: list[bytes], attempt: int = 1) -> list[LineEnvelope]:
    return [
        LineEnvelope.from_raw(
            job_id=job_id,
            attempt=attempt,
            line_no=n,
            raw=raw,
            received_at=T0 + timedelta(milliseconds=n),
        )
        for n, raw in enumerate(raws, start=1)
    ]


def _job(job_id: str) -> ChatJob:
    return ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": "run-1",
            "question": "How many flights?",
            "persona": "analyst",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": URL,
        }
    )


def _events(job_id: str, line_count: int, attempt: int = 1) -> list[JobEvent]:
    job = _job(job_id)
    common = {"job_id": job_id, "run_id": "run-1"}
    return [
        JobEvent(**common, kind="accepted", job=job, at=T0),
        JobEvent(**common, kind="started", attempt=attempt, job=job, at=T0),
        JobEvent(**common, kind="completed", attempt=attempt, line_count=line_count, at=T0),
    ]


TRANSCRIPT = [
    _raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "chat-1"}),
    _raw(id="m1", role="user", content="How many flights?"),
    _raw(id="m2", role="assistant", content="There are ", graphPath=["final"], isDelta=True),
    _raw(id="m2", role="assistant", content="42.", graphPath=["final"], isDelta=True),
    _raw(id=wire.ID_USAGE, usage={"totalTokens": 10}),
]


def _rows(engine: sa.Engine, query: str, **params: Any) -> list[Any]:
    """Runs ``query`` (the engine's connections have the test's schema as search path)."""
    with engine.connect() as conn:
        return list(conn.execute(sa.text(query), params))


def test_migration_creates_every_table_as_models_archive_describes(
    engine: sa.Engine, settings: Settings
) -> None:
    upgrade(settings)  # a second upgrade changes nothing
    inspector = sa.inspect(engine)
    schema = settings.database_schema
    names = set(inspector.get_table_names(schema=schema))
    partitions = {n for n in names if re.fullmatch(r"stream_lines_(p\d{4}_\d{2}|default)", n)}
    assert "stream_lines_default" in partitions  # migration 0006
    assert names - partitions == {*archive.metadata.tables, "alembic_version"}
    for table in archive.metadata.tables.values():
        columns = {c["name"]: c for c in inspector.get_columns(table.name, schema=schema)}
        assert list(columns) == [c.name for c in table.columns], table.name
        for column in table.columns:
            found = columns[column.name]
            assert found["nullable"] == column.nullable, (table.name, column.name)
            assert found["type"].compile(engine.dialect) == column.type.compile(engine.dialect)
        primary = inspector.get_pk_constraint(table.name, schema=schema)
        assert primary["constrained_columns"] == [c.name for c in table.primary_key.columns]
    for table in archive.metadata.tables.values():
        found_indexes = {i["name"] for i in inspector.get_indexes(table.name, schema=schema)}
        assert found_indexes == {i.name for i in table.indexes}, table.name


def test_same_lines_twice_are_stored_once_byte_for_byte(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    raws = [
        *TRANSCRIPT[:2],
        b"\xff\xfe\x00 not utf-8",
        b"",
        b'{"id": "m9", "content": "cut',
        b'{"id":"x","content":"nul \\u0000 inside"}',
        _raw(id="big", content="x" * BIG_LINE_BYTES),
        b'{"id":"m3","content":"crlf"}\r',
    ]
    lines = _lines("j-dup", raws)
    first = writer.write_batch(lines, [])
    second = writer.write_batch(lines + lines[:2], [])
    assert (first.lines_inserted, second.lines_inserted) == (len(raws), 0)
    rows = _rows(
        engine,
        "SELECT line_no, raw, parse_error, message_id, payload IS NULL AS no_payload"
        " FROM stream_lines WHERE job_id = 'j-dup' ORDER BY line_no",
    )
    assert [bytes(r.raw) for r in rows] == raws
    by_no = {r.line_no: r for r in rows}
    assert by_no[3].parse_error.startswith("invalid UTF-8") and by_no[3].no_payload
    assert by_no[6].parse_error == NUL_REFUSED and by_no[6].message_id == "x"
    assert by_no[7].message_id == "big" and not by_no[7].no_payload


def test_lines_jsonb_refuses_keep_raw_and_say_why(writer: ArchiveWriter, engine: sa.Engine) -> None:
    raws = [b'{"id":"n","sort":NaN}', b'{"id":"s","content":"\\ud800"}', _raw(id="ok")]
    outcome = writer.write_batch(_lines("j-refused", raws), [])
    assert outcome.lines_inserted == 3
    rows = _rows(
        engine,
        "SELECT parse_error, payload FROM stream_lines WHERE job_id = 'j-refused' ORDER BY line_no",
    )
    assert [(r.parse_error, r.payload) for r in rows] == [
        (JSONB_REFUSED, None),
        (JSONB_REFUSED, None),
        (None, {"id": "ok"}),
    ]


@pytest.mark.parametrize("order", ["events first", "lines first", "one batch"])
def test_any_order_of_lines_and_events_ends_normalised(
    writer: ArchiveWriter, engine: sa.Engine, order: str
) -> None:
    lines, events = _lines("j-order", TRANSCRIPT), _events("j-order", len(TRANSCRIPT))
    if order == "events first":
        batches = [([], events), (lines[:2], []), (lines[2:], [])]
    elif order == "lines first":
        batches = [(lines[3:], []), (lines[:3], events[:2]), ([], events[2:])]
    else:
        batches = [(lines, events)]
    outcomes = [writer.write_batch(b_lines, b_events) for b_lines, b_events in batches]
    assert [o.normalised for o in outcomes][-1] == (("j-order", 1),)
    (job,) = _rows(engine, "SELECT * FROM jobs WHERE job_id = 'j-order'")
    assert (job.status, job.normalised_attempt, job.chat_id, job.line_count) == (
        "completed",
        1,
        "chat-1",
        5,
    )
    assert (job.identity, job.question, job.persona) == (
        "external:analyst-1",
        "How many flights?",
        "analyst",
    )
    (answer,) = _rows(engine, "SELECT * FROM answers WHERE job_id = 'j-order'")
    assert (answer.content, answer.source, answer.message_id, answer.chat_id) == (
        "There are 42.",
        "final",
        "m2",
        "chat-1",
    )
    messages = _rows(engine, "SELECT message_id FROM messages ORDER BY first_line")
    assert [m.message_id for m in messages] == [wire.ID_CUTOFF, "m1", "m2", wire.ID_USAGE]


def test_incomplete_attempt_is_not_normalised_until_its_last_line(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    lines = _lines("j-wait", TRANSCRIPT)
    assert writer.write_batch(lines[:-1], _events("j-wait", len(TRANSCRIPT))).normalised == ()
    assert _rows(engine, "SELECT * FROM answers") == []
    assert writer.write_batch(lines[-1:], []).normalised == (("j-wait", 1),)
    assert writer.write_batch(lines, []).normalised == ()  # already normalised


def test_lines_of_earlier_batches_are_not_parsed_again_to_normalise(
    writer: ArchiveWriter, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parse once: the attempt spans two batches; normalising it parses none of its lines."""
    from models import records
    from pipeline.archive import derived

    parses: list[bytes] = []
    real = records.parse_line

    def counting(raw: bytes) -> Any:
        parses.append(raw)
        return real(raw)

    monkeypatch.setattr(derived, "parse_line", counting)
    lines = _lines("j-once", TRANSCRIPT)
    writer.write_batch(lines[:-1], [])
    assert writer.write_batch(lines[-1:], _events("j-once", len(TRANSCRIPT))).normalised == (
        ("j-once", 1),
    )
    assert parses == []
    assert _rows(engine, "SELECT count(*) AS n FROM messages WHERE job_id = 'j-once'")[0].n > 0
    fresh = ArchiveWriter(engine)  # a sink that did not see the lines parses them from storage
    assert fresh.renormalise("j-once", 1)
    assert len(parses) == len(TRANSCRIPT)


def test_late_started_event_keeps_the_terminal_status(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    accepted, started, completed = _events("j-late", 0)
    writer.write_batch([], [accepted, completed])
    writer.write_batch([], [started])
    (job,) = _rows(engine, "SELECT status, started_at FROM jobs WHERE job_id = 'j-late'")
    assert job.status == "completed" and job.started_at == T0
    kinds = _rows(engine, "SELECT kind FROM job_events WHERE job_id = 'j-late' ORDER BY kind")
    assert [k.kind for k in kinds] == ["accepted", "completed", "started"]
    (answer,) = _rows(engine, "SELECT source FROM answers WHERE job_id = 'j-late'")
    assert answer.source == "none"


def test_renormalise_recomputes_derived_rows_from_raw_lines(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    writer.write_batch(_lines("j-re", TRANSCRIPT), _events("j-re", len(TRANSCRIPT)))
    with engine.begin() as conn:
        conn.execute(archive.messages.delete())
        conn.execute(archive.answers.update().values(content="tampered"))
    assert writer.renormalise("j-re", 1)
    assert not writer.renormalise("j-re", 2)
    (answer,) = _rows(engine, "SELECT content FROM answers")
    assert answer.content == "There are 42."
    assert len(_rows(engine, "SELECT * FROM messages")) == 4


def test_text_the_database_cannot_hold_is_cleaned_in_derived_rows(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    raws = [b'{"id":"m1","role":"assistant","content":"a\\u0000b","graphPath":["final"]}']
    writer.write_batch(_lines("j-nul", raws), _events("j-nul", 1))
    (answer,) = _rows(engine, "SELECT content FROM answers")
    assert answer.content == "a\ufffdb"


def test_two_writers_racing_on_one_job_still_normalise_it(
    engine: sa.Engine, settings: Settings
) -> None:
    jobs = [f"j-race-{n}" for n in range(8)]
    writers = [ArchiveWriter(engine) for _ in range(2)]

    def race(job_id: str) -> None:
        barrier = threading.Barrier(2)

        def write(writer: ArchiveWriter, lines: list[LineEnvelope], events: list[JobEvent]) -> None:
            barrier.wait()
            writer.write_batch(lines, events)

        lines, events = _lines(job_id, TRANSCRIPT), _events(job_id, len(TRANSCRIPT))
        with ThreadPoolExecutor(max_workers=2) as pool:
            done = [
                pool.submit(write, writers[0], lines, []),
                pool.submit(write, writers[1], [], events),
            ]
            for future in done:
                future.result()

    for job_id in jobs:
        race(job_id)
    rows = _rows(engine, "SELECT job_id FROM answers ORDER BY job_id")
    assert [r.job_id for r in rows] == sorted(jobs)


def test_database_errors_are_translated_by_retryability(
    settings: Settings, bare_settings: Settings
) -> None:
    lines = _lines("j-errors", TRANSCRIPT)
    missing_tables = ArchiveWriter.from_settings(bare_settings)  # schema exists, never upgraded
    with pytest.raises(ArchiveSchemaError, match="stream_lines"):
        missing_tables.write_batch(lines, [])
    missing_tables.close()
    url = settings.database_url.get_secret_value().rsplit("@", 1)[0] + "@127.0.0.1:1/nowhere"
    unreachable = ArchiveWriter.from_settings(
        settings.model_copy(update={"database_url": SecretStr(url)})
    )
    with pytest.raises(ArchiveUnavailableError):
        unreachable.write_batch(lines, [])
    unreachable.close()


def test_large_values_are_compressed_with_lz4_where_the_server_has_it(
    writer: ArchiveWriter, engine: sa.Engine
) -> None:
    lz4 = _rows(
        engine,
        "SELECT 'lz4' = ANY(enumvals) AS ok FROM pg_settings"
        " WHERE name = 'default_toast_compression'",
    )
    # ops/ starts Debian's PostgreSQL, built with LZ4; a server without it keeps pglz (engine.py)
    assert lz4 and lz4[0].ok, "the PostgreSQL ops/ starts should have LZ4"
    rows = [["UA", n, "2013-01-01"] for n in range(3000)]  # ~60 KB, compressible
    call = {
        "name": wire.TOOL_SQL,
        "input": json.dumps({"sqlQuery": "SELECT carrier FROM flights"}),
        "result": json.dumps({"schema": [{"name": "carrier"}], "data": rows}),
    }
    big = _raw(id="t1", role="assistant", graphPath=["agent", "tools"], toolCall=call)
    lines = _lines("j-lz4", [*TRANSCRIPT[:2], big, *TRANSCRIPT[2:]])
    writer.write_batch(lines, _events("j-lz4", len(lines)))
    assert _rows(engine, "SHOW default_toast_compression")[0][0] == "lz4"
    stored = _rows(
        engine, "SELECT pg_column_compression(raw) AS c FROM stream_lines WHERE line_no = 3"
    )
    result = _rows(engine, "SELECT pg_column_compression(result) AS c FROM tool_calls")
    assert [r.c for r in stored] == ["lz4"] and [r.c for r in result] == ["lz4"]


@pytest.mark.parametrize("read_only", [False, True])
def test_archive_sessions_run_without_jit(settings: Settings, read_only: bool) -> None:
    """engine.py, ``SESSION_OPTIONS``: no session compiles a plan; read-only ones stay read only.

    The server's own default is ``jit = on`` (PostgreSQL 11+), so the setting is the engine's.
    """
    engine = create_engine(settings, read_only=read_only)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
            read_only_now = conn.exec_driver_sql("SHOW transaction_read_only").scalar_one()
            assert read_only_now == ("on" if read_only else "off")
            default = conn.exec_driver_sql(
                "SELECT boot_val FROM pg_settings WHERE name = 'jit'"
            ).scalar_one()
            assert default == "on"
    finally:
        engine.dispose()


def test_archive_sessions_send_bytes_and_lists_in_binary(engine: sa.Engine) -> None:
    """Binary ``COPY`` picks a dumper by OID: not the Python ``dbapi20`` one; lists go binary.

    engine.py, ``_binary_dumpers``; a list of text comes back whole, quotes and all.
    """
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert isinstance(driver, psycopg.Connection)
        oid = driver.adapters.types["bytea"].oid
        dumper = driver.adapters.get_dumper_by_oid(oid, Format.BINARY)
        assert not issubclass(dumper, dbapi20.BinaryBinaryDumper)
        assert driver.adapters.get_dumper(bytes, PyFormat.BINARY) is dumper
        assert driver.adapters.get_dumper(list, PyFormat.AUTO).format == Format.BINARY
        odd = ['a "quoted", {braced} \\ id', "NULL", "", "é"]
        got = conn.execute(sa.text("SELECT unnest(CAST(:ids AS text[]))"), {"ids": odd})
        assert [row[0] for row in got] == odd
