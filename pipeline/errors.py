"""Errors raised by ``pipeline``.

Tree (retryability is part of the type: workers and the sink decide with ``isinstance``)::

    PipelineError
    ├── TransientError                 worth retrying with backoff
    │   ├── ChatConnectError           no connection to the Chat API, or a timeout
    │   ├── ChatServerError            HTTP 5xx before the stream started   (status_code)
    │   ├── ChatThrottledError         HTTP 429, or 503 with Retry-After     (retry_after_s)
    │   ├── StreamBrokenError          the stream ended before it finished  (lines_read)
    │   └── ArchiveUnavailableError    PostgreSQL unreachable or restarting
    └── PermanentError                 retrying cannot help
        ├── ChatClientError            HTTP 4xx                              (status_code)
        │   ├── ChatAuthError          401
        │   ├── ChatForbiddenError     403
        │   └── ChatNotFoundError      404
        ├── InvalidJobError         a chat.requests record is not a job (topic, partition, offset)
        ├── InvalidRecordError      a record the sink cannot archive    (topic, partition, offset)
        ├── ArchiveRejectedError    PostgreSQL refused a value in a batch (sqlstate)
        ├── ArchiveSchemaError      archive tables missing or different: run `chatscribe db upgrade`
        └── ConsoleBindError        the console asked to bind beyond loopback without a token (host)
"""

from __future__ import annotations


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


class ArchiveUnavailableError(TransientError):
    """PostgreSQL is unreachable or restarting."""


class _RecordError(PermanentError):
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
    """The archive's schema, tables or columns are missing or differ from what the code expects
    (run ``chatscribe db upgrade``), or the database user may not use them.

    Attributes:
        sqlstate: PostgreSQL's SQLSTATE code, when known (``42P01`` ...).
    """

    def __init__(self, message: str, *, sqlstate: str | None) -> None:
        super().__init__(f"{message} (sqlstate={sqlstate})")
        self.sqlstate = sqlstate


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
