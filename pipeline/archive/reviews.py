"""Review queues and reviewers: who reviews which answers (migration 0008).

A database module (SQLAlchemy). A *queue* is a filter over the archive (:class:`QueueFilter`)
with reviewers assigned; the jobs it selects are fixed when it is made (``review_items``, in
submission order), so a queue reads the same on every visit and a random sample stays the same
sample. Filters (all optional, combined with AND):

=====================  ====================================================================
``run``                the jobs of one run
``persona``            asked as this persona
``view``               whose SQL touched this view (``sql_queries.views``)
``failed``             failed or refused: the job did not complete, or its last attempt has
                       no SQL query that returned rows (a refusal such as "not visible", an
                       error, an answer without data)
``changed_since``      (with ``run``) whose answer, SQL or result changed since that run,
                       or that it did not ask (``chatscribe diff`` pairing and rules)
``sample``, ``seed``   a random sample of N of the rest (``random.Random(seed)``)
=====================  ====================================================================

``compare_run`` makes a pairwise queue: each job is shown beside the job of that run with the
same (question, identity), paired as ``chatscribe diff`` pairs them.

*Reviewers* are named identities with a token each (``chatscribe review reviewers add``): the
token is shown once; the archive keeps its sha256 (``reviewers.token_sha256``), compared in
PostgreSQL through the unique index. Verdicts: :mod:`pipeline.archive.verdicts`, given through
:func:`give`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa

from models.archive import PAIRWISE_VERDICTS, VERDICTS
from pipeline.archive.diff import diff_runs, load_run
from pipeline.archive.verdicts import StoredVerdict, Verdict, VerdictAnchor, append
from pipeline.errors import ReviewerAuthError, ReviewRefusedError

NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
"""Queue ids and reviewer names: a letter or digit, then up to 63 of ``A-Za-z0-9._@-``."""
TOKEN_BYTES: Final = 32
MAX_COMMENT_CHARS: Final = 10_000
MAX_EXPECTED_CHARS: Final = 100_000
MAX_LABELS: Final = 20


@dataclass(frozen=True)
class QueueFilter:
    """What a queue selects (module docstring)."""

    run: str | None = None
    persona: str | None = None
    view: str | None = None
    failed: bool = False
    changed_since: str | None = None
    sample: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class Queue:
    """A queue as stored, with how many of its items carry a verdict."""

    queue_id: str
    filter: dict[str, Any]
    reviewers: list[str]
    compare_run: str | None
    item_count: int
    reviewed: int
    created_at: datetime
    created_by: str | None

    def to_json(self) -> dict[str, Any]:
        """Returns: the queue as JSON values (``created_at`` ISO 8601)."""
        return {**asdict(self), "created_at": self.created_at.isoformat()}


@dataclass(frozen=True)
class Item:
    """One position of a queue: the job, its question, and its latest verdict in the queue."""

    position: int
    job_id: str
    pair_job_id: str | None
    question: str | None
    persona: str | None
    status: str
    verdict: str | None
    reviewer: str | None
    reviewed_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """Returns: the item as JSON values."""
        at = self.reviewed_at.isoformat() if self.reviewed_at else None
        return {**asdict(self), "reviewed_at": at}


def check_name(value: str, *, field: str) -> str:
    """Returns: ``value`` when it is a :data:`NAME`. Raises ReviewRefusedError otherwise."""
    if not NAME.fullmatch(value):
        raise ReviewRefusedError(f"{value!r} is not 1-64 of A-Z a-z 0-9 . _ @ -", field=field)
    return value


# -- reviewers -----------------------------------------------------------------------------------


def token_digest(token: str) -> bytes:
    """Returns: sha256 of the token's UTF-8 bytes (what ``reviewers.token_sha256`` holds)."""
    return hashlib.sha256(token.encode()).digest()


def add_reviewer(conn: sa.Connection, name: str) -> str:
    """Adds a reviewer (or gives a revoked one a new token); returns the token, shown once.

    Raises:
        ReviewRefusedError: ``name`` is not a :data:`NAME`, or an active reviewer has it.
    """
    check_name(name, field="reviewer")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    row = conn.execute(
        sa.text(
            "INSERT INTO reviewers (name, token_sha256) VALUES (:name, :digest)"
            " ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256,"
            " added_at = now(), revoked_at = NULL WHERE reviewers.revoked_at IS NOT NULL"
            " RETURNING name"
        ),
        {"name": name, "digest": token_digest(token)},
    ).first()
    if row is None:
        raise ReviewRefusedError(f"reviewer {name} exists (revoke first)", field="reviewer")
    return token


def revoke_reviewer(conn: sa.Connection, name: str) -> bool:
    """Revokes a reviewer's token; their verdicts stay. Returns: False when none was active."""
    done = conn.execute(
        sa.text(
            "UPDATE reviewers SET revoked_at = now() WHERE name = :name AND revoked_at IS NULL"
        ),
        {"name": name},
    )
    return bool(done.rowcount)


def list_reviewers(conn: sa.Connection) -> list[dict[str, Any]]:
    """Returns: ``[{"name", "added_at", "revoked_at"}]`` by name."""
    rows = conn.execute(sa.text("SELECT name, added_at, revoked_at FROM reviewers ORDER BY name"))
    return [dict(r._mapping) for r in rows]


def reviewer_of(conn: sa.Connection, token: str | None) -> str:
    """Returns: the name of the active reviewer holding ``token``.

    Raises:
        ReviewerAuthError: No token, or no active reviewer holds it.
    """
    if not token:
        raise ReviewerAuthError("a reviewer token is required")
    name = conn.execute(
        sa.text("SELECT name FROM reviewers WHERE token_sha256 = :d AND revoked_at IS NULL"),
        {"d": token_digest(token)},
    ).scalar()
    if name is None:
        raise ReviewerAuthError("unknown or revoked reviewer token")
    return str(name)


# -- queues --------------------------------------------------------------------------------------

_CANDIDATES: Final = """
SELECT j.job_id FROM jobs j WHERE {where} ORDER BY j.submitted_at NULLS LAST, j.job_id
"""
_FAILED: Final = (
    "(j.status <> 'completed' OR NOT EXISTS (SELECT 1 FROM sql_queries s WHERE s.job_id ="
    " j.job_id AND s.attempt = j.last_attempt AND s.rows IS NOT NULL AND s.error IS NULL))"
)


def _where(flt: QueueFilter) -> tuple[str, dict[str, Any]]:
    clauses, params = ["true"], {}
    for column in ("run", "persona"):
        value = getattr(flt, column)
        if value is not None:
            clauses.append(f"j.{column if column == 'persona' else 'run_id'} = :{column}")
            params[column] = value
    if flt.view is not None:
        clauses.append(
            "EXISTS (SELECT 1 FROM sql_queries v WHERE v.job_id = j.job_id"
            " AND v.attempt = j.last_attempt AND :view = ANY(v.views))"
        )
        params["view"] = flt.view
    if flt.failed:
        clauses.append(_FAILED)
    return " AND ".join(clauses), params


def select_jobs(conn: sa.Connection, flt: QueueFilter) -> list[str]:
    """Returns: the job ids ``flt`` selects, in submission order (module docstring).

    Raises:
        ReviewRefusedError: ``changed_since`` without ``run``, or a sample size below 1.
        RunNotFoundError: ``changed_since`` or ``run`` names a run without jobs.
    """
    if flt.changed_since is not None and flt.run is None:
        raise ReviewRefusedError("needs the run to compare (run)", field="changed_since")
    if flt.sample is not None and flt.sample < 1:
        raise ReviewRefusedError("a sample of at least 1 job", field="sample")
    where, params = _where(flt)
    ids = [r.job_id for r in conn.execute(sa.text(_CANDIDATES.format(where=where)), params)]
    if flt.changed_since is not None and flt.run is not None:
        result = diff_runs(
            flt.changed_since,
            load_run(conn, run_id=flt.changed_since),
            flt.run,
            load_run(conn, run_id=flt.run),
        )
        changed = {c.b["job_id"] for c in result.cases if c.state != "same" and c.b}
        ids = [i for i in ids if i in changed]
    if flt.sample is not None and flt.sample < len(ids):
        chosen = set(random.Random(flt.seed).sample(ids, flt.sample))
        ids = [i for i in ids if i in chosen]
    return ids


def _pairs(conn: sa.Connection, job_ids: list[str], compare_run: str) -> dict[str, str]:
    keys = conn.execute(
        sa.text("SELECT job_id, question, identity FROM jobs WHERE job_id = ANY(:ids)"),
        {"ids": job_ids},
    )
    key_of = {r.job_id: (r.question or "", r.identity) for r in keys}
    waiting: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for job in load_run(conn, run_id=compare_run):
        waiting[(job.question, job.identity)].append(job.job_id)
    out = {}
    for job_id in job_ids:
        others = waiting.get(key_of.get(job_id, ("", None)))
        if others:
            out[job_id] = others.pop(0)
    return out


def create_queue(
    conn: sa.Connection,
    queue_id: str,
    flt: QueueFilter,
    *,
    reviewers: list[str],
    compare_run: str | None = None,
    created_by: str | None = None,
) -> int:
    """Makes a queue of the jobs ``flt`` selects (in the caller's transaction).

    Args:
        conn: A writable connection.
        queue_id: A :data:`NAME`, new.
        flt: Which jobs.
        reviewers: Names of reviewers who may give verdicts in it (active ones).
        compare_run: Another run whose answers are shown beside (a pairwise queue).
        created_by: Who made it (the OS user of the CLI).

    Returns:
        The number of items.

    Raises:
        ReviewRefusedError: A bad or taken id, an unknown reviewer, no job selected.
        RunNotFoundError: A run named by ``flt`` or ``compare_run`` has no jobs.
    """
    check_name(queue_id, field="queue")
    known = {r["name"] for r in list_reviewers(conn) if r["revoked_at"] is None}
    unknown = sorted(set(reviewers) - known)
    if unknown or not reviewers:
        raise ReviewRefusedError(
            f"no active reviewer {unknown or '(none given)'}", field="reviewers"
        )
    ids = select_jobs(conn, flt)
    if not ids:
        raise ReviewRefusedError("the filter selects no job", field="queue")
    pairs = _pairs(conn, ids, compare_run) if compare_run else {}
    inserted = conn.execute(
        sa.text(
            "INSERT INTO review_queues (queue_id, filter, reviewers, compare_run, item_count,"
            " created_by) VALUES (:q, CAST(:f AS jsonb), :r, :c, :n, :by)"
            " ON CONFLICT (queue_id) DO NOTHING RETURNING queue_id"
        ),
        {
            "q": queue_id,
            "f": json.dumps({k: v for k, v in asdict(flt).items() if v not in (None, False)}),
            "r": sorted(set(reviewers)),
            "c": compare_run,
            "n": len(ids),
            "by": created_by,
        },
    ).first()
    if inserted is None:
        raise ReviewRefusedError(f"queue {queue_id} exists", field="queue")
    rows = [
        {"q": queue_id, "p": n, "j": job_id, "pj": pairs.get(job_id)}
        for n, job_id in enumerate(ids, start=1)
    ]
    conn.execute(
        sa.text(
            "INSERT INTO review_items (queue_id, position, job_id, pair_job_id)"
            " VALUES (:q, :p, :j, :pj)"
        ),
        rows,
    )
    return len(ids)


_QUEUES: Final = """
SELECT q.*, (SELECT count(DISTINCT v.job_id) FROM review_verdicts v
             WHERE v.queue_id = q.queue_id) AS reviewed
FROM review_queues q WHERE {where} ORDER BY q.created_at DESC, q.queue_id
"""


def list_queues(conn: sa.Connection, *, queue_id: str | None = None) -> list[Queue]:
    """Returns: every queue (or the one named), newest first."""
    where = "q.queue_id = :q" if queue_id is not None else "true"
    rows = conn.execute(sa.text(_QUEUES.format(where=where)), {"q": queue_id})
    return [
        Queue(
            queue_id=r.queue_id,
            filter=dict(r.filter),
            reviewers=list(r.reviewers),
            compare_run=r.compare_run,
            item_count=r.item_count,
            reviewed=r.reviewed,
            created_at=r.created_at,
            created_by=r.created_by,
        )
        for r in rows
    ]


_ITEMS: Final = """
SELECT i.position, i.job_id, i.pair_job_id, j.question, j.persona, j.status,
       v.verdict, v.reviewer, v.created_at AS reviewed_at
FROM review_items i
JOIN jobs j ON j.job_id = i.job_id
LEFT JOIN LATERAL (SELECT verdict, reviewer, created_at FROM review_verdicts v
  WHERE v.job_id = i.job_id AND v.queue_id = i.queue_id ORDER BY v.seq DESC LIMIT 1) v ON true
WHERE i.queue_id = :q AND i.position >= :first AND i.position < :first + :limit
ORDER BY i.position
"""


def queue_items(conn: sa.Connection, queue_id: str, *, first: int, limit: int) -> list[Item]:
    """Returns: the items at positions ``first .. first + limit - 1`` (1-based), in order.

    One index range of ``review_items`` and one probe of the verdicts per item: the cost of a
    page does not grow with the queue or the archive.
    """
    params = {"q": queue_id, "first": first, "limit": limit}
    return [Item(**r._mapping) for r in conn.execute(sa.text(_ITEMS), params)]


# -- verdicts ------------------------------------------------------------------------------------


def parse_expected(text: str | None) -> dict[str, Any] | None:
    """Reads the expected answer a reviewer typed.

    Args:
        text: JSON rows (``[["EWR", 120835], ["JFK", 111279]]``), one JSON row (``["EWR", 3]``),
            one JSON value (``28834``), a questions file's ``{"rows": ..., "ordered": ...}``, or
            plain text (one cell, e.g. ``EWR``); empty: none.

    Returns:
        ``{"rows": [[...], ...]}`` (plus the keys of an object given), or None.

    Raises:
        ReviewRefusedError: Longer than :data:`MAX_EXPECTED_CHARS`, ``NaN`` or ``Infinity``,
            or an object that is not an expected result.
    """
    from pipeline.transcript.result_compare import ExpectedResult

    text = (text or "").strip()
    if not text:
        return None
    if len(text) > MAX_EXPECTED_CHARS:
        raise ReviewRefusedError(f"at most {MAX_EXPECTED_CHARS} characters", field="expected")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError:
        value = text
    if isinstance(value, dict):
        try:
            return ExpectedResult.model_validate(value).model_dump(exclude_defaults=True)
        except ValueError as exc:
            raise ReviewRefusedError(f"not an expected result: {exc}", field="expected") from None
    if isinstance(value, list) and value and all(isinstance(r, list) for r in value):
        return {"rows": value}
    return {"rows": [value if isinstance(value, list) else [value]]}


def _no_constant(name: str) -> None:
    raise ReviewRefusedError(f"{name} is not a value PostgreSQL's jsonb holds", field="expected")


@dataclass(frozen=True)
class VerdictForm:
    """What a reviewer sends for one queue position (the Review page's form)."""

    queue_id: str
    position: int
    job_id: str
    verdict: str
    labels: str = ""
    comment: str = ""
    expected: str = ""


def _checked(form: VerdictForm, pair_job_id: str | None) -> tuple[list[str], dict[str, Any] | None]:
    if any("\x00" in text for text in (form.labels, form.comment, form.expected)):
        raise ReviewRefusedError("no NUL character (PostgreSQL text refuses it)", field="form")
    allowed = PAIRWISE_VERDICTS if pair_job_id else VERDICTS
    if form.verdict not in allowed:
        raise ReviewRefusedError(f"one of {', '.join(allowed)}", field="verdict")
    labels = sorted({x.strip() for x in form.labels.split(",") if x.strip()})
    if len(labels) > MAX_LABELS or any(not NAME.fullmatch(x) for x in labels):
        raise ReviewRefusedError(f"at most {MAX_LABELS} names, comma-separated", field="labels")
    if len(form.comment) > MAX_COMMENT_CHARS:
        raise ReviewRefusedError(f"at most {MAX_COMMENT_CHARS} characters", field="comment")
    return labels, parse_expected(form.expected)


def give(
    conn: sa.Connection, token: str | None, form: VerdictForm, *, anchor: VerdictAnchor | None
) -> StoredVerdict:
    """Appends a reviewer's verdict on a queue position (in the caller's transaction).

    Raises:
        ReviewerAuthError: The token is unknown or revoked, or its reviewer is not assigned.
        ReviewRefusedError: No such queue position, or the item holds another job (the queue
            changed under the page), or a field is refused (:func:`parse_expected`, labels,
            comment length, verdict outside the closed set).
    """
    reviewer = reviewer_of(conn, token)
    item = conn.execute(
        sa.text(
            "SELECT i.job_id, i.pair_job_id, q.reviewers, j.last_attempt FROM review_items i"
            " JOIN review_queues q USING (queue_id) JOIN jobs j ON j.job_id = i.job_id"
            " WHERE i.queue_id = :q AND i.position = :p"
        ),
        {"q": form.queue_id, "p": form.position},
    ).first()
    if item is None or item.job_id != form.job_id:
        raise ReviewRefusedError(f"no job {form.job_id} at that position", field="position")
    if reviewer not in item.reviewers:
        raise ReviewerAuthError(f"{reviewer} is not assigned to {form.queue_id}", reviewer=reviewer)
    labels, expected = _checked(form, item.pair_job_id)
    verdict = Verdict(
        queue_id=form.queue_id,
        job_id=item.job_id,
        attempt=item.last_attempt or 1,
        reviewer=reviewer,
        verdict=form.verdict,
        labels=tuple(labels),
        comment=form.comment.strip() or None,
        expected=expected,
        pair_job_id=item.pair_job_id,
    )
    return append(conn, verdict, anchor=anchor)


def verdict_history(conn: sa.Connection, queue_id: str, job_id: str) -> list[dict[str, Any]]:
    """Returns: every verdict on ``job_id`` in the queue, newest first.

    ``[{"seq", "reviewer", "verdict", "labels", "comment", "expected", "supersedes",
    "created_at"}]``; the first is the job's verdict in the queue, the rest superseded.
    """
    rows = conn.execute(
        sa.text(
            "SELECT seq, reviewer, verdict, labels, comment, expected, supersedes, created_at"
            " FROM review_verdicts WHERE job_id = :j AND queue_id = :q ORDER BY seq DESC"
        ),
        {"j": job_id, "q": queue_id},
    )
    return [dict(r._mapping) for r in rows]
