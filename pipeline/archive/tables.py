"""The PostgreSQL archive's tables (SQLAlchemy Core).

Part of the only package that imports SQLAlchemy (with the migrations). The tables carry no schema:
every archive connection has ``settings.database_schema`` as its ``search_path``
(:func:`pipeline.archive.engine.create_engine`), so tests can use a fresh schema each. The migration
(``migrations/versions/0001_archive.py``) creates the same tables explicitly; a test checks that the
two agree.

Tables (design.md, "Archive tables"), one row per:

* ``runs``: batch run (written by ``chatscribe batch``).
* ``jobs``: question asked as one identity; folded from lifecycle events
  (:mod:`pipeline.transcript.lifecycle`); ``normalised_attempt`` is the latest attempt whose derived
  rows are written.
* ``job_events``: lifecycle event, as received (``payload``) — key (job, attempt, kind).
* ``stream_lines``: raw NDJSON line, bytes exactly as received — key (job, attempt, line_no);
  ``raw_sha256`` and ``chain_hash`` make it tamper-evident (:mod:`pipeline.archive.chain`, migration
  0002); ``redaction``/``redacted_at`` mark content removed by retention or redaction.
* ``attempt_seals``: complete attempt, sealed for ``chatscribe verify``
  (:mod:`pipeline.archive.seals`, migration 0007).
* ``reviewers``, ``review_queues``, ``review_items``, ``review_verdicts``: who reviews, what
  they review and their verdicts, appended and chained (:mod:`pipeline.archive.reviews`,
  :mod:`pipeline.archive.verdicts`, migration 0008).
* ``messages``, ``tool_calls``, ``sql_queries``, ``answers``: derived from a complete attempt's
  lines by :func:`pipeline.transcript.normalise.normalise`; recomputable from ``stream_lines``.

No foreign keys: lines and events arrive from two topics in any order.
Values are made storable by :func:`models.archive.storable` on the way in.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOUBLE_PRECISION, JSONB

from models.archive import (
    ANSWER_SOURCES,
    EVENT_KINDS,
    JOB_STATUSES,
    NAMING_CONVENTION,
    PAIRWISE_VERDICTS,
    REDACTIONS,
    SEAL_REASONS,
    TOOL_KINDS,
    VERDICTS,
)

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _tz(name: str, *, nullable: bool = True, now: bool = False) -> Column[object]:
    default = func.now() if now else None
    return Column(name, DateTime(timezone=True), nullable=nullable, server_default=default)


def _one_of(column: str, values: tuple[str, ...], name: str) -> CheckConstraint:
    quoted = ", ".join(f"'{v}'" for v in values)
    return CheckConstraint(f"{column} IN ({quoted})", name=name)


runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("name", Text),
    Column("source_file", Text),
    Column("chat_url", Text),
    _tz("created_at", nullable=False, now=True),
    Column("created_by", Text),
    Column("job_count", Integer),
    Column("options", JSONB(none_as_null=True)),
    Column("rerun_of", Text),
)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("run_id", Text, nullable=False),
    Column("persona", Text),
    Column("question", Text),
    Column("session_settings", JSONB(none_as_null=True)),
    Column("identity", Text),
    Column("chat_url", Text),
    Column("active_branch_name", Text),
    Column("chat_id", Text),
    Column("status", Text, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_attempt", Integer, nullable=False, server_default="0"),
    Column("worker_id", Text),
    Column("line_count", Integer),
    Column("http_status", Integer),
    Column("error", Text),
    Column("error_type", Text),
    _tz("submitted_at"),
    _tz("started_at"),
    _tz("first_line_at"),
    _tz("finished_at"),
    Column("normalised_attempt", Integer),
    _tz("updated_at", nullable=False, now=True),
    _one_of("status", JOB_STATUSES, "status"),
    Index("ix_jobs_run_id", "run_id"),
    Index("ix_jobs_asked_at", func.coalesce(text("started_at"), text("submitted_at"))),  # 0006
    Index("ix_jobs_run_page", "run_id", "submitted_at", "job_id"),  # migration 0005
    Index(  # full-text search of questions (migration 0005)
        "ix_jobs_question_fts",
        text("to_tsvector('english'::regconfig, coalesce(question, ''))"),
        postgresql_using="gin",
    ),
)

job_events = Table(
    "job_events",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("kind", Text, primary_key=True),
    _tz("at", nullable=False),
    Column("line_count", Integer),
    Column("payload", JSONB(none_as_null=True), nullable=False),
    _tz("archived_at", nullable=False, now=True),
    _one_of("kind", EVENT_KINDS, "kind"),
)

stream_lines = Table(
    "stream_lines",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("line_no", Integer, primary_key=True),
    _tz("received_at", nullable=False),
    Column("raw", LargeBinary, nullable=False),
    Column("terminated", Boolean, nullable=False),
    Column("chat_id", Text),
    Column("parse_error", Text),
    Column("message_id", Text),
    Column("payload", JSONB(none_as_null=True)),
    _tz("archived_at", nullable=False, now=True),
    Column("raw_sha256", LargeBinary),
    Column("chain_hash", LargeBinary),
    Column("redaction", Text),
    _tz("redacted_at"),
    # The partition key (migration 0006): the job's submit time, else the line's receive time
    # (models.records.LineEnvelope.partition_at); monthly partitions, docs/archive.md.
    Column("partition_at", DateTime(timezone=True), primary_key=True),
    _one_of("redaction", REDACTIONS, "redaction"),
    Index(
        "ix_stream_lines_unchained",
        "job_id",
        "attempt",
        "line_no",
        postgresql_where=text("chain_hash IS NULL"),
    ),
)

messages = Table(
    "messages",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("message_id", Text, primary_key=True),
    Column("role", Text),
    Column("graph_path", ARRAY(Text)),
    Column("content", Text),
    Column("thinking", Text),
    Column("sort", DOUBLE_PRECISION),
    Column("is_final", Boolean, nullable=False),
    Column("is_in_process", Boolean),
    Column("is_delta_merged", Boolean, nullable=False),
    Column("first_line", Integer, nullable=False),
    Column("last_line", Integer, nullable=False),
    Column("tool_name", Text),
    Column("extra", JSONB(none_as_null=True), nullable=False),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("message_id", Text, primary_key=True),
    Column("name", Text),
    Column("kind", Text, nullable=False),
    Column("input", JSONB(none_as_null=True)),
    Column("result", JSONB(none_as_null=True)),
    Column("input_raw", Text),
    Column("result_raw", Text),
    Column("error", JSONB(none_as_null=True)),
    Column("payload_error", Text),
    Column("complete", Boolean, nullable=False),
    _one_of("kind", TOOL_KINDS, "kind"),
)

sql_queries = Table(
    "sql_queries",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("message_id", Text, primary_key=True),
    Column("tool_name", Text),
    Column("sql_query", Text),
    Column("query_title", Text),
    Column("description", Text),
    Column("user_request", Text),
    Column("memory_id", Text),
    Column("result_schema", JSONB(none_as_null=True)),
    Column("total_rows", Integer),
    Column("result_uuid", Text),
    Column("vega_spec", JSONB(none_as_null=True)),
    Column("rows", JSONB(none_as_null=True)),
    Column("returned_rows", Integer),
    Column("error", Text),
    Column("views", ARRAY(Text)),
    Column("members", ARRAY(Text)),
)

answers = Table(
    "answers",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("chat_id", Text),
    Column("content", Text),
    Column("source", Text, nullable=False),
    Column("message_id", Text),
    Column("line_no", Integer),
    Column("stream_errors", ARRAY(Text), nullable=False),
    _tz("normalised_at", nullable=False, now=True),
    _tz("published_at"),
    _one_of("source", ANSWER_SOURCES, "source"),
    Index(
        "ix_answers_unpublished", "job_id", "attempt", postgresql_where=text("published_at IS NULL")
    ),
    Index(  # full-text search of answers (migration 0005)
        "ix_answers_content_fts",
        text("to_tsvector('english'::regconfig, coalesce(content, ''))"),
        postgresql_using="gin",
    ),
)

attempt_seals = Table(  # migration 0007, pipeline.archive.seals
    "attempt_seals",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("line_count", Integer, nullable=False),
    Column("head", LargeBinary),
    Column("redacted", JSONB(none_as_null=True), nullable=False),
    Column("job_sha256", LargeBinary),
    Column("derived", JSONB(none_as_null=True), nullable=False),
    Column("seal", LargeBinary, nullable=False),
    Column("reason", Text, nullable=False),
    _tz("sealed_at", nullable=False, now=True),
    _one_of("reason", SEAL_REASONS, "reason"),
)

reviewers = Table(  # migration 0008, pipeline.archive.reviews
    "reviewers",
    metadata,
    Column("name", Text, primary_key=True),
    Column("token_sha256", LargeBinary, nullable=False),
    _tz("added_at", nullable=False, now=True),
    _tz("revoked_at"),
    Index("ix_reviewers_token_sha256", "token_sha256", unique=True),
)

review_queues = Table(  # migration 0008
    "review_queues",
    metadata,
    Column("queue_id", Text, primary_key=True),
    Column("filter", JSONB(none_as_null=True), nullable=False),
    Column("reviewers", ARRAY(Text), nullable=False),
    Column("compare_run", Text),
    Column("item_count", Integer, nullable=False),
    _tz("created_at", nullable=False, now=True),
    Column("created_by", Text),
)

review_items = Table(  # migration 0008
    "review_items",
    metadata,
    Column("queue_id", Text, primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("job_id", Text, nullable=False),
    Column("pair_job_id", Text),
)

review_verdicts = Table(  # migration 0008, pipeline.archive.verdicts; append-only (trigger)
    "review_verdicts",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("queue_id", Text, nullable=False),
    Column("job_id", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("pair_job_id", Text),
    Column("reviewer", Text, nullable=False),
    Column("verdict", Text, nullable=False),
    Column("labels", ARRAY(Text), nullable=False),
    Column("comment", Text),
    Column("expected", JSONB(none_as_null=True)),
    Column("supersedes", BigInteger),
    _tz("created_at", nullable=False),
    Column("prev_hash", LargeBinary, nullable=False),
    Column("hash", LargeBinary, nullable=False),
    _one_of("verdict", VERDICTS + PAIRWISE_VERDICTS, "verdict"),
    Index("ix_review_verdicts_job_id_seq", "job_id", "seq"),
    Index("ix_review_verdicts_queue_id_seq", "queue_id", "seq"),
)

DERIVED_TABLES: Final = (messages, tool_calls, sql_queries, answers)
"""Tables :func:`pipeline.transcript.normalise.normalise` fills for a (job, attempt); replaced as a
whole."""
