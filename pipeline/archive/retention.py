r"""``chatscribe retention apply``: delete or redact content after N days, by identity.

A database module (SQLAlchemy). A policy file (YAML)::

    rules:                       # the first rule matching a job's identity applies to it
      - identity: "external:jfk-*"   # glob on jobs.identity (default "*": everyone)
        afterDays: 7
        action: delete
      - afterDays: 30
        action: redact           # apply the redaction rules below
    redaction:                   # default: CHATSCRIBE_REDACT_DETECTORS / _PATTERNS
      detectors: [email, phone]
      patterns: ['ACME-\\d+']
    partitions:                  # optional: whole months of stream_lines
      afterDays: 365
      action: detach             # or drop

A job is due when it finished (else was last updated) more than ``afterDays`` days before
``now``. What each action does to a due job's last and earlier attempts:

* ``delete``: raw lines become empty and lose their parsed ``payload``; message content,
  thinking and extra members, tool payloads, returned rows, the user request and the answer text
  are set NULL. Lines are marked ``deleted``.
* ``redact``: raw lines are rewritten by the redaction rules and marked ``redacted``; the
  derived rows are recomputed from them; the question is redacted too.

Kept in both cases (the audit trail): the job, its identity and question (``delete``) and
lifecycle, each line's key, receive time, ``raw_sha256`` and ``chain_hash`` (so
``chatscribe verify`` still proves that no metadata changed, see :mod:`pipeline.archive.chain`),
tool
names and errors, SQL text, views, members, schema and row counts. Applying a policy twice
changes nothing the second time.

``partitions`` (migration 0006): a monthly partition of ``stream_lines`` whose month ended more
than ``afterDays`` before ``now`` is detached (it stays a plain table, to be dumped and dropped
by hand) or dropped, whatever the identities of its jobs: removing a whole partition costs
nothing per row and leaves no dead tuples, where the row-level ``delete`` rewrites every line.
Its lines, their hashes included, leave the archive (``chatscribe verify`` then reports those
jobs' lines ``missing``); the jobs, events and derived rows stay. A partition holds the lines
of jobs submitted in its month (:attr:`models.records.LineEnvelope.partition_at`), so a job
never loses part of its lines. The row-level rules still apply to the months not yet removed.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import sqlalchemy as sa
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models.records import parse_line
from pipeline.archive import derived as archive_derived
from pipeline.archive import partitions as archive_partitions
from pipeline.archive.redaction import Redactor
from pipeline.errors import RetentionPolicyError


class RetentionRule(BaseModel):
    """One rule: jobs of identities matching ``identity``, older than ``after_days``."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    identity: str = "*"
    after_days: float = Field(alias="afterDays", ge=0)
    action: Literal["delete", "redact"]


class RedactionRules(BaseModel):
    """Named detectors and regular expressions (:mod:`pipeline.archive.redaction`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    detectors: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()


class PartitionRule(BaseModel):
    """Whole months of ``stream_lines`` older than ``after_days``: detach or drop them."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    after_days: float = Field(alias="afterDays", ge=0)
    action: Literal["detach", "drop"]


class RetentionPolicy(BaseModel):
    """A policy file (module docstring): row-level ``rules``, whole-month ``partitions``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: tuple[RetentionRule, ...] = ()
    redaction: RedactionRules | None = None
    partitions: PartitionRule | None = None

    @model_validator(mode="after")
    def _something(self) -> RetentionPolicy:
        if not self.rules and self.partitions is None:
            raise ValueError("a policy needs rules, partitions, or both")
        return self


def load_policy(path: Path) -> RetentionPolicy:
    """Reads a policy file.

    Raises:
        RetentionPolicyError: Missing, not YAML, or invalid.
    """
    try:
        return RetentionPolicy.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise RetentionPolicyError(str(exc), path=path) from exc


@dataclass
class RetentionOutcome:
    """What :func:`apply_policy` did: jobs per action, lines changed."""

    deleted_jobs: int = 0
    redacted_jobs: int = 0
    lines_changed: int = 0
    partitions_removed: tuple[str, ...] = ()


_DUE = """
SELECT job_id, identity, coalesce(finished_at, updated_at) AS done_at FROM jobs
WHERE coalesce(finished_at, updated_at) < :cutoff
"""


def due_jobs(
    conn: sa.Connection, policy: RetentionPolicy, *, now: datetime
) -> dict[str, RetentionRule]:
    """Returns: ``job_id → rule`` for every job some rule makes due (first matching rule)."""
    if not policy.rules:
        return {}
    youngest = min(rule.after_days for rule in policy.rules)
    cutoff = now - timedelta(days=youngest)
    out: dict[str, RetentionRule] = {}
    for row in conn.execute(sa.text(_DUE), {"cutoff": cutoff}):
        for rule in policy.rules:
            if fnmatch.fnmatchcase(row.identity or "", rule.identity):
                if row.done_at < now - timedelta(days=rule.after_days):
                    out[row.job_id] = rule
                break
    return out


_DELETE = (
    """UPDATE stream_lines SET raw = '\\x'::bytea, payload = NULL, redaction = 'deleted',
       redacted_at = now() WHERE job_id = ANY(:jobs) AND redaction IS DISTINCT FROM 'deleted'""",
    """UPDATE messages SET content = NULL, thinking = NULL, extra = '{}'::jsonb
       WHERE job_id = ANY(:jobs)""",
    """UPDATE tool_calls SET input = NULL, result = NULL, input_raw = NULL,
       result_raw = NULL WHERE job_id = ANY(:jobs)""",
    """UPDATE sql_queries SET rows = NULL, user_request = NULL WHERE job_id = ANY(:jobs)""",
    """UPDATE answers SET content = NULL WHERE job_id = ANY(:jobs)""",
)


def delete_content(conn: sa.Connection, job_ids: list[str]) -> int:
    """Deletes the content of ``job_ids`` (module docstring); returns lines newly deleted."""
    if not job_ids:
        return 0
    changed = 0
    for n, statement in enumerate(_DELETE):
        result = conn.execute(sa.text(statement), {"jobs": job_ids})
        changed += result.rowcount if n == 0 else 0
    return changed


def redact_content(conn: sa.Connection, job_ids: list[str], redactor: Redactor) -> int:
    """Redacts the lines and question of ``job_ids`` and recomputes their derived rows.

    Returns:
        Lines whose bytes changed.
    """
    if not job_ids or not redactor:
        return 0
    rows = conn.execute(
        sa.text(
            "SELECT job_id, attempt, line_no, raw FROM stream_lines"
            " WHERE job_id = ANY(:jobs) AND redaction IS NULL"
        ),
        {"jobs": job_ids},
    ).all()
    updates = []
    for row in rows:
        redacted = redactor.redact_line(bytes(row.raw))
        if redacted != bytes(row.raw):
            updates.append(
                {
                    "j": row.job_id,
                    "a": row.attempt,
                    "n": row.line_no,
                    "raw": redacted,
                    "payload": _json_text(redacted),
                }
            )
    if updates:
        conn.execute(
            sa.text(
                "UPDATE stream_lines SET raw = :raw, redaction = 'redacted',"
                " redacted_at = now(), payload = try_jsonb(:payload)"
                " WHERE job_id = :j AND attempt = :a AND line_no = :n"
            ),
            updates,
        )
    _redact_questions(conn, job_ids, redactor)
    pairs = sorted({(u["j"], u["a"]) for u in updates})
    archive_derived.normalise_ready(conn, pairs, force=True)
    return len(updates)


def _json_text(raw: bytes) -> str | None:
    message, _ = parse_line(raw)
    return raw.decode("utf-8") if message is not None else None


def _redact_questions(conn: sa.Connection, job_ids: list[str], redactor: Redactor) -> None:
    query = "SELECT job_id, question FROM jobs WHERE job_id = ANY(:jobs)"
    for row in conn.execute(sa.text(query), {"jobs": job_ids}).all():
        redacted = redactor.redact(row.question or "")
        if row.question and redacted != row.question:
            conn.execute(
                sa.text("UPDATE jobs SET question = :q WHERE job_id = :j"),
                {"q": redacted, "j": row.job_id},
            )


def apply_policy(
    conn: sa.Connection,
    policy: RetentionPolicy,
    *,
    now: datetime,
    default_redactor: Redactor,
) -> RetentionOutcome:
    """Applies a policy in the caller's transaction (module docstring).

    Args:
        conn: A connection inside a transaction.
        policy: The rules.
        now: The time ages are measured from (a test may pass a later one).
        default_redactor: Rules for ``redact`` when the policy names none.
    """
    due = due_jobs(conn, policy, now=now)
    deleting = sorted(j for j, rule in due.items() if rule.action == "delete")
    redacting = sorted(j for j, rule in due.items() if rule.action == "redact")
    rules = policy.redaction
    redactor = (
        Redactor.build(detectors=rules.detectors, patterns=rules.patterns)
        if rules
        else default_redactor
    )
    outcome = RetentionOutcome(deleted_jobs=len(deleting), redacted_jobs=len(redacting))
    outcome.lines_changed += redact_content(conn, redacting, redactor)
    outcome.lines_changed += delete_content(conn, deleting)
    if policy.partitions is not None:
        outcome.partitions_removed = remove_partitions(conn, policy.partitions, now=now)
    return outcome


def remove_partitions(
    conn: sa.Connection, rule: PartitionRule, *, now: datetime
) -> tuple[str, ...]:
    """Detaches or drops every ``stream_lines`` partition whose month ended long enough ago.

    Due: the month ended before ``now - after_days`` (module docstring).

    Returns:
        The names of the partitions removed, oldest first.
    """
    cutoff = now - timedelta(days=rule.after_days)
    due = [p for p in archive_partitions.list_partitions(conn) if p.end <= cutoff]
    for partition in due:
        archive_partitions.remove(conn, partition=partition, action=rule.action)
    return tuple(p.name for p in due)
