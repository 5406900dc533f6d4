"""Kafka records: chat jobs, job lifecycle events and fanned-out NDJSON lines.

Keys: every record about a job is keyed by its job id, so one job's records stay in order
within a partition (design.md, "Flow"). Values: jobs and events are JSON objects; a line's value
is the NDJSON line exactly as received (bytes, invalid UTF-8 included) and its metadata travels
in headers (:mod:`models.wire`), so a consumer of ``chat.lines`` sees what the agent sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SecretStr,
    ValidationError,
    field_serializer,
)

from models import wire
from models.chat import SessionSettings, StreamMessage
from models.errors import LineRecordError
from models.json_values import MAX_DEPTH, deeper_than, exact_for_orjson

Headers = Sequence[tuple[str, bytes]]

EventKind = Literal["accepted", "started", "first_line", "completed", "failed", "aborted"]
TERMINAL_EVENTS: frozenset[str] = frozenset({"completed", "failed", "aborted"})
MAX_REQUESTS_PER_MINUTE = 1000
"""Largest ``requests_per_minute``: each attempt in the window holds a PostgreSQL advisory lock
for a minute (:mod:`pipeline.archive.leases`), and the server's shared lock table holds
``max_locks_per_transaction × max_connections`` locks in all (64 × 200 on ``ops/``)."""


def utc_now() -> datetime:
    """Returns: the current time, timezone-aware UTC."""
    return datetime.now(UTC)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_value(self) -> bytes:
        """Returns: the record value, UTF-8 JSON."""
        return self.model_dump_json(exclude_none=True).encode()


class RateLimits(_Record):
    """Limits on the jobs sharing a key, enforced across every worker of the group.

    See :mod:`pipeline.worker.admission`.

    Attributes:
        max_concurrency: Most streams at once.
        requests_per_minute: Most job attempts started in any 60-second window (a call asked
            again after a 429 is the same attempt).
    """

    max_concurrency: int | None = Field(default=None, ge=1)
    requests_per_minute: int | None = Field(default=None, ge=1, le=MAX_REQUESTS_PER_MINUTE)

    @property
    def empty(self) -> bool:
        """True when neither limit is set."""
        return self.max_concurrency is None and self.requests_per_minute is None


class ChatJob(_Record):
    """A question to ask as one identity: the value on ``chat.requests``.

    Attributes:
        job_id: Unique id of the job (a UUID string); the record key.
        run_id: The batch run the job belongs to.
        question: The user's message (``input`` of the chat request).
        persona: Name of the persona from the questions file, if any.
        chat_id: Thread to continue, if any.
        session_settings: Identity to ask as (interface, "Session settings").
        chat_url: Full URL of the chat endpoint (ours or a hosted agent's).
        active_branch_name, is_default_branch: Data-model branch (interface, "1. Chat").
        deadline_s: Seconds the worker allows the stream before aborting it.
        submitted_at: When the job was submitted (UTC).
        limits: Limits shared by the jobs of this run (key: ``run_id``).
        target_limits: Limits shared by every job asking this agent (key: the chat URL's host
            and path), whatever its run.
        api_key: Chat API key for this job, when it is not the worker's own. It travels in the
            ``chat.requests`` value only (:meth:`to_value`); every other serialisation (events,
            logs, the archive) leaves it out.
    """

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    persona: str | None = None
    chat_id: str | None = None
    session_settings: SessionSettings
    chat_url: str = Field(pattern=r"^https?://")
    active_branch_name: str | None = None
    is_default_branch: bool | None = None
    deadline_s: float | None = Field(default=None, gt=0)
    submitted_at: datetime = Field(default_factory=utc_now)
    limits: RateLimits | None = None
    target_limits: RateLimits | None = None
    api_key: SecretStr | None = Field(default=None, repr=False)

    @field_serializer("api_key", when_used="json")
    def _reveal_only_on_request(
        self, value: SecretStr | None, info: FieldSerializationInfo
    ) -> str | None:
        reveal = isinstance(info.context, dict) and info.context.get("reveal_secrets") is True
        return value.get_secret_value() if value is not None and reveal else None

    def to_value(self) -> bytes:
        """Returns: the ``chat.requests`` value, UTF-8 JSON, with :attr:`api_key` included."""
        dumped = self.model_dump_json(exclude_none=True, context={"reveal_secrets": True})
        return dumped.encode()

    def without_secrets(self) -> ChatJob:
        """Returns: a copy without :attr:`api_key`, to embed in events."""
        return self.model_copy(update={"api_key": None})

    @classmethod
    def from_value(cls, value: bytes) -> ChatJob:
        """Parses a ``chat.requests`` value. Raises :class:`pydantic.ValidationError`."""
        return cls.model_validate_json(value)


class JobEvent(_Record):
    """A job lifecycle event: the value on ``chat.job-events``.

    ``accepted`` is sent by the submitter and ``started`` by the worker, both carrying ``job``
    so the archive can create the job's row from events alone. Terminal events
    (``completed``, ``failed``, ``aborted``) carry ``line_count``: how many lines the attempt
    produced to ``chat.lines``, so the sink knows when it holds all of them, and ``throttled``:
    how many 429 (or 503 with ``Retry-After``) answers the attempt waited out (None: none).
    """

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    kind: EventKind
    attempt: int = Field(default=0, ge=0)
    at: datetime = Field(default_factory=utc_now)
    job: ChatJob | None = None
    chat_id: str | None = None
    line_count: int | None = Field(default=None, ge=0)
    http_status: int | None = None
    error: str | None = None
    error_type: str | None = None
    worker_id: str | None = None
    throttled: int | None = Field(default=None, ge=0)

    @property
    def is_terminal(self) -> bool:
        """True for ``completed``, ``failed`` and ``aborted``."""
        return self.kind in TERMINAL_EVENTS

    @classmethod
    def from_value(cls, value: bytes) -> JobEvent:
        """Parses a ``chat.job-events`` value. Raises :class:`pydantic.ValidationError`."""
        return cls.model_validate_json(value)


AnswerSource = Literal["final", "state", "fallback", "none"]
"""Where an answer came from: :data:`models.archive.ANSWER_SOURCES` as a type."""


class AnswerRecord(_Record):
    """An attempt's final answer: the value on ``chat.answers`` (:mod:`pipeline.sink.answers`).

    Every field is present in the value, ``null`` when unknown (consumers read it as a fixed
    row); ``answer_source`` is where the answer came from, as
    :mod:`pipeline.transcript.normalise` picks it.

    Attributes:
        job_id, run_id, attempt: The job attempt (the record key is ``job_id``).
        question, persona: What was asked, and the persona of the questions file.
        identity: The identity the question was asked as (row-level security), e.g.
            ``external:analyst-1``.
        chat_id: The thread.
        answer: The final answer's text (Markdown), or None.
        answer_source: ``final``, ``state``, ``fallback`` or ``none``.
        sql, total_rows: The attempt's last successful SQL tool call and its row count.
        chart_spec: Its Vega-Lite spec without data, or None.
        finished_at: When the attempt ended (UTC), or None.
    """

    job_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    attempt: int = Field(ge=0)
    question: str
    persona: str | None
    identity: str | None
    chat_id: str | None
    answer: str | None
    answer_source: AnswerSource
    sql: str | None
    total_rows: int | None
    chart_spec: dict[str, Any] | None
    finished_at: datetime | None

    def to_value(self) -> bytes:
        """Returns: the ``chat.answers`` value, UTF-8 JSON with every field (``null`` kept)."""
        return self.model_dump_json().encode()


def parse_line(raw: bytes) -> tuple[StreamMessage | None, str | None]:
    r"""Parses one NDJSON line, never raising.

    Args:
        raw: The line's bytes without its ``\n`` terminator.

    Returns:
        ``(message, None)`` on success, or ``(None, reason)`` where reason says why the line is
        not a stream message (invalid UTF-8, invalid JSON, nested deeper than
        :data:`models.json_values.MAX_DEPTH` levels, not an object, wrong field types).
    """
    if not exact_for_orjson(raw):  # an integer beyond 64 bits, which orjson would round
        return _parse_line_slowly(raw)
    try:  # orjson first (fast); anything it refuses takes the standard path below, which
        value: Any = orjson.loads(raw)  # gives the same results and reasons as before
    except orjson.JSONDecodeError:
        return _parse_line_slowly(raw)
    return _message(value)


def _parse_line_slowly(raw: bytes) -> tuple[StreamMessage | None, str | None]:
    """:func:`parse_line` with the standard library (NaN, lone surrogates, huge integers)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
    if not text.strip():
        return None, "empty line"
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, "invalid JSON: nested deeper than the parser's recursion limit"
    except ValueError as exc:  # an integer of more than 4,300 digits
        return None, f"invalid JSON: {exc}"
    return _message(value)


def _message(value: Any) -> tuple[StreamMessage | None, str | None]:
    if not isinstance(value, dict):
        return None, f"JSON {type(value).__name__} is not a stream message object"
    if deeper_than(value):  # before the model, and whatever reads it later, recurses into it
        return None, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
    try:
        return StreamMessage.model_validate(value), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"not a stream message: {where}: {first['msg']}"


class LineHeaders:
    """The headers of one attempt's ``chat.lines`` records, with the attempt's part encoded once.

    The one definition of a line record's headers (:mod:`models.wire`, in this order: attempt,
    line number, received-at, terminated, then chat id and job time when known):
    :meth:`LineEnvelope.to_record` uses it, and so does the worker, which sends a line without
    building an envelope (issue 13: ~4 µs per line).

    Args:
        attempt: The attempt number (from 1).
        job_at: When the job was submitted (the archive's partition key), or None.
    """

    __slots__ = ("_attempt", "_job_at")

    def __init__(self, attempt: int, job_at: datetime | None) -> None:
        self._attempt = (wire.HEADER_ATTEMPT, str(attempt).encode())
        self._job_at = None if job_at is None else (wire.HEADER_JOB_AT, job_at.isoformat().encode())

    def __repr__(self) -> str:
        return f"<LineHeaders attempt={self._attempt[1].decode()}>"

    def of(
        self, line_no: int, received_at: datetime, terminated: bool, chat_id: str | None
    ) -> list[tuple[str, bytes]]:
        """Returns: the headers of line ``line_no``, received at ``received_at`` (UTC)."""
        headers = [
            self._attempt,
            (wire.HEADER_LINE_NO, str(line_no).encode()),
            (wire.HEADER_RECEIVED_AT, received_at.isoformat().encode()),
            (wire.HEADER_TERMINATED, b"1" if terminated else b"0"),
        ]
        if chat_id is not None:
            headers.append((wire.HEADER_CHAT_ID, chat_id.encode()))
        if self._job_at is not None:
            headers.append(self._job_at)
        return headers


class LineEnvelope(BaseModel):
    r"""One fanned-out NDJSON line and where it belongs.

    Identity: ``(job_id, attempt, line_no)``; ``line_no`` counts from 1 within an attempt.

    Attributes:
        raw: The line exactly as received, without the ``\n`` terminator.
        terminated: False only for a last line that ended without ``\n`` (a truncated stream).
        message, parse_error: The parsed message, or why the line did not parse.
        job_at: When the job was submitted (header ``chatscribe-job-at``), or None when the
            record does not say; the archive's partition key is this, else ``received_at``
            (:func:`partition_at`).
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    attempt: int = Field(ge=1)
    line_no: int = Field(ge=1)
    received_at: datetime
    raw: bytes
    terminated: bool = True
    chat_id: str | None = None
    message: StreamMessage | None = None
    parse_error: str | None = None
    job_at: datetime | None = None

    @property
    def partition_at(self) -> datetime:
        """Returns the line's partition key in ``stream_lines`` (migration 0006).

        ``job_at``, else ``received_at``: a function of the record alone, so a redelivered record
        lands in the partition that already holds it.
        """
        return self.job_at if self.job_at is not None else self.received_at

    @classmethod
    def from_raw(
        cls, *, job_id: str, attempt: int, line_no: int, raw: bytes, **kw: Any
    ) -> LineEnvelope:
        """Builds an envelope and parses ``raw`` (see :func:`parse_line`)."""
        message, error = parse_line(raw)
        return cls(
            job_id=job_id,
            attempt=attempt,
            line_no=line_no,
            raw=raw,
            message=message,
            parse_error=error,
            **kw,
        )

    def to_record(self) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
        """Returns: ``(key, value, headers)`` for ``chat.lines``; value is :attr:`raw` unchanged."""
        headers = LineHeaders(self.attempt, self.job_at).of(
            self.line_no, self.received_at, self.terminated, self.chat_id
        )
        return self.job_id.encode(), self.raw, headers

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None, headers: Headers) -> LineEnvelope:
        """Rebuilds an envelope from a ``chat.lines`` record and parses the line.

        Raises:
            LineRecordError: The key or a required header is missing or malformed.
        """
        if not key:
            raise LineRecordError("record has no key (job id)", header="key")
        found = {name: val for name, val in headers}
        chat_id = found.get(wire.HEADER_CHAT_ID)
        return cls.from_raw(  # the one parse of the line in the sink
            job_id=key.decode("utf-8", errors="strict"),
            attempt=_int_header(found, wire.HEADER_ATTEMPT),
            line_no=_int_header(found, wire.HEADER_LINE_NO),
            raw=value or b"",
            received_at=_time_header(found, wire.HEADER_RECEIVED_AT),
            terminated=found.get(wire.HEADER_TERMINATED, b"1") != b"0",
            chat_id=chat_id.decode() if chat_id else None,
            job_at=_time_header(found, wire.HEADER_JOB_AT) if wire.HEADER_JOB_AT in found else None,
        )


def _int_header(headers: dict[str, bytes], name: str) -> int:
    try:
        value = int(headers[name])
    except (KeyError, ValueError) as exc:
        raise LineRecordError(f"header {name} missing or not an integer", header=name) from exc
    if value < 1:
        raise LineRecordError(f"header {name} must be >= 1, got {value}", header=name)
    return value


def _time_header(headers: dict[str, bytes], name: str) -> datetime:
    try:
        value = datetime.fromisoformat(headers[name].decode())
    except (KeyError, ValueError) as exc:
        raise LineRecordError(
            f"header {name} missing or not an ISO timestamp", header=name
        ) from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class DeadLetter(BaseModel):
    """Why a record went to a dead-letter topic; sent as headers beside the original bytes."""

    model_config = ConfigDict(frozen=True)

    reason: str
    source_topic: str
    source_partition: int | None = None
    source_offset: int | None = None

    def headers(self) -> list[tuple[str, bytes]]:
        """Returns: the dead-letter headers (:mod:`models.wire`)."""
        out = [
            (wire.HEADER_DLQ_REASON, self.reason.encode()),
            (wire.HEADER_DLQ_SOURCE_TOPIC, self.source_topic.encode()),
        ]
        if self.source_partition is not None:
            out.append((wire.HEADER_DLQ_SOURCE_PARTITION, str(self.source_partition).encode()))
        if self.source_offset is not None:
            out.append((wire.HEADER_DLQ_SOURCE_OFFSET, str(self.source_offset).encode()))
        return out

    @classmethod
    def from_headers(cls, headers: Headers) -> DeadLetter:
        """Reads the dead-letter headers of a record on a dead-letter topic.

        Raises:
            LineRecordError: The reason or source-topic header is missing.
        """
        found = {name: value for name, value in headers}
        missing = [
            h for h in (wire.HEADER_DLQ_REASON, wire.HEADER_DLQ_SOURCE_TOPIC) if h not in found
        ]
        if missing:
            raise LineRecordError("not a dead letter: header missing", header=missing[0])

        def number(name: str) -> int | None:
            value = found.get(name)
            return int(value) if value is not None else None

        return cls(
            reason=found[wire.HEADER_DLQ_REASON].decode(errors="replace"),
            source_topic=found[wire.HEADER_DLQ_SOURCE_TOPIC].decode(errors="replace"),
            source_partition=number(wire.HEADER_DLQ_SOURCE_PARTITION),
            source_offset=number(wire.HEADER_DLQ_SOURCE_OFFSET),
        )
