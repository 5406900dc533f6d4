r"""Archive writes for raw lines: ``COPY``, or ``COPY`` into a staging table and an upsert.

A database module used by :class:`pipeline.archive.writer.ArchiveWriter` inside its transaction. A
batch is first ``COPY``ed straight into ``stream_lines`` under a savepoint: when every line is new
and every payload one ``jsonb`` accepts (nearly always), that is the whole write, at plain
``COPY``'s rate (bench ``sink-ingest``). When PostgreSQL refuses it (a line already archived: a
batch read again after a crash; a payload ``jsonb`` refuses), the savepoint is rolled back and the
batch takes the staging path. Why that path (``notes/measurements.md``): ``COPY`` into a temporary
table followed by ``INSERT INTO stream_lines SELECT ... ON CONFLICT (job_id, attempt, line_no,
partition_at) DO NOTHING`` keeps about two thirds of plain ``COPY``'s rate while absorbing
duplicates, where row-by-row upserts keep well under half. The staging table is created once per
database session (``ON COMMIT DELETE ROWS``), and ``COPY`` runs in binary format, so ``raw`` goes to
``bytea`` byte for byte, whatever it holds.

``payload`` is the line's JSON text cast to ``jsonb`` inside PostgreSQL. A line Python parses
but ``jsonb`` refuses (``\u0000``, a lone surrogate, ``NaN``, a number out of range) would fail
the cast; then the insert is redone under a savepoint through ``try_jsonb`` (migration 0001),
and such lines keep ``payload`` NULL with the reason in ``parse_error``.

Tamper evidence and redaction (migration 0002): every staged row carries ``raw_sha256`` (of the line
as received) and, when it continues its attempt's chain without a gap, its ``chain_hash``
(:mod:`pipeline.archive.chain`: computed in Python per attempt in line order, so the ``COPY`` path
gains one sha256 per line and two index probes per batch). With redaction rules configured
(:class:`pipeline.archive.redaction.Redactor`), ``raw`` is the redacted line, marked ``redacted``.

:func:`write_lines` also says which lines its statement inserted, each in the form its row
stores (:class:`WrittenLines`, :func:`stored_line`): every line on the direct ``COPY`` path,
the keys the staging path's ``INSERT ... RETURNING`` gives, never a key the batch holds twice.
The writer folds them into their attempts' transcripts, to normalise them without reading them
back (:mod:`pipeline.archive.derived`, "Attempts folded"). It also remembers the chain heads
those lines end (:attr:`WrittenLines.heads`, :class:`~pipeline.archive.chain.KnownHeads`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import psycopg
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from models.archive import storable_text
from models.records import LineEnvelope
from pipeline.archive import chain
from pipeline.archive.parsed import JobAttempt, KnownLine, LineKey, known_line
from pipeline.archive.redaction import Redactor

logger = logging.getLogger(__name__)

STAGE_TABLE: Final = "chatscribe_stage_lines"
JSONB_REFUSED: Final = (
    "line is JSON but PostgreSQL jsonb refuses it (NUL escape, lone surrogate, NaN or number"
    " out of range); kept in raw only"
)
NUL_REFUSED: Final = "line is JSON with a \\u0000 escape, which jsonb cannot hold; kept in raw only"
JSONB_BINARY_VERSION: Final = b"\x01"
"""First byte of ``jsonb``'s binary input format; the JSON text follows (``jsonb_recv``)."""
Row = tuple[Any, ...]
_NUL_ESCAPE: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_COLUMNS: Final = (
    "job_id",
    "attempt",
    "line_no",
    "received_at",
    "raw",
    "terminated",
    "chat_id",
    "parse_error",
    "raw_sha256",
    "chain_hash",
    "redaction",
    "redacted_at",
    "partition_at",
    "message_id",
    "payload",
)
_TYPES: Final = (
    *("text", "int4", "int4", "timestamptz", "bytea", "bool", "text", "text"),
    *("bytea", "bytea", "text", "timestamptz", "timestamptz", "text"),
)
_CREATE_STAGE: Final = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {STAGE_TABLE} ("
    + ", ".join(f"{c} {t}" for c, t in zip(_COLUMNS, (*_TYPES, "text"), strict=True))
    + ") ON COMMIT DELETE ROWS"
)
_COPY: Final = f"COPY {STAGE_TABLE} ({', '.join(_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
_KEYED: Final = ", ".join(_COLUMNS[:-2])
_FAST_SELECT: Final = f"SELECT {_KEYED}, message_id, payload::jsonb FROM pg_temp.{STAGE_TABLE}"
_SAFE_SELECT: Final = (
    "SELECT job_id, attempt, line_no, received_at, raw, terminated, chat_id,"
    " CASE WHEN s.payload IS NOT NULL AND t.payload IS NULL THEN '{refused}'"
    " ELSE s.parse_error END, raw_sha256, chain_hash, redaction, redacted_at, partition_at,"
    " message_id,"
    " t.payload"
    " FROM pg_temp.{stage} AS s CROSS JOIN LATERAL (SELECT try_jsonb(s.payload)"
    " AS payload) AS t"
)


@dataclass(frozen=True)
class WrittenLines:
    """What :func:`write_lines` stored.

    Attributes:
        inserted: Rows new to ``stream_lines`` (the rest were already there).
        stored: The batch's lines whose row this call inserted, by key, each as its row stores
            it (:func:`stored_line`). A key the batch holds more than once is left out: which
            of its lines went in is not tracked (its attempt is then read back to normalise).
        heads: Chain heads true once the transaction commits (read from the archive, or a
            line this call inserted with its hash), for :class:`~pipeline.archive.chain.KnownHeads`;
            attempts :func:`~pipeline.archive.chain.link_pending` extended are left out.
    """

    inserted: int
    stored: dict[LineKey, KnownLine]
    heads: dict[JobAttempt, tuple[int, bytes]] = field(default_factory=dict)


def write_lines(
    conn: sa.Connection,
    lines: Sequence[LineEnvelope],
    *,
    redactor: Redactor | None = None,
    known_heads: chain.KnownHeads | None = None,
) -> WrittenLines:
    """Stores lines in ``stream_lines``; a (job, attempt, line_no) already there is skipped.

    Args:
        conn: A connection inside the batch's transaction (the jobs' advisory locks held).
        lines: Decoded line records, any order, duplicates allowed.
        redactor: Redaction rules applied to ``raw`` before storage (None or empty: none).
        known_heads: Chain heads the writer knows; only the other attempts' heads are read.

    Returns:
        How many rows were new, and which lines they were, as stored.

    Raises:
        sqlalchemy.exc.DBAPIError, psycopg.Error: Translated by the caller
            (:func:`pipeline.archive.engine.translate_errors`).
    """
    if not lines:
        return WrittenLines(0, {})
    pairs = {(line.job_id, line.attempt) for line in lines}
    keys = [(line.job_id, line.attempt, line.line_no) for line in lines]
    digests = [chain.raw_sha256(line.raw) for line in lines]
    by_key = dict(zip(keys, digests, strict=True))  # the last line of a key, as extend's
    heads = known_heads.of(pairs) if known_heads is not None else {}
    heads |= chain.read_heads(conn, pairs - heads.keys())
    read = dict(heads)
    hashes = chain.extend(lines, heads, by_key)  # heads now the batch's new ones
    forms: list[KnownLine] = []  # each line's stored form, built once (redaction stamps a time)

    def rows() -> Iterator[Row]:
        for n, (line, key, digest) in enumerate(zip(lines, keys, digests, strict=True)):
            if n == len(forms):
                forms.append(stored_line(line, redactor=redactor))
            yield _row(forms[n], chain_hash=hashes.get(key), digest=digest)

    direct = _copy_direct(conn, rows())  # rows built while PostgreSQL takes them
    if direct is None:
        conn.exec_driver_sql(_CREATE_STAGE)
        _copy(_driver(conn), list(rows()))
        new = _insert(conn)
    else:
        new = keys  # every row went in (or the COPY would have been refused)
    relinked = chain.link_pending(conn, pairs)
    inserted = set(new)
    stored_heads = {
        pair: head
        for pair, head in heads.items()
        if pair not in relinked and (head == read.get(pair) or (*pair, head[0]) in inserted)
    }
    return WrittenLines(len(new), _inserted_once(keys, forms, new), stored_heads)


def _inserted_once(
    keys: Sequence[LineKey], forms: Sequence[KnownLine], new: Sequence[LineKey]
) -> dict[LineKey, KnownLine]:
    """Returns: the stored form of each line whose key the batch holds once and inserted once."""
    given, went_in = Counter(keys), Counter(new)
    return {
        key: form
        for key, form in zip(keys, forms, strict=True)
        if given[key] == 1 and went_in[key] == 1 and form.line.job_id == key[0]
    }


def _copy_direct(conn: sa.Connection, rows: Iterable[Row]) -> int | None:
    """``COPY``s the rows straight into ``stream_lines`` under a savepoint.

    The common case (every line new, every payload one ``jsonb`` accepts) without the staging
    table's second write. Returns: the rows written, or None when PostgreSQL refused the
    ``COPY`` (a line already there or twice in the batch, a payload ``jsonb`` refuses); the
    savepoint is then rolled back and the caller takes the staging path.
    """
    statement = f"COPY stream_lines ({', '.join(_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    written = 0
    try:
        driver = _driver(conn)
        with conn.begin_nested(), driver.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types([*_TYPES, "bytea"])  # jsonb's binary form: version 1, the text
            for row in rows:
                payload = row[-1]
                copy.write_row((*row[:-1], None if payload is None else _jsonb(payload)))
                written += 1
    except (psycopg.IntegrityError, psycopg.DataError) as exc:
        logger.info("direct COPY refused, staging the batch: %s", type(exc).__name__)
        return None
    return written


def _jsonb(text: str) -> bytes:
    return JSONB_BINARY_VERSION + text.encode("utf-8")


def _insert(conn: sa.Connection) -> list[LineKey]:
    """Inserts the staged rows not stored yet; returns: the key of each row inserted."""
    insert = (
        f"INSERT INTO stream_lines ({', '.join(_COLUMNS)}) {{select}}"
        " ON CONFLICT (job_id, attempt, line_no, partition_at) DO NOTHING"
        " RETURNING job_id, attempt, line_no"
    )
    try:
        with conn.begin_nested():
            return _keys(conn.exec_driver_sql(insert.format(select=_FAST_SELECT)))
    except sa_exc.DataError as exc:
        logger.warning("jsonb refused a line payload, retrying per line: %s", exc.orig)
    safe = _SAFE_SELECT.format(refused=JSONB_REFUSED, stage=STAGE_TABLE)
    return _keys(conn.exec_driver_sql(insert.format(select=safe)))


def _keys(result: sa.CursorResult[Any]) -> list[LineKey]:
    return [(row.job_id, row.attempt, row.line_no) for row in result]


def stored_line(line: LineEnvelope, *, redactor: Redactor | None = None) -> KnownLine:
    """Returns: ``line`` as its ``stream_lines`` row stores it, parsed, as a :class:`KnownLine`.

    ``raw`` redacted when ``redactor`` matches (the redacted bytes parsed anew, the row marked
    ``redacted`` now); job and chat id cleaned (:func:`models.archive.storable_text`).
    """
    redaction, redacted_at = None, None
    if redactor:
        redacted = redactor.redact_line(line.raw)
        if redacted is not line.raw:
            kept = line.model_dump(exclude={"message", "parse_error", "raw"})
            line = LineEnvelope.from_raw(**kept, raw=redacted)
            redaction, redacted_at = "redacted", datetime.now(UTC)
    job_id = storable_text(line.job_id)
    chat_id = _text(line.chat_id)
    if job_id != line.job_id or chat_id != line.chat_id:
        line = line.model_copy(update={"job_id": job_id, "chat_id": chat_id})
    return known_line(line, inserted=True, redaction=redaction, redacted_at=redacted_at)


def staged_row(
    line: LineEnvelope,
    *,
    chain_hash: bytes | None = None,
    redactor: Redactor | None = None,
    digest: bytes | None = None,
) -> Row:
    r"""Returns: the staging row of a line.

    Text cleaned (:func:`models.archive.storable_text`), ``payload`` the line's JSON text when
    it parsed and holds no ``\u0000``, else None; ``raw_sha256`` of the line as received
    (``digest`` when already computed); ``raw`` redacted when ``redactor`` matches
    (:func:`stored_line`).
    """
    digest = digest if digest is not None else chain.raw_sha256(line.raw)
    return _row(stored_line(line, redactor=redactor), chain_hash=chain_hash, digest=digest)


def _row(stored: KnownLine, *, chain_hash: bytes | None, digest: bytes) -> Row:
    """Returns: the staging row of a line's stored form (``digest``: of the line as received)."""
    line = stored.line
    message = line.message
    payload = line.raw.decode("utf-8") if message is not None else None
    parse_error = line.parse_error
    if payload is not None and "\\u0000" in payload and _NUL_ESCAPE.search(payload):
        payload, parse_error = None, NUL_REFUSED
    return (
        line.job_id,
        line.attempt,
        line.line_no,
        line.received_at,
        line.raw,
        line.terminated,
        line.chat_id,
        _text(parse_error),
        digest,
        chain_hash,
        stored.redaction,
        stored.redacted_at,
        line.partition_at,
        _text(message.id if message is not None else None),
        payload,
    )


def _copy(driver: psycopg.Connection[Any], rows: Sequence[Row]) -> None:
    with driver.cursor() as cursor, cursor.copy(_COPY) as copy:
        copy.set_types([*_TYPES, "text"])
        for row in rows:
            copy.write_row(row)


def _driver(conn: sa.Connection) -> psycopg.Connection[Any]:
    driver = conn.connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise TypeError(f"archive needs the psycopg 3 driver, got {type(driver).__name__}")
    return driver


def _text(value: str | None) -> str | None:
    return storable_text(value) if value is not None else None
