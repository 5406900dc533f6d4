"""Tamper evidence: each attempt's stored lines chained by hash, and their verification.

A database module (SQLAlchemy) around pure hashing. For line ``n`` of a (job, attempt)::

    raw_sha256_n = sha256(raw as received)                       # before any redaction
    chain_hash_n = sha256(chain_hash_{n-1} + key_n + raw_sha256_n)   # chain_hash_0 = 32 zero bytes
    key_n        = "job_id␟attempt␟line_no␟received_at (µs since the epoch, UTC)␟terminated"

So a changed ``raw`` no longer matches ``raw_sha256``, and a changed key, receive time,
terminator flag or hash, an inserted or a removed line breaks every later ``chain_hash``.
Redaction and retention replace ``raw`` but keep ``raw_sha256`` (the hash of the original) and
mark the row (``redaction``), so the chain of a redacted attempt still verifies: only the
byte-for-byte check of ``raw`` is skipped for marked rows.

When lines are written (:func:`pipeline.archive.lines.write_lines`, inside the sink's
transaction, with the jobs' advisory locks held):

1. :func:`read_heads` finds each touched attempt's chain head: its highest chained line (chain
   hashes are only ever given in line order from 1, so that is the end of the chained prefix);
   one index probe per attempt, for the attempts whose head the writer does not know yet
   (:class:`KnownHeads`: at 1,000 open attempts a batch holds one or two lines of each, and
   the probes cost ~7 µs of PostgreSQL time per line).
2. :func:`extend` computes, in Python, the hashes of the batch's lines that continue a head
   without a gap; they go into the ``COPY`` with the line, so the fast path costs one sha256
   per line and no extra statement.
3. Lines that follow a gap (an earlier line still in flight: retries, another partition
   order, a sink restart) are stored with ``chain_hash`` NULL. :func:`link_pending` then picks
   up every unchained line of the touched attempts through the partial index
   ``ix_stream_lines_unchained`` (empty in the common case) and links those that now follow
   the head, so the chain completes in whichever batch fills the gap.

``chatscribe verify`` (:func:`verify`) requires every line of a complete attempt (a terminal
event gave its ``line_count``) to carry both hashes: a missing hash there is a problem, not
"unchained" (only lines of attempts still open may wait for a predecessor); a line numbered
past ``line_count`` is a problem too. Redacted rows skip the byte-for-byte check of ``raw``
here; their stored bytes are covered by the attempt's seal, and the rows people read (derived
rows, the job's identity) by the same seal, anchored outside PostgreSQL
(:mod:`pipeline.archive.seals`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa

from models.records import LineEnvelope
from pipeline.archive import seals as archive_seals
from pipeline.archive import verdicts as archive_verdicts

GENESIS: Final = bytes(32)
"""The ``chain_hash`` before line 1."""
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

JobAttempt = tuple[str, int]
LineKey = tuple[str, int, int]


def raw_sha256(raw: bytes) -> bytes:
    """Returns: sha256 of a line's bytes as received (32 bytes)."""
    return hashlib.sha256(raw).digest()


def line_key(
    job_id: str, attempt: int, line_no: int, received_at: datetime, terminated: bool
) -> bytes:
    """Returns: the key bytes hashed into a line's ``chain_hash`` (module docstring)."""
    at = received_at if received_at.tzinfo else received_at.replace(tzinfo=UTC)
    delta = at - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{job_id}\x1f{attempt}\x1f{line_no}\x1f{micros}\x1f{int(terminated)}".encode(
        "utf-8", "surrogatepass"
    )


def link(previous: bytes, key: bytes, digest: bytes) -> bytes:
    """Returns: ``sha256(previous + key + digest)``: one step of the chain."""
    return hashlib.sha256(previous + key + digest).digest()


def extend(
    lines: Sequence[LineEnvelope],
    heads: dict[JobAttempt, tuple[int, bytes]],
    digests: Mapping[LineKey, bytes] | None = None,
) -> dict[LineKey, bytes]:
    """Chains the batch's lines that continue their attempt's head without a gap (pure).

    Args:
        lines: The batch's lines (any order, duplicates allowed).
        heads: ``(job, attempt) → (last chained line_no, its chain_hash)``; missing: no line
            chained yet (head 0, :data:`GENESIS`). Updated in place to the new heads.
        digests: :func:`raw_sha256` of lines already hashed, by key (the last line of a key
            wins, as in ``lines``); the others are hashed here.

    Returns:
        ``(job, attempt, line_no) → chain_hash`` for every line chained.
    """
    by_key = {(x.job_id, x.attempt, x.line_no): x for x in lines}
    out: dict[LineKey, bytes] = {}
    for job_id, attempt, line_no in sorted(by_key):
        head_no, head_hash = heads.get((job_id, attempt), (0, GENESIS))
        if line_no != head_no + 1:
            continue
        x = by_key[(job_id, attempt, line_no)]
        key = line_key(job_id, attempt, line_no, x.received_at, x.terminated)
        digest = digests.get((job_id, attempt, line_no)) if digests is not None else None
        chained = link(head_hash, key, digest or raw_sha256(x.raw))
        out[(job_id, attempt, line_no)] = chained
        heads[(job_id, attempt)] = (line_no, chained)
    return out


def read_heads(
    conn: sa.Connection, pairs: Iterable[JobAttempt]
) -> dict[JobAttempt, tuple[int, bytes]]:
    """Returns: the chain head of each attempt among ``pairs`` that has one (module docstring)."""
    pairs = sorted(set(pairs))
    if not pairs:
        return {}
    query = (
        "SELECT t.job_id, t.attempt, h.line_no, h.chain_hash"
        " FROM unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS t(job_id, attempt)"
        " CROSS JOIN LATERAL (SELECT line_no, chain_hash FROM stream_lines s"
        " WHERE s.job_id = t.job_id AND s.attempt = t.attempt AND s.chain_hash IS NOT NULL"
        " ORDER BY s.line_no DESC LIMIT 1) AS h"
    )
    params = {"jobs": [p[0] for p in pairs], "attempts": [p[1] for p in pairs]}
    rows = conn.execute(sa.text(query), params)
    return {(r.job_id, r.attempt): (r.line_no, bytes(r.chain_hash)) for r in rows}


def link_pending(conn: sa.Connection, pairs: Iterable[JobAttempt]) -> set[JobAttempt]:
    """Chains stored lines that waited for a predecessor and now follow their head.

    Returns:
        The attempts whose chain grew (none in the common case, after one index probe).
    """
    pairs = sorted(set(pairs))
    if not pairs:
        return set()
    query = (
        "SELECT s.job_id, s.attempt, s.line_no, s.received_at, s.terminated,"
        " coalesce(s.raw_sha256, sha256(s.raw)) AS digest"
        " FROM stream_lines s"
        " JOIN unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS t(job_id, attempt)"
        " ON s.job_id = t.job_id AND s.attempt = t.attempt"
        " WHERE s.chain_hash IS NULL ORDER BY s.job_id, s.attempt, s.line_no"
    )
    params = {"jobs": [p[0] for p in pairs], "attempts": [p[1] for p in pairs]}
    pending = list(conn.execute(sa.text(query), params))
    if not pending:
        return set()
    heads = read_heads(conn, {(r.job_id, r.attempt) for r in pending})
    updates = []
    for r in pending:
        head_no, head_hash = heads.get((r.job_id, r.attempt), (0, GENESIS))
        if r.line_no != head_no + 1:
            continue
        key = line_key(r.job_id, r.attempt, r.line_no, r.received_at, r.terminated)
        chained = link(head_hash, key, bytes(r.digest))
        heads[(r.job_id, r.attempt)] = (r.line_no, chained)
        updates.append(
            {"j": r.job_id, "a": r.attempt, "n": r.line_no, "h": chained, "d": bytes(r.digest)}
        )
    if updates:
        conn.execute(
            sa.text(
                "UPDATE stream_lines SET chain_hash = :h,"
                " raw_sha256 = coalesce(raw_sha256, :d)"
                " WHERE job_id = :j AND attempt = :a AND line_no = :n"
            ),
            updates,
        )
    return {(u["j"], u["a"]) for u in updates}


class KnownHeads:
    """Chain heads a writer read or stored, by attempt, so a batch probes only new attempts.

    Sound because a row's ``chain_hash``, once set, never changes (:func:`link_pending` only
    fills NULLs; redaction keeps it): a head known once stays the hash of that line. It may
    fall behind the stored chain (another sink chained more lines, or :func:`link_pending`
    did): a line after the known head then takes the unchained path, and
    :func:`link_pending` chains it from the stored head, so the hashes are the same ones. A
    head enters only after its transaction committed (:meth:`learn`). Oldest forgotten first
    beyond ``max_attempts``.

    Args:
        max_attempts: Attempts remembered (an entry is ~200 bytes).
    """

    def __init__(self, max_attempts: int = 100_000) -> None:
        self._heads: dict[JobAttempt, tuple[int, bytes]] = {}
        self._max = max_attempts

    def __len__(self) -> int:
        return len(self._heads)

    def __repr__(self) -> str:
        return f"<KnownHeads attempts={len(self._heads)}>"

    def of(self, pairs: Iterable[JobAttempt]) -> dict[JobAttempt, tuple[int, bytes]]:
        """Returns: the known heads among ``pairs``."""
        heads = self._heads
        return {p: heads[p] for p in pairs if p in heads}

    def learn(self, heads: Mapping[JobAttempt, tuple[int, bytes]]) -> None:
        """Remembers heads of committed rows; a head never moves back."""
        known = self._heads
        for pair, head in heads.items():
            if pair not in known or known[pair][0] < head[0]:
                known[pair] = head
        while len(known) > self._max:
            del known[next(iter(known))]

    def forget(self, pairs: Iterable[JobAttempt]) -> None:
        """Forgets the heads of ``pairs`` (normalised attempts take no more lines)."""
        for pair in pairs:
            self._heads.pop(pair, None)


# -- verification ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A row that changed after it was written, or a hole in an attempt's chain."""

    job_id: str
    attempt: int
    line_no: int | None
    kind: str
    detail: str


@dataclass
class VerifyReport:
    """What :func:`verify` found.

    Attributes:
        attempts, lines: How many were checked.
        redacted: Lines marked redacted or deleted (chain checked here, bytes by the seal).
        unchained: Lines of attempts still open (no terminal ``line_count``) without a
            ``chain_hash``: waiting for a predecessor; not counted as problems.
        sealed: Sealed attempts measured again (:mod:`pipeline.archive.seals`).
        anchored: Seals found in the anchor file (None: no anchor configured).
        verdicts: Reviewers' verdicts checked (the whole chain, :mod:`pipeline.archive.verdicts`).
        verdicts_anchored: Verdicts found in their anchor file (None: no anchor configured).
        problems: Rows changed after they were written, missing or unhashed lines, lines
            after an attempt's end, seals that differ (module docstrings).
    """

    attempts: int = 0
    lines: int = 0
    redacted: int = 0
    unchained: int = 0
    sealed: int = 0
    anchored: int | None = None
    verdicts: int = 0
    verdicts_anchored: int | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


_VERIFY = """
SELECT s.job_id, s.attempt, s.line_no, s.received_at, s.terminated, s.raw_sha256, s.chain_hash,
       s.redaction, s.raw_sha256 IS NOT NULL AND sha256(s.raw) = s.raw_sha256 AS raw_ok
FROM stream_lines s LEFT JOIN jobs j USING (job_id)
WHERE {where}
ORDER BY s.job_id, s.attempt, s.line_no
"""
_COUNTS = """
SELECT e.job_id, e.attempt, max(e.line_count) AS line_count
FROM job_events e LEFT JOIN jobs j USING (job_id)
WHERE {where} AND e.line_count IS NOT NULL AND e.kind IN ('completed', 'failed', 'aborted')
GROUP BY e.job_id, e.attempt
"""


def verify(
    conn: sa.Connection,
    *,
    run_id: str | None = None,
    job_id: str | None = None,
    anchor: archive_seals.Anchor | None = None,
) -> VerifyReport:
    """Recomputes the chains and seals of a run's, a job's or every attempt (module docstring).

    The reviewers' verdict chain is walked whole (:func:`pipeline.archive.verdicts.check`);
    with a scope, only its findings about the scope's jobs are reported.

    Args:
        conn: Any connection (read only).
        run_id: Only this run's attempts (with ``job_id`` None too: the whole archive).
        job_id: Only this job's attempts.
        anchor: The seals' anchor file (``CHATSCRIBE_CHAIN_ANCHOR_DIR``); None: seals are
            compared with the archive's own copy only.

    Returns:
        The report; a problem per changed row, broken link, missing or unhashed line, line
        after its attempt's end, per seal part that differs, and per verdict edited or
        removed.

    Raises:
        ChainAnchorError: The anchor file exists but cannot be read.
    """
    where, params = _scope(run_id, job_id)
    report = VerifyReport()
    ends = {
        (r.job_id, r.attempt): r.line_count
        for r in conn.execute(sa.text(_COUNTS.format(where=where)), params)
    }
    last: dict[JobAttempt, tuple[int, bytes | None]] = {}
    for row in conn.execute(sa.text(_VERIFY.format(where=where)), params):
        _check_row(report, last, row, ends.get((row.job_id, row.attempt)))
    for (job, attempt), line_count in sorted(ends.items()):
        stored = last.get((job, attempt), (0, None))[0]
        if stored < line_count:
            detail = f"lines {stored + 1}..{line_count} missing (the attempt produced {line_count})"
            report.problems.append(Problem(job, attempt, stored + 1, "missing", detail))
    report.attempts = len(last)
    sealed = archive_seals.check(
        conn, where=where, params=params, anchor=anchor, run_id=run_id, job_id=job_id
    )
    report.sealed, report.anchored = sealed.sealed, sealed.anchored
    report.problems.extend(Problem(*finding) for finding in sealed.findings or [])
    jobs = None
    if run_id is not None or job_id is not None:
        query = f"SELECT j.job_id FROM jobs j WHERE {where}"
        jobs = {r.job_id for r in conn.execute(sa.text(query), params)}
    verdict_anchor = archive_verdicts.VerdictAnchor(anchor.directory) if anchor else None
    verdicts = archive_verdicts.check(conn, anchor=verdict_anchor, jobs=jobs)
    report.verdicts, report.verdicts_anchored = verdicts.verdicts, verdicts.anchored
    report.problems.extend(Problem(*finding) for finding in verdicts.findings)
    return report


def _scope(run_id: str | None, job_id: str | None) -> tuple[str, dict[str, Any]]:
    clauses, params = ["true"], {}
    if run_id is not None:
        clauses.append("j.run_id = :run_id")
        params["run_id"] = run_id
    if job_id is not None:
        clauses.append("j.job_id = :job_id")
        params["job_id"] = job_id
    return " AND ".join(clauses), params


def _check_row(
    report: VerifyReport,
    last: dict[JobAttempt, tuple[int, bytes | None]],
    row: Any,
    line_count: int | None,
) -> None:
    """Checks one line against its predecessor; ``line_count`` None: the attempt is open."""
    report.lines += 1
    pair = (row.job_id, row.attempt)
    previous_no, previous_hash = last.get(pair, (0, GENESIS))
    last[pair] = (row.line_no, bytes(row.chain_hash) if row.chain_hash is not None else None)

    def problem(kind: str, detail: str) -> None:
        report.problems.append(Problem(row.job_id, row.attempt, row.line_no, kind, detail))

    if row.redaction is not None:
        report.redacted += 1
    elif row.raw_sha256 is not None and not row.raw_ok:
        problem("raw_changed", "raw bytes differ from the sha256 recorded when it was written")
    if line_count is not None and row.line_no > line_count:
        problem("after_end", f"after the attempt's last line ({line_count}): not part of it")
    if row.line_no != previous_no + 1:
        problem("missing", f"lines {previous_no + 1}..{row.line_no - 1} missing before it")
    if row.chain_hash is None or row.raw_sha256 is None:
        if line_count is None:
            report.unchained += 1
        else:
            problem("unhashed", "line of a complete attempt without raw_sha256 or chain_hash")
        return
    if previous_hash is None:
        return  # follows an unchained line: reported there
    key = line_key(row.job_id, row.attempt, row.line_no, row.received_at, row.terminated)
    if link(previous_hash, key, bytes(row.raw_sha256)) != bytes(row.chain_hash):
        problem("chain_broken", "key, receive time, terminator or hash changed (or a line moved)")
