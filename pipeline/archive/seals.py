"""Seals of complete attempts, their anchor outside PostgreSQL, and late lines refused.

A database module (SQLAlchemy). The line chain (:mod:`pipeline.archive.chain`) covers the raw
lines as received; a seal covers what people read of an attempt once it is complete. For a
normalised (job, attempt), computed inside PostgreSQL by one query (:data:`_MEASURE`), so the
sink and ``chatscribe verify`` hash the very same text::

    line_count  the largest ``line_count`` of its terminal events
    head        chain_hash of line ``line_count``: the whole chain, original bytes included
    redacted    {line_no: [redaction, sha256(raw as stored)]} of every redacted/deleted line:
                the redaction record (the original's hash stays in ``raw_sha256``)
    job         sha256 of the job's identity columns (:data:`JOB_COLUMNS`: who asked what,
                with which session settings) as ``jsonb`` text
    derived     {table: sha256 of its rows as jsonb text, in key order} for ``messages``,
                ``tool_calls``, ``sql_queries`` and ``answers`` (``normalised_at`` and
                ``published_at``, written later by the outbox, left out)
    seal        sha256 of the canonical JSON of all of the above (:meth:`SealParts.seal`)

Written into ``attempt_seals`` (migration 0007) when the sink normalises an attempt (reason
``normalised``), again when a later event changes the job's identity columns
(``job_changed``) and when ``retention apply`` changes content (``redacted``, ``deleted``).
``chatscribe verify`` measures every sealed attempt again and names each part that differs.

Anchor (:class:`Anchor`): someone who can rewrite the database can also recompute every hash.
With ``CHATSCRIBE_CHAIN_ANCHOR_DIR`` set, each seal is also appended, inside the writing
transaction before it commits, as one JSON line to ``<dir>/seals.jsonl`` (opened
``O_APPEND``; make the directory writable only by the sink and the retention job, or
``chattr +a`` the file). ``verify`` then requires the archive's seal of every attempt to be the
last one the anchor holds for it, and every anchored attempt to still have its seal, so a chain
and seal rewritten consistently inside PostgreSQL, or an attempt removed, is caught.

Late lines (:func:`late_lines`): a ``chat.lines`` record whose line number is past its attempt's
``line_count`` (a terminal event archived), or that differs from the line already stored for a
sealed attempt, is refused: the writer raises
:class:`~pipeline.errors.ArchiveRejectedError`, and the sink isolates the record and
dead-letters it with the reason. The same bytes again (a redelivery) are dropped as duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa

from models.records import LineEnvelope
from pipeline.errors import ArchiveUnavailableError, ChainAnchorError

JobAttempt = tuple[str, int]
LineKey = tuple[str, int, int]

ANCHOR_FILE: Final = "seals.jsonl"
JOB_COLUMNS: Final = (
    "job_id",
    "run_id",
    "persona",
    "question",
    "session_settings",
    "identity",
    "chat_url",
    "active_branch_name",
)
"""The ``jobs`` columns a seal covers: the job's identity, question and session settings."""
DERIVED: Final = ("messages", "tool_calls", "sql_queries", "answers")
_UNSEALED_ANSWER_COLUMNS: Final = ("normalised_at", "published_at")
_TERMINAL: Final = "('completed', 'failed', 'aborted')"
_PAIRS: Final = "unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS t(job_id, attempt)"


def _derived_sql(table: str) -> str:
    row = f"to_jsonb(d){''.join(f' - {c!r}' for c in _UNSEALED_ANSWER_COLUMNS)}"
    value = row if table == "answers" else "to_jsonb(d)"
    order = "" if table == "answers" else " ORDER BY d.message_id"
    return (
        f"'{table}', encode(sha256(convert_to(coalesce((SELECT string_agg(({value})::text,"
        f" E'\\n'{order}) FROM {table} d WHERE d.job_id = t.job_id AND d.attempt = t.attempt),"
        " ''), 'UTF8')), 'hex')"
    )


_MEASURE: Final = f"""
SELECT t.job_id, t.attempt, c.line_count,
  (SELECT s.chain_hash FROM stream_lines s WHERE s.job_id = t.job_id AND s.attempt = t.attempt
     AND s.line_no = c.line_count ORDER BY s.chain_hash IS NULL, s.partition_at LIMIT 1) AS head,
  (SELECT coalesce(jsonb_object_agg(s.line_no::text,
     jsonb_build_array(s.redaction, encode(sha256(s.raw), 'hex'))), '{{}}'::jsonb)
   FROM stream_lines s WHERE s.job_id = t.job_id AND s.attempt = t.attempt
     AND s.redaction IS NOT NULL) AS redacted,
  (SELECT sha256(convert_to(jsonb_build_object(
     {", ".join(f"'{c}', j.{c}" for c in JOB_COLUMNS)})::text, 'UTF8'))
   FROM jobs j WHERE j.job_id = t.job_id) AS job_sha256,
  jsonb_build_object({", ".join(_derived_sql(table) for table in DERIVED)}) AS derived
FROM {_PAIRS}
LEFT JOIN LATERAL (SELECT max(e.line_count) AS line_count FROM job_events e
  WHERE e.job_id = t.job_id AND e.attempt = t.attempt AND e.kind IN {_TERMINAL}
  AND e.line_count IS NOT NULL) AS c ON true
"""
_UPSERT: Final = """
INSERT INTO attempt_seals (job_id, attempt, line_count, head, redacted, job_sha256, derived,
                           seal, reason, sealed_at)
VALUES (:job_id, :attempt, :line_count, :head, CAST(:redacted AS jsonb), :job_sha256,
        CAST(:derived AS jsonb), :seal, :reason, now())
ON CONFLICT (job_id, attempt) DO UPDATE SET line_count = excluded.line_count,
  head = excluded.head, redacted = excluded.redacted, job_sha256 = excluded.job_sha256,
  derived = excluded.derived, seal = excluded.seal, reason = excluded.reason,
  sealed_at = excluded.sealed_at
"""


@dataclass(frozen=True)
class SealParts:
    """What a seal covers, for one attempt (module docstring).

    Attributes:
        line_count: Lines of the attempt (0 when no terminal event gave a count).
        head: ``chain_hash`` of line ``line_count`` (None: missing or unchained).
        redacted: ``{"line_no": [redaction, sha256 hex of raw as stored]}``.
        job_sha256: Hash of the job's :data:`JOB_COLUMNS` (None: no ``jobs`` row).
        derived: ``{table: sha256 hex of its rows}`` for :data:`DERIVED`.
    """

    job_id: str
    attempt: int
    line_count: int
    head: bytes | None
    redacted: dict[str, list[str | None]]
    job_sha256: bytes | None
    derived: dict[str, str]

    def seal(self) -> bytes:
        """Returns: sha256 (32 bytes) of the parts as canonical JSON (sorted keys, no spaces)."""
        document = {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "line_count": self.line_count,
            "head": _hex(self.head),
            "redacted": self.redacted,
            "job": _hex(self.job_sha256),
            "derived": self.derived,
        }
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("ascii")).digest()


@dataclass(frozen=True)
class SealRecord:
    """One anchored seal: a line of the anchor file.

    Attributes:
        run_id: The job's run (``verify --run`` scopes the anchor by it).
        seal: :meth:`SealParts.seal`, hex.
        reason: A :data:`models.archive.SEAL_REASONS` value.
    """

    job_id: str
    attempt: int
    run_id: str | None
    seal: str
    reason: str
    at: str

    def to_line(self) -> bytes:
        """Returns: the record as one JSON line with its newline."""
        return (json.dumps(self.__dict__, sort_keys=True) + "\n").encode()


def _hex(value: bytes | None) -> str | None:
    return value.hex() if value is not None else None


def measure(conn: sa.Connection, pairs: Iterable[JobAttempt]) -> dict[JobAttempt, SealParts]:
    """Returns: the seal parts of each attempt among ``pairs``, as stored now."""
    todo = sorted(set(pairs))
    if not todo:
        return {}
    params = {"jobs": [p[0] for p in todo], "attempts": [p[1] for p in todo]}
    out = {}
    for r in conn.execute(sa.text(_MEASURE), params):
        out[(r.job_id, r.attempt)] = SealParts(
            job_id=r.job_id,
            attempt=r.attempt,
            line_count=r.line_count or 0,
            head=bytes(r.head) if r.head is not None else None,
            redacted=dict(r.redacted),
            job_sha256=bytes(r.job_sha256) if r.job_sha256 is not None else None,
            derived=dict(r.derived),
        )
    return out


def seal_attempts(
    conn: sa.Connection,
    pairs: Iterable[JobAttempt],
    *,
    reason: str,
    only_changed: bool = False,
) -> list[SealRecord]:
    """Seals (again) each attempt among ``pairs``, in the caller's transaction.

    Args:
        conn: Inside the transaction that changed the attempts (job locks held by the sink).
        pairs: (job id, attempt) pairs.
        reason: A :data:`models.archive.SEAL_REASONS` value.
        only_changed: Seal only attempts already sealed whose seal would change.

    Returns:
        The records to anchor (:meth:`Anchor.append`).
    """
    parts = measure(conn, pairs)
    if only_changed:
        stored = stored_seals(conn, parts)
        parts = {p: x for p, x in parts.items() if p in stored and stored[p] != x.seal()}
    if not parts:
        return []
    runs = _runs(conn, {job_id for job_id, _ in parts})
    at = datetime.now(UTC).isoformat()
    rows, records = [], []
    for (job_id, attempt), x in sorted(parts.items()):
        seal = x.seal()
        rows.append(_row(x, seal, reason))
        records.append(SealRecord(job_id, attempt, runs.get(job_id), seal.hex(), reason, at))
    conn.execute(sa.text(_UPSERT), rows)
    return records


def _row(x: SealParts, seal: bytes, reason: str) -> dict[str, Any]:
    return {
        "job_id": x.job_id,
        "attempt": x.attempt,
        "line_count": x.line_count,
        "head": x.head,
        "redacted": json.dumps(x.redacted),
        "job_sha256": x.job_sha256,
        "derived": json.dumps(x.derived),
        "seal": seal,
        "reason": reason,
    }


def sealed_of_jobs(conn: sa.Connection, job_ids: Iterable[str]) -> list[JobAttempt]:
    """Returns: the sealed attempts of ``job_ids``."""
    ids = sorted(set(job_ids))
    if not ids:
        return []
    rows = conn.execute(
        sa.text("SELECT job_id, attempt FROM attempt_seals WHERE job_id = ANY(:jobs)"),
        {"jobs": ids},
    )
    return [(r.job_id, r.attempt) for r in rows]


def stored_seals(conn: sa.Connection, pairs: Iterable[JobAttempt]) -> dict[JobAttempt, bytes]:
    """Returns: the stored ``seal`` of each sealed attempt among ``pairs``."""
    todo = sorted(set(pairs))
    if not todo:
        return {}
    query = (
        "SELECT s.job_id, s.attempt, s.seal FROM attempt_seals s"
        f" JOIN {_PAIRS} USING (job_id, attempt)"
    )
    params = {"jobs": [p[0] for p in todo], "attempts": [p[1] for p in todo]}
    return {(r.job_id, r.attempt): bytes(r.seal) for r in conn.execute(sa.text(query), params)}


def _runs(conn: sa.Connection, job_ids: set[str]) -> dict[str, str | None]:
    rows = conn.execute(
        sa.text("SELECT job_id, run_id FROM jobs WHERE job_id = ANY(:jobs)"),
        {"jobs": sorted(job_ids)},
    )
    return {r.job_id: r.run_id for r in rows}


# -- late lines ---------------------------------------------------------------------------------

_ENDS: Final = f"""
SELECT t.job_id, t.attempt, c.line_count,
  EXISTS (SELECT 1 FROM attempt_seals s WHERE s.job_id = t.job_id AND s.attempt = t.attempt)
    AS sealed
FROM {_PAIRS}
JOIN LATERAL (SELECT max(e.line_count) AS line_count FROM job_events e
  WHERE e.job_id = t.job_id AND e.attempt = t.attempt AND e.kind IN {_TERMINAL}
  AND e.line_count IS NOT NULL) AS c ON c.line_count IS NOT NULL
"""


def late_lines(
    conn: sa.Connection, lines: Sequence[LineEnvelope]
) -> tuple[list[LineEnvelope], dict[LineKey, str]]:
    """Sorts out the lines that arrive after their attempt ended (module docstring).

    Args:
        conn: Inside the batch's transaction, after its events were inserted.
        lines: The batch's lines.

    Returns:
        ``(lines to write, {key: reason} of the lines refused)``; a line a sealed attempt
        already holds with the same bytes is in neither (a duplicate).
    """
    pairs = sorted({(x.job_id, x.attempt) for x in lines})
    if not pairs:
        return list(lines), {}
    params = {"jobs": [p[0] for p in pairs], "attempts": [p[1] for p in pairs]}
    ends = {
        (r.job_id, r.attempt): (r.line_count, r.sealed)
        for r in conn.execute(sa.text(_ENDS), params)
    }
    if not ends:
        return list(lines), {}
    stored = _stored_digests(conn, [p for p, (_, sealed) in ends.items() if sealed])
    keep: list[LineEnvelope] = []
    refused: dict[LineKey, str] = {}
    for x in lines:
        end = ends.get((x.job_id, x.attempt))
        key = (x.job_id, x.attempt, x.line_no)
        if end is None:
            keep.append(x)
        elif x.line_no > end[0]:
            refused[key] = (
                f"line {x.line_no} of job {x.job_id} attempt {x.attempt} arrived after the"
                f" attempt ended with {end[0]} lines; refused, not merged into its transcript"
            )
        elif not end[1]:
            keep.append(x)  # a line the attempt still waits for
        elif stored.get(key) != hashlib.sha256(x.raw).digest():
            refused[key] = (
                f"line {x.line_no} of job {x.job_id} attempt {x.attempt} differs from the line"
                " archived for that sealed attempt; refused"
            )
    return keep, refused


def _stored_digests(conn: sa.Connection, pairs: list[JobAttempt]) -> dict[LineKey, bytes]:
    if not pairs:
        return {}
    query = (
        f"SELECT s.job_id, s.attempt, s.line_no, s.raw_sha256 FROM stream_lines s"
        f" JOIN {_PAIRS} USING (job_id, attempt)"
    )
    params = {"jobs": [p[0] for p in pairs], "attempts": [p[1] for p in pairs]}
    rows = conn.execute(sa.text(query), params)
    return {
        (r.job_id, r.attempt, r.line_no): bytes(r.raw_sha256)
        for r in rows
        if r.raw_sha256 is not None
    }


# -- anchor -------------------------------------------------------------------------------------


def append_durably(path: Path, data: bytes) -> None:
    """Appends ``data`` to ``path`` with one ``write`` on an ``O_APPEND`` descriptor, then fsyncs.

    Creates the file (mode 0640) and its folder when missing.

    Raises:
        OSError: The folder or file could not be made or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Anchor:
    """The append-only file of seals outside PostgreSQL (module docstring).

    Args:
        directory: ``CHATSCRIBE_CHAIN_ANCHOR_DIR``; the file is ``<directory>/seals.jsonl``.
    """

    directory: Path

    @property
    def path(self) -> Path:
        """The anchor file."""
        return self.directory / ANCHOR_FILE

    def append(self, records: Sequence[SealRecord]) -> None:
        """Appends ``records`` with one ``write`` on an ``O_APPEND`` descriptor, then fsyncs.

        Raises:
            ArchiveUnavailableError: The file could not be written (transient for the sink:
                its transaction rolls back and the batch is retried).
        """
        if not records:
            return
        try:
            append_durably(self.path, b"".join(r.to_line() for r in records))
        except OSError as exc:
            raise ArchiveUnavailableError(f"chain anchor {self.path} not written: {exc}") from exc

    def read(self) -> tuple[dict[JobAttempt, SealRecord], list[str]]:
        """Reads the file (missing: empty).

        Returns:
            ``(last record per attempt, problems)``; a problem per line that is not a record.

        Raises:
            ChainAnchorError: The file exists but cannot be read.
        """
        try:
            text = self.path.read_bytes() if self.path.exists() else b""
        except OSError as exc:
            raise ChainAnchorError(str(exc), path=self.path) from exc
        last: dict[JobAttempt, SealRecord] = {}
        problems = []
        for n, line in enumerate(text.splitlines(), start=1):
            try:
                record = SealRecord(**json.loads(line))
            except (ValueError, TypeError) as exc:
                problems.append(f"{self.path} line {n} is not a seal record: {exc}")
                continue
            last[(record.job_id, record.attempt)] = record
        return last, problems


# -- verification -------------------------------------------------------------------------------

Finding = tuple[str, int, int | None, str, str]
"""``(job_id, attempt, line_no or None, kind, detail)``: one problem :func:`check` found."""

_SEALED: Final = """
SELECT s.job_id, s.attempt, s.line_count, s.head, s.redacted, s.job_sha256, s.derived, s.seal,
       s.reason
FROM attempt_seals s LEFT JOIN jobs j USING (job_id) WHERE {where} ORDER BY s.job_id, s.attempt
"""
_UNSEALED: Final = """
SELECT a.job_id, a.attempt FROM answers a LEFT JOIN jobs j USING (job_id)
WHERE {where} AND NOT EXISTS (SELECT 1 FROM attempt_seals s
  WHERE s.job_id = a.job_id AND s.attempt = a.attempt)
ORDER BY a.job_id, a.attempt
"""


@dataclass
class SealCheck:
    """What :func:`check` found.

    Attributes:
        sealed: Sealed attempts checked.
        anchored: Attempts whose seal the anchor holds (None: no anchor configured).
        findings: Problems (:data:`Finding`).
    """

    sealed: int = 0
    anchored: int | None = None
    findings: list[Finding] | None = None


def check(
    conn: sa.Connection,
    *,
    where: str,
    params: dict[str, Any],
    anchor: Anchor | None,
    run_id: str | None = None,
    job_id: str | None = None,
) -> SealCheck:
    """Measures every sealed attempt in scope again and compares it with its seal and anchor.

    Args:
        conn: Any connection (read only).
        where: The scope: a condition on ``jobs`` aliased ``j``.
        params: Its parameters.
        anchor: The anchor file, or None when none is configured.
        run_id: The scope's run, applied to the anchor's records.
        job_id: The scope's job, likewise.

    Returns:
        The counts and findings: ``unsealed`` (a normalised attempt without a seal),
        ``seal_changed``, ``head_changed``, ``redaction_changed`` (per line), ``job_changed``,
        ``derived_changed`` (per table), ``unanchored``, ``anchor_mismatch``,
        ``seal_missing`` (anchored, no longer in the archive), ``anchor_unreadable``.

    Raises:
        ChainAnchorError: The anchor file exists but cannot be read.
    """
    out = SealCheck(findings=[])
    found = out.findings
    assert found is not None
    for r in conn.execute(sa.text(_UNSEALED.format(where=where)), params):
        found.append((r.job_id, r.attempt, None, "unsealed", "normalised but never sealed"))
    rows = list(conn.execute(sa.text(_SEALED.format(where=where)), params))
    now = measure(conn, [(r.job_id, r.attempt) for r in rows])
    for r in rows:
        found.extend(_compare(r, now.get((r.job_id, r.attempt))))
    out.sealed = len(rows)
    if anchor is not None:
        out.anchored = _against_anchor(anchor, rows, found, run_id=run_id, job_id=job_id)
    return out


def _compare(r: Any, now: SealParts | None) -> list[Finding]:
    pair = (r.job_id, r.attempt)
    out: list[Finding] = []

    def finding(kind: str, detail: str, line_no: int | None = None) -> None:
        out.append((*pair, line_no, kind, detail))

    stored = SealParts(
        r.job_id,
        r.attempt,
        r.line_count,
        bytes(r.head) if r.head is not None else None,
        dict(r.redacted),
        bytes(r.job_sha256) if r.job_sha256 is not None else None,
        dict(r.derived),
    )
    if stored.seal() != bytes(r.seal):
        finding("seal_changed", "the stored seal is not the hash of the stored seal parts")
    if now is None:
        return out
    if (now.line_count, now.head) != (stored.line_count, stored.head):
        finding("head_changed", "line count or chain head differs from the sealed one")
    for line in sorted(set(now.redacted) | set(stored.redacted), key=int):
        if now.redacted.get(line) != stored.redacted.get(line):
            finding("redaction_changed", _redaction_detail(stored, now, line), int(line))
    if now.job_sha256 != stored.job_sha256:
        finding("job_changed", f"the job's {', '.join(JOB_COLUMNS[1:])} differ from those sealed")
    for table in DERIVED:
        if now.derived.get(table) != stored.derived.get(table):
            finding("derived_changed", f"{table} rows differ from those sealed")
    return out


def _redaction_detail(stored: SealParts, now: SealParts, line: str) -> str:
    if line not in stored.redacted:
        return "marked redacted or deleted, but no redaction of this line was sealed"
    if line not in now.redacted:
        return "a sealed redaction's mark was removed"
    return "the stored bytes differ from those the sealed redaction wrote"


def _against_anchor(
    anchor: Anchor,
    rows: list[Any],
    found: list[Finding],
    *,
    run_id: str | None,
    job_id: str | None,
) -> int:
    anchored, problems = anchor.read()
    for problem in problems:
        found.append(("-", 0, None, "anchor_unreadable", problem))
    matched = 0
    seen = set()
    for r in rows:
        pair = (r.job_id, r.attempt)
        seen.add(pair)
        record = anchored.get(pair)
        if record is None:
            found.append((*pair, None, "unanchored", _unanchored(anchor, r.reason)))
        elif record.seal != bytes(r.seal).hex():
            found.append((*pair, None, "anchor_mismatch", _mismatch(anchor, record)))
        else:
            matched += 1
    for pair, record in sorted(anchored.items()):
        in_scope = (run_id is None or record.run_id == run_id) and (
            job_id is None or record.job_id == job_id
        )
        if in_scope and pair not in seen:
            detail = f"anchored ({record.reason}, {record.at}) but no seal in the archive"
            found.append((*pair, None, "seal_missing", detail))
    return matched


def _unanchored(anchor: Anchor, reason: str) -> str:
    if reason == "migrated":
        return f"sealed by migration 0007, before anchoring: not in the anchor {anchor.path}"
    return f"seal not in the anchor {anchor.path}"


def _mismatch(anchor: Anchor, record: SealRecord) -> str:
    return (
        f"the archive's seal differs from the last one anchored in {anchor.path}"
        f" ({record.reason}, {record.at}): rows were rewritten inside PostgreSQL"
    )
