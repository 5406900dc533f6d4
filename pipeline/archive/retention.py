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
``now``. Each action reaches every column that holds a due job's content, all attempts
(:data:`pipeline.archive.content.CONTENT`: the raw lines and their payload and parse errors;
message content, thinking and extras; tool inputs, results and errors; SQL text, titles,
descriptions, chart specs, returned rows and errors; answers and stream errors; the job's
question, error and session settings; its events' payloads):

* ``delete``: each column is set to its deleted value (NULL, empty; lines become empty and
  are marked ``deleted``; session settings keep only ``externalId``/``internalId``; events
  lose their ``job`` and ``error``).
* ``redact``: raw lines are rewritten by the redaction rules and marked ``redacted``, the
  derived rows recomputed from them, then the rules are applied to every string of every
  content column (text, arrays, strings inside ``jsonb``).

Kept in both cases (the audit trail, :data:`pipeline.archive.content.KEPT`): the job, its
identity and lifecycle, each line's key, receive time, ``raw_sha256`` and ``chain_hash``, tool
names, views, members, result schemas and row counts. Each sealed attempt whose content changed
is sealed again (reason ``redacted`` or ``deleted``) and, with an anchor, the new seal
anchored (:mod:`pipeline.archive.seals`), so ``chatscribe verify`` still passes and still
catches any other change. Applying a policy twice changes nothing the second time.

Kafka keeps its own copy of the raw lines (``chat.lines``) and events until the topics'
retention (``retention.ms``; ``CHATSCRIBE_LINES_RETENTION_MS`` for ``chat.lines`` when the
pipeline creates it): a row-level policy does not reach it.

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
from pipeline.archive import content as archive_content
from pipeline.archive import derived as archive_derived
from pipeline.archive import partitions as archive_partitions
from pipeline.archive import seals as archive_seals
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


def delete_content(conn: sa.Connection, job_ids: list[str]) -> int:
    """Deletes the content of ``job_ids`` (module docstring); returns lines newly deleted."""
    if not job_ids:
        return 0
    return archive_content.delete_columns(conn, job_ids)


def redact_content(conn: sa.Connection, job_ids: list[str], redactor: Redactor) -> int:
    """Redacts the lines of ``job_ids``, recomputes their derived rows, redacts every column.

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
    pairs = sorted({(u["j"], u["a"]) for u in updates})
    archive_derived.normalise_ready(conn, pairs, force=True)
    archive_content.redact_columns(conn, job_ids, redactor)
    return len(updates)


def _json_text(raw: bytes) -> str | None:
    message, _ = parse_line(raw)
    return raw.decode("utf-8") if message is not None else None


def apply_policy(
    conn: sa.Connection,
    policy: RetentionPolicy,
    *,
    now: datetime,
    default_redactor: Redactor,
    anchor: archive_seals.Anchor | None = None,
) -> RetentionOutcome:
    """Applies a policy in the caller's transaction (module docstring).

    Args:
        conn: A connection inside a transaction.
        policy: The rules.
        now: The time ages are measured from (a test may pass a later one).
        default_redactor: Rules for ``redact`` when the policy names none.
        anchor: Where the new seals are anchored (``CHATSCRIBE_CHAIN_ANCHOR_DIR``).

    Raises:
        ArchiveUnavailableError: The anchor could not be written (roll the transaction back).
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
    _reseal(conn, redacting, "redacted", anchor)
    _reseal(conn, deleting, "deleted", anchor)
    if policy.partitions is not None:
        outcome.partitions_removed = remove_partitions(conn, policy.partitions, now=now)
    return outcome


def _reseal(
    conn: sa.Connection, job_ids: list[str], reason: str, anchor: archive_seals.Anchor | None
) -> None:
    sealed = archive_seals.sealed_of_jobs(conn, job_ids)
    records = archive_seals.seal_attempts(conn, sealed, reason=reason, only_changed=True)
    if anchor is not None:
        anchor.append(records)


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
