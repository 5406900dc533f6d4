"""Archive writes for derived rows: normalise attempts whose lines are all stored.

A database module used by :class:`pipeline.archive.writer.ArchiveWriter` inside its transaction
(with the jobs' advisory locks held). An attempt is ready when a terminal event of it gave a
``line_count`` and ``stream_lines`` holds lines ``1..line_count``; it is normalised once, which
the presence of its ``answers`` row records. Normalising takes the lines as stored, runs the
pure :func:`pipeline.transcript.normalise.normalise`, replaces the attempt's rows in
``messages``, ``tool_calls``, ``sql_queries`` and ``answers`` and raises
``jobs.normalised_attempt``. So the order of lines and events across the two topics does not
matter, and the derived tables can be recomputed from the raw lines at any time.

Attempts folded (:func:`folded_attempts`): derived rows always follow the lines *as stored*.
The writer's :class:`~pipeline.archive.parsed.ParsedLines` folds, as they arrive, the lines
of an attempt whose rows its own statements inserted, from line 1 on without a gap, in their
stored form (redacted bytes, cleaned chat id), noting the redaction marks they were inserted
with (:class:`~pipeline.archive.parsed.FoldedLines`). An attempt's rows are the fold's
transcript, and none of its lines is read back or merged again, when

* the fold holds exactly lines ``1..line_count``: that many rows are ours, and :func:`ready`
  counted exactly ``line_count`` rows numbered up to ``line_count``, so no other row (a
  duplicate stored earlier in another partition) stands beside them; and
* the attempt's rows carry exactly the redaction marks they were inserted with
  (:func:`remarked`): ``chatscribe retention apply`` marks every row whose bytes it rewrites
  or empties, and nothing else in the archive changes ``raw``.

Any other attempt (a line stored earlier, by a redelivered record, another sink or a ``dlq
replay``; a fold dropped from the writer's budget or with a rolled-back batch; a sink
restarted; ``renormalise`` and retention, which pass no folds) is read back from
``stream_lines`` (:func:`read_lines`) and normalised whole; a line read back with the bytes of
a line the writer still keeps is not parsed again. A change of ``raw`` made outside the
archive's code is not looked for here (``chatscribe verify`` reports it).

All ready attempts of a batch are read with one query and written with one statement per
table, under a savepoint; if PostgreSQL refuses a row, each attempt is retried under its own
savepoint so that only the attempt at fault is left unnormalised (and logged).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import orjson
import psycopg
import sqlalchemy as sa
from psycopg.types.json import Jsonb
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from models.archive import storable, storable_row
from models.records import TERMINAL_EVENTS, LineEnvelope, parse_line
from pipeline.archive.engine import chunks
from pipeline.archive.parsed import FoldedLines, KnownLine, known_line
from pipeline.archive.tables import (
    DERIVED_TABLES,
    answers,
    job_events,
    jobs,
    messages,
    sql_queries,
    stream_lines,
    tool_calls,
)
from pipeline.transcript.normalise import Transcript, normalise

logger = logging.getLogger(__name__)

_REFUSED: Final = (
    sa_exc.DataError,
    sa_exc.IntegrityError,
    psycopg.DataError,
    psycopg.IntegrityError,
)
"""A value PostgreSQL refuses, through SQLAlchemy or straight from psycopg (``COPY``)."""

JobAttempt = tuple[str, int]
LineKey = tuple[str, int, int]


def normalise_ready(
    conn: sa.Connection,
    pairs: Sequence[JobAttempt],
    *,
    force: bool = False,
    known: Mapping[LineKey, KnownLine] | None = None,
    folds: Mapping[JobAttempt, FoldedLines] | None = None,
) -> list[JobAttempt]:
    """Normalises every ready attempt among ``pairs`` (module docstring).

    Args:
        conn: A connection inside the batch's transaction, job locks held.
        pairs: (job id, attempt) pairs the batch touched.
        force: Normalise again even when the attempt already has an ``answers`` row.
        known: The writer's kept lines, by (job id, attempt, line number)
            (:class:`pipeline.archive.parsed.ParsedLines`): a line read back with the same bytes
            as a known one is not parsed again.
        folds: The writer's folds by attempt: an attempt folded whole is not read back
            (:func:`folded_attempts`).

    Returns:
        The pairs normalised. An attempt whose rows PostgreSQL refuses is logged and skipped;
        the batch goes on.
    """
    targets = ready(conn, pairs, force=force)
    if not targets:
        return []
    folded = folded_attempts(conn, targets, folds or {})
    rest = [t for t in targets if (t[0], t[1]) not in folded]
    stored = read_lines(conn, rest, known or {}) if rest else {}
    clean = {pair for pair, f in folded.items() if f.clean}
    clean |= {pair for pair, lines in stored.items() if all(k.clean for k in lines)}
    keys = [(job_id, attempt) for job_id, attempt, _ in targets]
    made: list[Transcript] = []

    def normalising(todo: Sequence[JobAttempt]) -> Iterator[Transcript]:
        for job_id, attempt in todo:
            fold = folded.get((job_id, attempt))
            if fold is not None:
                made.append(fold.fold.transcript())
            else:
                lines = [k.line for k in stored.get((job_id, attempt), [])]
                made.append(normalise(lines, job_id=job_id, attempt=attempt))
            yield made[-1]

    try:
        with conn.begin_nested():
            replace_rows(conn, keys, normalising(keys), clean=clean)
        return keys
    except _REFUSED as exc:
        logger.warning("derived rows refused, writing attempts one by one: %s", _cause(exc))
    transcripts = [*made, *normalising(keys[len(made) :])]
    done = []
    for transcript in transcripts:
        try:
            with conn.begin_nested():
                replace_rows(
                    conn, [(transcript.job_id, transcript.attempt)], [transcript], clean=clean
                )
        except _REFUSED as exc:
            logger.error(
                "cannot store derived rows job_id=%s attempt=%d error=%s",
                transcript.job_id,
                transcript.attempt,
                _cause(exc),
            )
            continue
        done.append((transcript.job_id, transcript.attempt))
    return done


def ready(
    conn: sa.Connection, pairs: Sequence[JobAttempt], *, force: bool = False
) -> list[tuple[str, int, int]]:
    """Returns: ``(job_id, attempt, line_count)`` of the ready attempts among ``pairs``, sorted.

    With several terminal events for one attempt, the largest ``line_count`` counts. Ready
    means ``stream_lines`` holds as many rows of the attempt numbered ``1..line_count`` as
    ``line_count`` (a count: the rows are those lines unless one number is stored twice, in two
    partitions).
    """
    e, lines = job_events, stream_lines
    stored = (
        sa.select(sa.func.count())
        .where(lines.c.job_id == e.c.job_id, lines.c.attempt == e.c.attempt)
        .where(lines.c.line_no <= e.c.line_count)
        .scalar_subquery()
    )
    done = sa.exists().where(answers.c.job_id == e.c.job_id, answers.c.attempt == e.c.attempt)
    found: dict[JobAttempt, int] = {}
    for chunk in chunks(list(pairs)):
        p = pairs_of(chunk)
        query = (
            sa.select(e.c.job_id, e.c.attempt, e.c.line_count)
            .join(p, sa.and_(e.c.job_id == p.c.job_id, e.c.attempt == p.c.attempt))
            .where(e.c.kind.in_(sorted(TERMINAL_EVENTS)), e.c.line_count.is_not(None))
            .where(stored == e.c.line_count)
        )
        for row in conn.execute(query if force else query.where(~done)):
            key = (row.job_id, row.attempt)
            found[key] = max(found.get(key, 0), row.line_count)
    return [(job_id, attempt, n) for (job_id, attempt), n in sorted(found.items())]


def folded_attempts(
    conn: sa.Connection,
    targets: Sequence[tuple[str, int, int]],
    folds: Mapping[JobAttempt, FoldedLines],
) -> dict[JobAttempt, FoldedLines]:
    """Returns: the ready attempts whose rows are their fold's transcript, by (job, attempt).

    Module docstring, "Attempts folded": the fold holds exactly lines ``1..line_count`` and no
    row of the attempt was marked since it was inserted.

    Args:
        conn: A connection inside the batch's transaction, job locks held.
        targets: ``(job_id, attempt, line_count)`` of attempts :func:`ready` found.
        folds: The writer's folds.
    """
    found: dict[JobAttempt, FoldedLines] = {}
    for job_id, attempt, count in targets:
        folded = folds.get((job_id, attempt))
        if folded is not None and folded.count == count:
            found[(job_id, attempt)] = folded
    for pair in remarked(conn, found):
        del found[pair]
    return found


def remarked(conn: sa.Connection, folds: Mapping[JobAttempt, FoldedLines]) -> set[JobAttempt]:
    """Returns: the attempts among ``folds`` whose rows' redaction marks are not the ones inserted.

    One query for the marked rows of the attempts (usually none): ``chatscribe retention
    apply`` marks every row whose ``raw`` it rewrites or empties (``redacted``/``deleted``,
    ``redacted_at`` its time), and nothing else rewrites ``raw``, so equal marks mean the
    bytes folded are the bytes stored.

    Args:
        conn: A connection inside the batch's transaction.
        folds: Each attempt's lines ``1..count`` as folded, with their marks.
    """
    if not folds:
        return set()
    c = stream_lines.c
    found: dict[JobAttempt, set[tuple[int, str, Any]]] = defaultdict(set)
    for chunk in chunks(list(folds)):
        p = pairs_of(chunk)
        query = (
            sa.select(c.job_id, c.attempt, c.line_no, c.redaction, c.redacted_at)
            .join(p, sa.and_(c.job_id == p.c.job_id, c.attempt == p.c.attempt))
            .where(c.redaction.is_not(None))
        )
        for row in conn.execute(query):
            pair = (row.job_id, row.attempt)
            if row.line_no <= folds[pair].count:
                found[pair].add((row.line_no, row.redaction, row.redacted_at))
    return {pair for pair, folded in folds.items() if found.get(pair, set()) != folded.marks}


def read_lines(
    conn: sa.Connection,
    targets: Sequence[tuple[str, int, int]],
    known: Mapping[LineKey, KnownLine],
) -> dict[JobAttempt, list[KnownLine]]:
    """Returns: lines ``1..line_count`` of each target attempt read back as stored.

    By (job, attempt). Each parsed from ``raw`` unless ``known`` holds the same bytes already
    parsed (its :func:`~pipeline.archive.parsed.parsed_clean` verdict is then taken too).
    """
    c = stream_lines.c
    limits = {(job_id, attempt): n for job_id, attempt, n in targets}
    out: dict[JobAttempt, list[KnownLine]] = defaultdict(list)
    for chunk in chunks(list(limits)):
        p = pairs_of(chunk)
        query = (
            sa.select(c.job_id, c.attempt, c.line_no, c.received_at, c.raw, c.terminated, c.chat_id)
            .join(p, sa.and_(c.job_id == p.c.job_id, c.attempt == p.c.attempt))
            .order_by(c.job_id, c.attempt, c.line_no)
        )
        for row in conn.execute(query):
            if row.line_no <= limits[(row.job_id, row.attempt)]:
                out[(row.job_id, row.attempt)].append(_read(row, known))
    return out


def _read(row: Any, known: Mapping[LineKey, KnownLine]) -> KnownLine:
    raw = bytes(row.raw)
    kept = known.get((row.job_id, row.attempt, row.line_no))
    if kept is not None and kept.line.raw == raw:
        return kept
    message, parse_error = parse_line(raw)
    # Stored keys were validated on the way in; only the line itself is parsed again.
    line = LineEnvelope.model_construct(
        job_id=row.job_id,
        attempt=row.attempt,
        line_no=row.line_no,
        received_at=row.received_at,
        raw=raw,
        terminated=row.terminated,
        chat_id=row.chat_id,
        message=message,
        parse_error=parse_error,
    )
    return known_line(line)


def replace_rows(
    conn: sa.Connection,
    keys: Sequence[JobAttempt],
    transcripts: Iterable[Transcript],
    *,
    clean: Collection[JobAttempt] = (),
) -> None:
    """Replaces the derived rows of the attempts ``keys`` and records them in ``jobs``.

    ``jobs.normalised_attempt`` becomes the largest attempt normalised; ``jobs.chat_id`` is
    filled from the transcript when it is the job's current attempt and has none.

    ``tool_calls`` is written first, each transcript's rows as it comes from ``transcripts``:
    PostgreSQL takes in the tool payloads (the bulk of the bytes, parsed to ``jsonb`` and
    compressed) while the next attempts are still being normalised. The other tables follow.

    Args:
        conn: A connection inside the batch's transaction.
        keys: The attempts, as (job id, attempt).
        transcripts: Their normalised transcripts, in the same order; may be produced lazily.
        clean: Attempts whose every line is clean
            (:func:`pipeline.archive.parsed.parsed_clean`): their rows skip the text and JSON
            cleaning (the line was parsed once, in the sink's decode; cleaning would serialise
            and parse every payload again).

    Raises:
        psycopg.DataError, psycopg.IntegrityError: PostgreSQL refused a row (the caller's
            savepoint isolates the attempt).
    """
    for table in DERIVED_TABLES:
        for chunk in chunks(list(keys)):
            p = pairs_of(chunk)
            conn.execute(
                table.delete().where(table.c.job_id == p.c.job_id, table.c.attempt == p.c.attempt)
            )
    done: list[Transcript] = []

    def calls() -> Iterator[tuple[dict[str, Any], bool]]:
        for t in transcripts:
            done.append(t)
            tidy = (t.job_id, t.attempt) in clean
            for c in t.tool_calls:
                yield c.to_row(), tidy

    _insert(conn, tool_calls, calls())
    tidy = {(t.job_id, t.attempt): (t.job_id, t.attempt) in clean for t in done}
    _insert(
        conn,
        messages,
        ((m.to_row(), tidy[m.job_id, m.attempt]) for t in done for m in t.messages),
    )
    _insert(
        conn,
        sql_queries,
        ((q.to_row(), tidy[q.job_id, q.attempt]) for t in done for q in t.sql_queries),
    )
    _insert(conn, answers, ((t.answer.to_row(), tidy[t.job_id, t.attempt]) for t in done))
    attempt, chat_id = (
        sa.bindparam("n_attempt", type_=sa.Integer),
        sa.bindparam("n_chat_id", type_=sa.Text),
    )
    current = jobs.c.last_attempt == attempt
    update = (
        jobs.update()
        .where(jobs.c.job_id == sa.bindparam("n_job_id"))
        .values(
            normalised_attempt=sa.func.greatest(jobs.c.normalised_attempt, attempt),
            chat_id=sa.case(
                (current, sa.func.coalesce(jobs.c.chat_id, chat_id)), else_=jobs.c.chat_id
            ),
            updated_at=sa.func.now(),
        )
    )
    params = [
        {"n_job_id": t.job_id, "n_attempt": t.attempt, "n_chat_id": storable(t.chat_id)}
        for t in done
    ]
    conn.execute(update, params)


def _insert(
    conn: sa.Connection, table: sa.Table, rows: Iterable[tuple[dict[str, Any], bool]]
) -> None:
    """``COPY``s the rows (cleaned by :func:`storable_row`) into ``table`` as they come.

    ``rows`` are ``(row, parsed_clean)`` pairs (:func:`storable_row`'s flag), all with the
    columns of the first.

    The attempts' old rows were deleted just before in the same transaction, so nothing can
    conflict; ``COPY`` skips SQLAlchemy's per-value processing and the multi-row ``INSERT``
    text psycopg would otherwise parse again per batch (bench ``e2e``). ``jsonb`` values go
    as :class:`psycopg.types.json.Jsonb`, the rest through psycopg's text adaptation; columns
    a row leaves out take their defaults. psycopg sends what is written in chunks, so the
    server works on the first rows while later ones are still produced. Source:
    https://www.psycopg.org/psycopg3/docs/basic/copy.html.

    Raises:
        psycopg.DataError, psycopg.IntegrityError: PostgreSQL refused a row (the caller's
            savepoint isolates the attempt).
    """
    stored = (storable_row(row, parsed_clean=tidy) for row, tidy in rows)
    first = next(stored, None)
    if first is None:
        return
    columns = list(first)
    json_columns = {c for c in columns if isinstance(table.c[c].type, JSONB)}
    target = f'"{table.name}"'  # in the connection's search_path (engine.create_engine)
    names = ", ".join(f'"{c}"' for c in columns)
    statement = f"COPY {target} ({names}) FROM STDIN"
    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection), "archive needs the psycopg 3 driver"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in itertools.chain([first], stored):
            copy.write_row(
                [
                    Jsonb(row[c], dumps=jsonb_text)
                    if c in json_columns and row[c] is not None
                    else row.get(c)
                    for c in columns
                ]
            )


def jsonb_text(value: Any) -> bytes:
    """Returns: ``value`` as JSON text for a ``jsonb`` column, written by orjson.

    The derived rows' payloads are written back as JSON for ``COPY`` (psycopg's ``Jsonb``); with
    the stdlib's ``json.dumps`` that was a third of the write's CPU (bench ``sink``). orjson
    refuses what it cannot write exactly (integers beyond 64 bits, keys that are not strings):
    those values take ``json.dumps``. PostgreSQL normalises ``jsonb`` either way. Source:
    https://github.com/ijl/orjson#serialize.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def pairs_of(chunk: Sequence[JobAttempt]) -> sa.TableValuedAlias:
    """Returns: ``unnest(job ids, attempts) AS pairs(job_id, attempt)`` to join with.

    A join with two arrays, not ``(job_id, attempt) IN ((..), ..)``: on the partitioned
    ``stream_lines`` (migration 0006) such a list becomes a ``BitmapOr`` of one index scan per
    pair per partition under a parallel plan, ~1 s per 100 pairs at 10M lines
    (``bench/archive_growth.py``), where the join probes each partition's key per pair.
    """
    return (
        sa.func.unnest(
            sa.cast(sa.literal([j for j, _ in chunk], ARRAY(sa.Text)), ARRAY(sa.Text)),
            sa.cast(sa.literal([a for _, a in chunk], ARRAY(sa.Integer)), ARRAY(sa.Integer)),
        )
        .table_valued(sa.column("job_id", sa.Text), sa.column("attempt", sa.Integer))
        .render_derived(name="pairs")
    )


def _cause(exc: Exception) -> object:
    return exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
