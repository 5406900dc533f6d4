"""Reviewers' verdicts: appended, never updated, chained by hash; and their verification.

A database module (SQLAlchemy) around pure hashing. Verdict number ``seq`` (1, 2, ... without a
gap, over the whole archive) is a row of ``review_verdicts`` (migration 0008)::

    document_n = canonical JSON of the row's fields (:data:`HASHED`; ``created_at`` as µs since
                 the epoch, UTC; sorted keys, no spaces, ASCII)
    hash_n     = sha256(hash_{n-1} + document_n)          # hash_0 = 32 zero bytes

A changed verdict is a new row whose ``supersedes`` names the reviewer's previous verdict on the
same job in the same queue; the latest row of a job is its verdict. :func:`append` takes a
transaction-scoped advisory lock, reads the head and inserts the next row, so concurrent
reviewers never fork the chain. A trigger refuses ``UPDATE``, ``DELETE`` and ``TRUNCATE``; a
row changed anyway (the trigger disabled, ``session_replication_role = replica``) is found by
:func:`check`: a field edited (``verdict_changed``), a hash recomputed (``verdict_chain_broken``
at the next row), a row removed (``verdict_missing``: a gap in ``seq``).

Anchor: the last row of the chain can be removed without a trace inside PostgreSQL. With
``CHATSCRIBE_CHAIN_ANCHOR_DIR`` set, each verdict's ``seq`` and ``hash`` are also appended to
``<dir>/verdicts.jsonl`` before the transaction commits (as seals are,
:mod:`pipeline.archive.seals`); :func:`check` then requires every anchored verdict to be in the
archive with the anchored hash (``verdict_anchor_mismatch``, ``verdict_missing``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa

from pipeline.archive.seals import append_durably
from pipeline.errors import ArchiveUnavailableError, ChainAnchorError

GENESIS: Final = bytes(32)
"""The hash before verdict 1."""
ANCHOR_FILE: Final = "verdicts.jsonl"
LOCK_KEY: Final = 0x7665726469637473
"""The advisory lock serialising appends (``'verdicts'`` as a 64-bit integer)."""
HASHED: Final = (
    "seq",
    "queue_id",
    "job_id",
    "attempt",
    "pair_job_id",
    "reviewer",
    "verdict",
    "labels",
    "comment",
    "expected",
    "supersedes",
    "created_at",
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Verdict:
    """One reviewer's verdict on one answer (or on a pair of answers).

    Attributes:
        queue_id: The queue it was given in.
        job_id: The job reviewed (run A's job in a pairwise queue).
        attempt: The job's attempt the reviewer saw (its last).
        reviewer: The reviewer's name.
        verdict: One of :data:`models.archive.VERDICTS` or, with ``pair_job_id``, of
            :data:`models.archive.PAIRWISE_VERDICTS`.
        labels: Free labels, e.g. ``["wrong-filter"]``.
        comment: Free text.
        expected: The expected result the reviewer gave: ``{"rows": [[cell, ...], ...]}``
            (the shape of a questions file's ``expected``), or None.
        pair_job_id: Run B's job of a pairwise verdict.
    """

    queue_id: str
    job_id: str
    attempt: int
    reviewer: str
    verdict: str
    labels: tuple[str, ...] = ()
    comment: str | None = None
    expected: dict[str, Any] | None = None
    pair_job_id: str | None = None


@dataclass(frozen=True)
class StoredVerdict:
    """A row of ``review_verdicts``: the verdict and its place in the chain."""

    seq: int
    verdict: Verdict
    supersedes: int | None
    created_at: datetime
    prev_hash: bytes
    hash: bytes

    def document(self) -> bytes:
        """Returns: the canonical JSON the hash covers (module docstring)."""
        v = self.verdict
        values = {
            **asdict(v),
            "labels": list(v.labels),
            "seq": self.seq,
            "supersedes": self.supersedes,
            "created_at": micros(self.created_at),
        }
        fields = {k: values[k] for k in HASHED}
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("ascii")


def micros(at: datetime) -> int:
    """Returns: ``at`` as whole microseconds since the Unix epoch (UTC)."""
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def link(prev_hash: bytes, document: bytes) -> bytes:
    """Returns: sha256(``prev_hash`` + ``document``), 32 bytes."""
    return hashlib.sha256(prev_hash + document).digest()


_HEAD: Final = "SELECT seq, hash FROM review_verdicts ORDER BY seq DESC LIMIT 1"
_PREVIOUS: Final = """
SELECT max(seq) FROM review_verdicts
WHERE queue_id = :queue_id AND job_id = :job_id AND reviewer = :reviewer
"""
_INSERT: Final = """
INSERT INTO review_verdicts (seq, queue_id, job_id, attempt, pair_job_id, reviewer, verdict,
  labels, comment, expected, supersedes, created_at, prev_hash, hash)
VALUES (:seq, :queue_id, :job_id, :attempt, :pair_job_id, :reviewer, :verdict,
  CAST(:labels AS text[]), :comment, CAST(:expected AS jsonb), :supersedes, :created_at,
  :prev_hash, :hash)
"""


def append(
    conn: sa.Connection, verdict: Verdict, *, anchor: VerdictAnchor | None = None
) -> StoredVerdict:
    """Appends ``verdict`` as the next row of the chain, in the caller's transaction.

    Args:
        conn: A writable connection inside a transaction (the lock is held until it ends).
        verdict: The verdict (checked by the caller: :func:`pipeline.archive.reviews.give`).
        anchor: The anchor file, appended before the caller commits (None: not anchored).

    Returns:
        The stored row.

    Raises:
        ArchiveUnavailableError: The anchor file could not be written.
    """
    if verdict.expected is not None:  # hashed as PostgreSQL gives it back (1e20 -> 100...0)
        stored_value = conn.execute(
            sa.text("SELECT CAST(:value AS jsonb)"), {"value": json.dumps(verdict.expected)}
        ).scalar()
        verdict = dataclasses.replace(verdict, expected=stored_value)
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
    head = conn.execute(sa.text(_HEAD)).first()
    seq, prev_hash = (head.seq + 1, bytes(head.hash)) if head is not None else (1, GENESIS)
    keys = {"queue_id": verdict.queue_id, "job_id": verdict.job_id, "reviewer": verdict.reviewer}
    supersedes = conn.execute(sa.text(_PREVIOUS), keys).scalar()
    unhashed = StoredVerdict(seq, verdict, supersedes, datetime.now(UTC), prev_hash, b"")
    stored = StoredVerdict(**{**unhashed.__dict__, "hash": link(prev_hash, unhashed.document())})
    row = {
        **asdict(verdict),
        "labels": list(verdict.labels),
        "expected": json.dumps(verdict.expected) if verdict.expected is not None else None,
        "seq": seq,
        "supersedes": supersedes,
        "created_at": stored.created_at,
        "prev_hash": prev_hash,
        "hash": stored.hash,
    }
    conn.execute(sa.text(_INSERT), row)
    if anchor is not None:
        anchor.append(stored)
    return stored


def head_seq(conn: sa.Connection) -> int:
    """Returns: the ``seq`` of the newest verdict (0: none), a cache key for scores."""
    row = conn.execute(sa.text(_HEAD)).first()
    return int(row.seq) if row is not None else 0


_ROWS: Final = "SELECT * FROM review_verdicts ORDER BY seq"


def stored_of(row: Any) -> StoredVerdict:
    """Returns: a ``review_verdicts`` row as a :class:`StoredVerdict`."""
    verdict = Verdict(
        queue_id=row.queue_id,
        job_id=row.job_id,
        attempt=row.attempt,
        reviewer=row.reviewer,
        verdict=row.verdict,
        labels=tuple(row.labels or ()),
        comment=row.comment,
        expected=row.expected,
        pair_job_id=row.pair_job_id,
    )
    return StoredVerdict(
        row.seq, verdict, row.supersedes, row.created_at, bytes(row.prev_hash), bytes(row.hash)
    )


Finding = tuple[str, int, int | None, str, str]
"""``(job_id, 0, seq, kind, detail)``: a problem, shaped as :data:`pipeline.archive.seals.
Finding` (``seq`` where a line number goes)."""


@dataclass
class VerdictCheck:
    """What :func:`check` found: verdicts checked, anchored verdicts matched, problems."""

    verdicts: int = 0
    anchored: int | None = None
    findings: list[Finding] = field(default_factory=list)


def check(
    conn: sa.Connection, *, anchor: VerdictAnchor | None, jobs: set[str] | None = None
) -> VerdictCheck:
    """Walks the whole verdict chain and reports each row edited, re-hashed or removed.

    Args:
        conn: Any connection (read only).
        anchor: The anchor file, or None.
        jobs: Report only findings about these jobs (``verify --run/--job``); None: all.

    Returns:
        ``verdict_changed`` (the row's fields no longer give its hash), ``verdict_chain_broken``
        (its ``prev_hash`` is not the previous row's hash), ``verdict_missing`` (a gap in
        ``seq``, or an anchored verdict gone), ``verdict_anchor_mismatch``.

    Raises:
        ChainAnchorError: The anchor file exists but cannot be read.
    """
    out = VerdictCheck()
    previous: StoredVerdict | None = None
    by_seq: dict[int, StoredVerdict] = {}
    for row in conn.execute(sa.text(_ROWS)):
        stored = stored_of(row)
        by_seq[stored.seq] = stored
        out.findings.extend(_compare(previous, stored))
        previous = stored
    out.verdicts = len(by_seq)
    if anchor is not None:
        out.anchored = _against_anchor(anchor, by_seq, out.findings)
    if jobs is not None:
        out.findings = [f for f in out.findings if f[0] in jobs]
    return out


def _compare(previous: StoredVerdict | None, stored: StoredVerdict) -> list[Finding]:
    found: list[Finding] = []
    job, seq = stored.verdict.job_id, stored.seq
    expected_seq = previous.seq + 1 if previous is not None else 1
    expected_prev = previous.hash if previous is not None else GENESIS
    if seq != expected_seq:
        detail = f"verdicts {expected_seq}..{seq - 1} missing before it: rows were deleted"
        found.append((job, 0, seq, "verdict_missing", detail))
    if stored.prev_hash != expected_prev:
        detail = "prev_hash is not the previous verdict's hash: a verdict before it changed"
        found.append((job, 0, seq, "verdict_chain_broken", detail))
    if link(stored.prev_hash, stored.document()) != stored.hash:
        detail = (
            f"verdict {stored.verdict.verdict!r} by {stored.verdict.reviewer} differs from the"
            " one hashed when it was given: the row was edited"
        )
        found.append((job, 0, seq, "verdict_changed", detail))
    return found


@dataclass(frozen=True)
class VerdictAnchor:
    """The append-only file of verdict hashes outside PostgreSQL (module docstring).

    Args:
        directory: ``CHATSCRIBE_CHAIN_ANCHOR_DIR``; the file is ``<directory>/verdicts.jsonl``.
    """

    directory: Path

    @property
    def path(self) -> Path:
        """The anchor file."""
        return self.directory / ANCHOR_FILE

    def append(self, stored: StoredVerdict) -> None:
        """Appends ``{"seq", "job_id", "hash"}`` as one line (``O_APPEND``), then fsyncs.

        Raises:
            ArchiveUnavailableError: The file could not be written.
        """
        record = {"seq": stored.seq, "job_id": stored.verdict.job_id, "hash": stored.hash.hex()}
        data = (json.dumps(record, sort_keys=True) + "\n").encode()
        try:
            append_durably(self.path, data)
        except OSError as exc:
            raise ArchiveUnavailableError(f"verdict anchor {self.path} not written: {exc}") from exc

    def read(self) -> Sequence[dict[str, Any]]:
        """Returns: the anchored records, in file order (a missing file: none).

        Raises:
            ChainAnchorError: The file exists but cannot be read or holds a line that is not a
                record.
        """
        try:
            text = self.path.read_bytes() if self.path.exists() else b""
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            raise ChainAnchorError(str(exc), path=self.path) from exc


def _against_anchor(
    anchor: VerdictAnchor, by_seq: dict[int, StoredVerdict], found: list[Finding]
) -> int:
    matched = 0
    for record in anchor.read():
        seq, job = int(record["seq"]), str(record["job_id"])
        stored = by_seq.get(seq)
        if stored is None:
            detail = f"anchored in {anchor.path} but not in the archive: the row was deleted"
            found.append((job, 0, seq, "verdict_missing", detail))
        elif stored.hash.hex() != record["hash"]:
            detail = f"the archive's hash differs from the one anchored in {anchor.path}"
            found.append((job, 0, seq, "verdict_anchor_mismatch", detail))
        else:
            matched += 1
    return matched
