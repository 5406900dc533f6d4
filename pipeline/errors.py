"""Errors raised by ``pipeline``.

Tree (retryability is part of the type: workers and the sink decide with ``isinstance``)::

    PipelineError
    ├── ChatHttpError                  an error status from the Chat API  (status_code, url)
    ├── TransientError                 worth retrying with backoff
    │   ├── ChatConnectError           no connection to the Chat API, or a timeout     (url)
    │   ├── ChatServerError            HTTP 5xx before the stream started   (status_code, url)
    │   ├── ChatThrottledError         HTTP 429, or 503 with Retry-After     (retry_after_s)
    │   ├── StreamBrokenError          the stream ended before it finished  (url, lines_read)
    │   ├── RecordDeliveryError        Kafka did not confirm a record                  (topic)
    │   ├── PartitionsRevokedError     a rebalance took the partitions mid-operation   (topic)
    │   ├── PartitionsStalledError     assigned partitions stalled while records waited
    │   ├── ArchiveUnavailableError    PostgreSQL unreachable or restarting
    │   └── TraceExportError           an OTLP endpoint did not accept spans  (endpoint, spans)
    └── PermanentError                 retrying cannot help
        ├── ChatClientError            HTTP 4xx                              (status_code, url)
        │   ├── ChatAuthError          401
        │   ├── ChatForbiddenError     403
        │   └── ChatNotFoundError      404
        ├── ChatLineTooLongError    a stream line past ``max_record_bytes``  (url, limit_bytes)
        ├── ChatResponseTooLargeError  one attempt's response past its line or byte cap (url, limit)
        ├── ChatThrottleLimitError  throttled more often than the per-call cap     (url, throttles)
        ├── ChatUrlRefusedError     a chat URL not allowed, or not for the worker's own key (url)
        ├── RecordTooLargeError     a record over ``max_record_bytes``       (topic, size_bytes)
        ├── InvalidJobError         a chat.requests record is not a job (topic, partition, offset)
        ├── InvalidRecordError      a record the sink cannot archive    (topic, partition, offset)
        ├── DeadLetterNotFoundError no dead letter at a position        (topic, partition, offset)
        ├── NotReplayableError      a dead letter without its source topic                (ref)
        ├── ArchiveRejectedError    PostgreSQL refused a value in a batch            (sqlstate)
        ├── ArchiveSchemaError      archive tables missing or different: run `chatscribe db upgrade`
        ├── NotArchivedError        a job, attempt or run is not in the archive
        │   ├── ReplayError         the job or attempt has no archived lines  (job_id, attempt)
        │   └── RunNotFoundError    no run with this id / no job of the run           (run_id)
        ├── QuestionsFileError      a questions file does not read or validate          (path)
        ├── RetentionPolicyError    a retention policy file does not read or validate   (path)
        ├── RedactionRuleError      a redaction rule names no detector or is no regex   (rule)
        ├── ChainAnchorError        the chain anchor file cannot be read                (path)
        ├── ReviewRefusedError      a review queue, verdict or expected value refused  (field)
        ├── ReviewerAuthError       no such reviewer token, revoked, or not assigned (reviewer)
        ├── ChildError              a child process of a command died or never got ready (name)
        └── ConsoleBindError        the console asked to bind beyond loopback without a token (host)

``ChatServerError``, ``ChatClientError`` and ``ChatThrottleLimitError`` also derive from
``ChatHttpError`` (the status carried by each). The errors about files and lookups also derive
from the builtin they replace (``ValueError``, ``LookupError``, ``RuntimeError``), so callers
that caught those still do.
Foreign errors are translated once, at the adapter that meets them: httpx in
:mod:`pipeline.chat.client`, aiokafka in :mod:`pipeline.kafka`, SQLAlchemy/psycopg in
:func:`pipeline.archive.engine.translate_errors`. ``tests/unit/test_error_trees.py`` checks
that this drawing names every class below and that each is raised somewhere.
"""

from __future__ import annotations

from pathlib import Path


class PipelineError(Exception):
    """Root of the errors raised by ``pipeline``."""


class TransientError(PipelineError):
    """A failure that may go away: retry with backoff."""


class PermanentError(PipelineError):
    """A failure retrying cannot fix: fail the job or dead-letter the record."""


class ChatHttpError(PipelineError):
    """The Chat API answered with an error status.

    Attributes:
        status_code: The HTTP status.
        message: The error message from the body, or the body's start.
        url: The URL requested.
    """

    def __init__(self, message: str, *, status_code: int, url: str) -> None:
        super().__init__(f"HTTP {status_code} from {url}: {message}")
        self.status_code = status_code
        self.message = message
        self.url = url


class ChatServerError(ChatHttpError, TransientError):
    """HTTP 5xx before the stream started."""


class ChatThrottledError(ChatHttpError, TransientError):
    """HTTP 429 (too many requests), or 503 with ``Retry-After``: the agent asks us to slow down.

    The worker waits and asks again without counting an attempt, within the job's deadline
    (RFC 9110 §10.2.3 "Retry-After"; RFC 6585 §4 "429 Too Many Requests").

    Attributes:
        retry_after_s: Seconds the response asked us to wait (``Retry-After`` as seconds or an
            HTTP date, from now); None when it named none or none that parses.
    """

    def __init__(
        self, message: str, *, status_code: int, url: str, retry_after_s: float | None
    ) -> None:
        super().__init__(message, status_code=status_code, url=url)
        self.retry_after_s = retry_after_s


class ChatClientError(ChatHttpError, PermanentError):
    """HTTP 4xx: the request is wrong and will stay wrong."""


class ChatAuthError(ChatClientError):
    """HTTP 401: missing or invalid API key."""


class ChatForbiddenError(ChatClientError):
    """HTTP 403: the user does not own the thread."""


class ChatNotFoundError(ChatClientError):
    """HTTP 404: agent, tenant or thread not found."""


class ChatConnectError(TransientError):
    """No connection to the Chat API, or it did not answer in time.

    Attributes:
        url: The URL requested.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(f"{message} ({url})")
        self.url = url


class StreamBrokenError(TransientError):
    """The stream broke after it started (connection reset, read timeout).

    Attributes:
        url: The URL requested.
        lines_read: Lines received before the break.
    """

    def __init__(self, message: str, *, url: str, lines_read: int) -> None:
        super().__init__(f"{message} after {lines_read} lines ({url})")
        self.url = url
        self.lines_read = lines_read


class ChatLineTooLongError(PermanentError):
    """The stream sent more than ``max_record_bytes`` without a newline.

    Such a line could never travel as one Kafka record, and buffering it would let one stream
    take the worker's memory; the stream is closed and the job fails with this reason.

    Attributes:
        url: The URL requested.
        limit_bytes: The longest line taken (``max_record_bytes``).
        lines_read: Complete lines received before it.
    """

    def __init__(self, *, url: str, limit_bytes: int, lines_read: int) -> None:
        super().__init__(
            f"a line grew past {limit_bytes} bytes without a newline after {lines_read} lines"
            f" ({url})"
        )
        self.url = url
        self.limit_bytes = limit_bytes
        self.lines_read = lines_read


class ChatResponseTooLargeError(PermanentError):
    """One attempt's response passed a per-attempt cap on its lines or its bytes.

    A hostile or broken agent can stream without end; the worker stops reading at the cap, the
    lines that arrived before it stay in ``chat.lines`` (and the archive), and the attempt fails
    with this reason (settings ``worker_max_attempt_lines`` and ``worker_max_attempt_bytes``).

    Attributes:
        url: The URL requested.
        limit: The cap that was reached (lines or bytes, per ``unit``).
        unit: ``"lines"`` or ``"bytes"``.
        lines_read: Lines taken before the stream was closed.
    """

    def __init__(self, *, url: str, limit: int, unit: str, lines_read: int) -> None:
        super().__init__(
            f"the response passed the per-attempt cap of {limit} {unit} after {lines_read}"
            f" lines; stream closed, the lines before it kept ({url})"
        )
        self.url = url
        self.limit = limit
        self.unit = unit
        self.lines_read = lines_read


class ChatThrottleLimitError(ChatHttpError, PermanentError):
    """The agent throttled one call more often than the worker's cap (``worker_max_throttled``).

    Each throttled answer is waited out (at least the backoff floor); past the cap the job
    fails with this error instead of asking again for as long as its deadline allows.

    Attributes:
        throttles: Throttled answers received for the call.
        retry_after_s: The last answer's ``Retry-After`` in seconds, if any.
    """

    def __init__(self, last: ChatThrottledError, *, throttles: int) -> None:
        message = f"gave up after {throttles} throttled answers (the per-call cap): {last.message}"
        super().__init__(message, status_code=last.status_code, url=last.url)
        self.throttles = throttles
        self.retry_after_s = last.retry_after_s


class ChatUrlRefusedError(PermanentError, ValueError):
    """A chat URL is not one the worker may call, or not one its own API key may go to.

    Chat URLs must match the allow-list ``chat_url_allow`` (scheme, host, port, path prefix);
    a job without its own key may only name a URL of ``api_key_urls``
    (:mod:`pipeline.chat.targets`).

    Attributes:
        url: The URL refused.
        reason: Why, in words.
    """

    def __init__(self, reason: str, *, url: str) -> None:
        super().__init__(f"chat URL {url!r} refused: {reason}")
        self.url = url
        self.reason = reason


class ArchiveUnavailableError(TransientError):
    """PostgreSQL is unreachable or restarting."""


class RecordDeliveryError(TransientError):
    """Kafka did not confirm a record (broker unreachable, timeout, not enough replicas).

    Attributes:
        topic: The topic the record was for.
    """

    def __init__(self, message: str, *, topic: str) -> None:
        super().__init__(f"{message} (topic={topic})")
        self.topic = topic


class PartitionsRevokedError(TransientError):
    """A rebalance took a consumer's partitions during a commit, seek or position lookup.

    The records are read again by whichever consumer owns the partitions now.

    Attributes:
        topic: The topic of the partition, or ``"*"`` for a commit over several.
        partition: The partition, or -1 for a commit over several.
    """

    def __init__(self, message: str, *, topic: str = "*", partition: int = -1) -> None:
        super().__init__(f"{message} (topic={topic} partition={partition})")
        self.topic = topic
        self.partition = partition


class PartitionsStalledError(TransientError):
    """Assigned partitions made no progress while records waited and nothing was in flight.

    The rule: :mod:`pipeline.kafka.stall`. The worker stops with it, so the group hands the
    partitions to its other members and a supervisor starts it again.

    Attributes:
        partitions: The stalled ``(topic, partition)`` pairs.
        timeout_s: The seconds without progress that made them stalled.
    """

    def __init__(self, *, partitions: list[tuple[str, int]], timeout_s: float) -> None:
        named = ",".join(f"{topic}/{partition}" for topic, partition in partitions)
        super().__init__(f"no progress for {timeout_s:g} s while records waited ({named})")
        self.partitions = partitions
        self.timeout_s = timeout_s


class RecordTooLargeError(PermanentError):
    """A record is larger than ``max_record_bytes`` and can never be produced.

    Attributes:
        topic: The topic the record was for.
        size_bytes: Size of the value.
    """

    def __init__(self, message: str, *, topic: str, size_bytes: int) -> None:
        super().__init__(f"{message} (topic={topic} size_bytes={size_bytes})")
        self.topic = topic
        self.size_bytes = size_bytes


class _RecordError(PermanentError):
    """A record at a topic position that cannot be processed; the base of the two below."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"{message} (topic={topic} partition={partition} offset={offset})")
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset


class InvalidJobError(_RecordError):
    """A ``chat.requests`` record is not a valid chat job.

    Attributes:
        reason, topic, partition, offset: What is wrong and where the record is.
    """


class InvalidRecordError(_RecordError):
    """A record the sink cannot archive.

    Attributes:
        reason, topic, partition, offset: What is wrong and where the record is.
    """


class ArchiveRejectedError(PermanentError):
    """PostgreSQL refused data in a batch (a value no column can hold, a constraint).

    Retrying the same batch fails the same way; the sink isolates the record and dead-letters it.

    Attributes:
        sqlstate: PostgreSQL's SQLSTATE code, when known (``22P02``, ``23505`` ...).
    """

    def __init__(self, message: str, *, sqlstate: str | None) -> None:
        super().__init__(f"{message} (sqlstate={sqlstate})")
        self.sqlstate = sqlstate


class ArchiveSchemaError(PermanentError):
    """The archive's schema.

    Tables or columns are missing or differ from what the code expects (run ``chatscribe db
    upgrade``), or the database user may not use them.

    Attributes:
        sqlstate: PostgreSQL's SQLSTATE code, when known (``42P01`` ...).
    """

    def __init__(self, message: str, *, sqlstate: str | None) -> None:
        super().__init__(f"{message} (sqlstate={sqlstate})")
        self.sqlstate = sqlstate


class DeadLetterNotFoundError(PermanentError):
    """No record at this position of a dead-letter topic.

    Attributes:
        topic, partition, offset: The position asked for.
    """

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"no dead letter at {topic}:{partition}:{offset}")
        self.topic, self.partition, self.offset = topic, partition, offset


class NotReplayableError(PermanentError):
    """A dead letter lacks the source-topic header, so there is nowhere to replay it.

    Attributes:
        ref: The dead letter's ``topic:partition:offset``.
    """

    def __init__(self, ref: str, *, header: str) -> None:
        super().__init__(f"dead letter {ref} has no {header} header")
        self.ref = ref


class NotArchivedError(PermanentError, LookupError):
    """Something asked for is not in the archive."""


class ReplayError(NotArchivedError):
    """The job, or the attempt, has no archived lines.

    Attributes:
        job_id, attempt: What was asked for.
    """

    def __init__(self, message: str, *, job_id: str, attempt: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.attempt = attempt


class RunNotFoundError(NotArchivedError):
    """No run with this id is recorded, or the run has no job in the archive.

    Attributes:
        run_id: The id asked for.
    """

    def __init__(self, run_id: str, *, message: str | None = None) -> None:
        super().__init__(message or f"run {run_id} has no jobs in the archive")
        self.run_id = run_id


class QuestionsFileError(PermanentError, ValueError):
    """The questions file cannot be read or does not validate.

    Attributes:
        path: The file.
    """

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class RetentionPolicyError(PermanentError, ValueError):
    """The retention policy file cannot be read or does not validate.

    Attributes:
        path: The file.
    """

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class RedactionRuleError(PermanentError, ValueError):
    """A redaction rule names an unknown detector or is not a valid regular expression.

    Attributes:
        rule: The rule as written.
    """

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class ChainAnchorError(PermanentError, OSError):
    """The file that anchors the archive's seals outside PostgreSQL cannot be read.

    Attributes:
        path: The anchor file (``CHATSCRIBE_CHAIN_ANCHOR_DIR``/``seals.jsonl``).
    """

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class ReviewRefusedError(PermanentError, ValueError):
    """A review queue, verdict or expected value that cannot be stored as given.

    Attributes:
        field: What was refused (``queue``, ``verdict``, ``expected``, ``labels``, ...).
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class ReviewerAuthError(PermanentError):
    """A write needs a reviewer: the token is unknown or revoked, or not assigned to the queue.

    Attributes:
        reviewer: The reviewer's name when the token was known, else None.
    """

    def __init__(self, message: str, *, reviewer: str | None = None) -> None:
        super().__init__(message)
        self.reviewer = reviewer


class ChildError(PermanentError, RuntimeError):
    """A child process died or did not get ready; the message ends with its log.

    Attributes:
        name: The child's name (``api``, ``worker``, ``sink`` ...).
    """

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class ConsoleBindError(PermanentError):
    """``chatscribe console`` was asked to listen beyond loopback without a token.

    Attributes:
        host: The address asked for.
    """

    def __init__(self, host: str) -> None:
        super().__init__(
            f"the console binds {host!r}, beyond loopback: set CHATSCRIBE_CONSOLE_TOKEN first"
        )
        self.host = host


class TraceExportError(TransientError):
    """An OTLP endpoint did not accept exported spans (unreachable, refused, timed out).

    Attributes:
        endpoint: The OTLP/HTTP traces URL.
        spans: How many spans the refused request carried.
    """

    def __init__(self, message: str, *, endpoint: str, spans: int) -> None:
        super().__init__(f"{message} (endpoint={endpoint} spans={spans})")
        self.endpoint = endpoint
        self.spans = spans
