"""Errors raised by our Chat API implementation.

Every error of the package derives from one root, so the HTTP layer can turn any of them into a
tool result with an ``error`` member (``chat-api-interface.md``, "Errors": a failed tool returns
a result whose JSON has an ``error`` property) with one ``except`` clause::

    ChatApiError
     ├── ModelError              the semantic data model (YAML) is invalid: file, path, message
     ├── SemanticSqlError        a Semantic SQL query was refused: code, message
     │    └── AccessDeniedError  the user may not query a view at all (code ``access_denied``)
     ├── UnreadableQuestionError  the reader can't read a question without guessing (reason)
     │    └── InvalidQueryError   a typed query fails the model's checks (code, member)
     ├── LanguageModelError      the language model's endpoint failed a reader call
     │    ├── LanguageModelUnavailableError  timeout, 429/5xx, stalled stream (transient;
     │    │                                  status_code, retry_after_s)
     │    └── CircuitOpenError   the endpoint kept failing: calls paused (retry_after_s)
     ├── QueryExecutionError     DuckDB failed or timed out while running a compiled query
     ├── TruthSpecError          an evaluation question's truth mapping is malformed (part)
     └── RequestError            the server refuses an HTTP request: status_code, message
          ├── InvalidRequestError   400: body or parameters invalid
          │    ├── UndeclaredAttributeError   userAttributes name not declared (names)
          │    ├── UndeclaredGroupError       groups name not declared (names)
          │    ├── UnknownInternalUserError   internalId names no internal user (email)
          │    └── UnknownBranchError   activeBranchName names no branch (branch, known)
          ├── UnauthorizedError     401: API key missing or wrong
          ├── BodyTooLargeError     413: body over the size limit (max_bytes)
          │    └── InputTooLargeError   413: chat ``input`` over its limit (max_chars)
          ├── UnsupportedMediaTypeError  415: a body declared as something else than JSON
          ├── ThreadOwnerError      403: another user owns the thread (chat_id)
          ├── UserLimitError        403: the account's external user limit is reached (limit)
          ├── SessionInvalidError   403: embed session unknown, expired, used or revoked (reason)
          ├── NotFoundError         404: agent, tenant or thread unknown
          │    ├── ThreadNotFoundError   (chat_id)
          │    ├── SessionNotFoundError  revoke of an unknown embed session
          │    └── SessionUserGoneError  an embed session whose user expired (issue 12)
          └── ThreadBusyError       409: the thread already has a running turn (chat_id)

The HTTP layer answers a ``RequestError`` with its status and ``{"error", "status"}``; the others
become tool results. The model and query errors are permanent for the query that raised them:
retrying the same query with the same user gives the same answer, so none is marked transient,
except ``LanguageModelUnavailableError`` (``transient = True``): the endpoint may answer later.
"""

from __future__ import annotations


class ChatApiError(Exception):
    """Root of every error raised by ``chat_api``."""


class ModelError(ChatApiError):
    """The semantic data model is invalid.

    Attributes:
        file: The YAML file holding the faulty definition (``"flights.yml"``), or ``""`` when the
            problem spans files (for example a view naming a cube defined nowhere).
        path: Where in the model, as a dotted path (``"cubes.flights.joins.airlines.sql"``).
        message: What is wrong, for a human.
    """

    def __init__(self, message: str, *, file: str = "", path: str = "") -> None:
        self.file = file
        self.path = path
        self.message = message
        where = ":".join(part for part in (file, path) if part)
        super().__init__(f"{where}: {message}" if where else message)


class SemanticSqlError(ChatApiError):
    """A Semantic SQL query was refused before it reached the warehouse.

    Attributes:
        code: A stable machine-readable reason, one of ``parse_error``, ``multiple_statements``,
            ``not_select``, ``unsupported_syntax``, ``unknown_view``, ``unknown_member``,
            ``ambiguous_member``, ``hidden_member``, ``access_denied``, ``forbidden_function``,
            ``forbidden_name``, ``measure_outside_measure``, ``not_a_measure``,
            ``missing_group_by``.
        message: A helpful explanation meant to be shown to the agent, naming the member, view or
            function at fault and how to fix the query where there is a fix.
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class AccessDeniedError(SemanticSqlError):
    """The user may not query a view: no access policy matches, or a policy needs an unset value.

    Attributes:
        view: The view that was refused.
        reason: Why, for a human (``"no access policy of cube flights matches the user"``).
    """

    def __init__(self, view: str, reason: str) -> None:
        self.view = view
        self.reason = reason
        super().__init__("access_denied", f"access to view {view} denied: {reason}")


class UnreadableQuestionError(ChatApiError):
    """The reader can't read a question without guessing; ``reason`` names the words.

    Not a failure of the turn: the agent answers with the reason instead of a number.

    Attributes:
        reason: The sentence for the answer.
        words: The question's words that link to nothing, or only to another view than the
            rest of the question (empty for other reasons).
    """

    def __init__(self, reason: str, *, words: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.words = words


class InvalidQueryError(UnreadableQuestionError):
    """A typed query names what the model or the user's access does not have.

    Raised by ``chat_api.reader.checks.check_query`` for every reader's query; the agent answers
    with ``reason`` (an unreadable question) and the language-model reader sends it back once.

    Attributes:
        code: ``unknown_view``, ``unknown_member``, ``hidden_member``, ``wrong_type``,
            ``bad_operator``, ``bad_value``, ``value_outside_domain`` or ``malformed``.
        member: The member at fault (``view.member``), or "".
    """

    def __init__(self, code: str, reason: str, *, member: str = "") -> None:
        super().__init__(reason)
        self.code = code
        self.member = member


class LanguageModelError(ChatApiError):
    """The language model's endpoint failed a call of the language-model reader.

    Attributes:
        message: What failed, for the log and the refusal (never the API key).
    """

    transient = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LanguageModelUnavailableError(LanguageModelError):
    """A timeout, a stalled stream, a refused connection, a 429 or a 5xx after the retries.

    Attributes:
        status_code: The HTTP status, or None (timeout, connection, stalled stream).
        retry_after_s: The endpoint's ``Retry-After`` in seconds, or None.
    """

    transient = True

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class CircuitOpenError(LanguageModelError):
    """The endpoint failed too often in a row: no call is made until ``retry_after_s`` passes.

    Attributes:
        retry_after_s: Seconds until the next call is tried.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class QueryExecutionError(ChatApiError):
    """DuckDB failed to run a compiled query, or the query ran past its time limit.

    Attributes:
        message: DuckDB's message (or the timeout), for a human.
        sql: The DuckDB SQL that failed.
        timed_out: True when the query was interrupted after ``timeout_s``.
    """

    def __init__(self, message: str, *, sql: str, timed_out: bool = False) -> None:
        self.message = message
        self.sql = sql
        self.timed_out = timed_out
        super().__init__(message)


class RequestError(ChatApiError):
    """A request the server refuses; the HTTP layer answers ``{"error", "status"}``.

    Attributes:
        message: What is wrong, precise enough to fix the request.
        status_code: The HTTP status (interface, "Errors").
    """

    status_code = 400

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class InvalidRequestError(RequestError):
    """400: invalid request body or parameters (interface, "Errors")."""

    status_code = 400


class UnauthorizedError(RequestError):
    """401: invalid or missing API key (interface, "Errors")."""

    status_code = 401


class NotFoundError(RequestError):
    """404: agent, tenant or chat thread not found (interface, "Errors")."""

    status_code = 404


class ThreadNotFoundError(NotFoundError):
    """404: no thread with this chatId, or (for chat) one owned by another user.

    Attributes:
        chat_id: The chatId asked for.
    """

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"chat thread not found: chatId {chat_id!r}")


class ThreadOwnerError(RequestError):
    """403: the user does not own the chat thread (interface, "Errors", abort only).

    Attributes:
        chat_id: The thread's chatId.
    """

    status_code = 403

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"the user does not own chat thread {chat_id!r}")


class ThreadBusyError(RequestError):
    """409: a turn is already streaming on this thread (field notes, "Threads").

    Attributes:
        chat_id: The thread's chatId.
    """

    status_code = 409

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__("Streaming for thread is in progress")


class BodyTooLargeError(RequestError):
    """413: the request body is larger than the server accepts.

    Attributes:
        max_bytes: The largest body accepted, in bytes.
    """

    status_code = 413

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        super().__init__(f"request body larger than {max_bytes} bytes")


class InputTooLargeError(BodyTooLargeError):
    """413: the chat ``input`` is longer than ``CHATSCRIBE_MAX_INPUT_CHARS``.

    Issue 12: a huge question made a reply 29 times its size and held the workers.

    Attributes:
        max_chars: The longest ``input`` accepted, in characters.
    """

    def __init__(self, length: int, max_chars: int) -> None:
        self.max_chars = max_chars
        RequestError.__init__(
            self, f"input: {length} characters, longer than the limit of {max_chars} characters"
        )


class UnsupportedMediaTypeError(RequestError):
    """415: the request declares a body type other than JSON.

    Attributes:
        content_type: The ``Content-Type`` sent.
    """

    status_code = 415

    def __init__(self, content_type: str) -> None:
        self.content_type = content_type
        super().__init__(f"Content-Type {content_type!r} is not supported: send application/json")


class UnknownBranchError(InvalidRequestError):
    """400: ``activeBranchName`` names no branch of the data model (interface, "1. Chat").

    Attributes:
        branch: The name asked for.
        known: The branch names that exist.
    """

    def __init__(self, branch: str, *, known: tuple[str, ...]) -> None:
        self.branch = branch
        self.known = known
        super().__init__(
            f"activeBranchName: unknown branch {branch!r}; branches: {', '.join(known)}"
        )


class UndeclaredAttributeError(InvalidRequestError):
    """400: a ``userAttributes`` name is not declared for the account.

    Interface, "Session settings": "Each attribute must first be configured in the admin panel".

    Attributes:
        names: The undeclared names, sorted.
        declared: The names the account declares, sorted.
    """

    def __init__(self, names: list[str], *, declared: list[str]) -> None:
        self.names = names
        self.declared = declared
        listed = ", ".join(declared) or "none"
        super().__init__(
            f"userAttributes: not declared for this account: {', '.join(names)} "
            f"(declared: {listed})"
        )


class UndeclaredGroupError(InvalidRequestError):
    """400: a ``groups`` name is not declared for the account.

    Field notes, "Generate session": unknown attribute or group names are errors.

    Attributes:
        names: The undeclared names, sorted.
        declared: The names the account declares (``CHATSCRIBE_USER_GROUPS``), sorted.
    """

    def __init__(self, names: list[str], *, declared: list[str]) -> None:
        self.names = names
        self.declared = declared
        listed = ", ".join(declared) or "none"
        super().__init__(
            f"groups: not declared for this account: {', '.join(names)} (declared: {listed})"
        )


class UnknownInternalUserError(InvalidRequestError):
    """400: ``internalId`` names no existing internal user.

    Interface, "Session settings": "The user must already exist".

    Attributes:
        email: The ``internalId`` given.
    """

    def __init__(self, email: str, account: str) -> None:
        self.email = email
        super().__init__(
            f"sessionSettings.internalId: no internal user {email!r} in account {account!r} "
            "(create it with `chatscribe api users add`)"
        )


class UserLimitError(RequestError):
    """403: creating one more external user would pass the account's limit.

    Interface, "Limits": 10,000 external users per account.

    Attributes:
        limit: The configured limit (``CHATSCRIBE_MAX_EXTERNAL_USERS``).
    """

    status_code = 403

    def __init__(self, account: str, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"external user limit reached: account {account!r} already has {limit} external "
            "users; reuse an externalId or wait for ephemeral users to expire"
        )


class SessionInvalidError(RequestError):
    """403: an embed session cannot be redeemed.

    Field notes, "Generate session": single use, valid for 5 minutes, revocable.

    Attributes:
        reason: ``"unknown"``, ``"expired"``, ``"used"`` or ``"revoked"``.
    """

    status_code = 403

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"embed session {reason}: generate a new session")


class SessionNotFoundError(NotFoundError):
    """404: revoke of a sessionId the service never issued (or already purged)."""

    def __init__(self) -> None:
        super().__init__("embed session not found")


class SessionUserGoneError(NotFoundError):
    """404: the embed session's user no longer exists.

    An ephemeral user past its lifetime is gone everywhere, with its threads and sessions
    (interface, "What the service does").
    """

    def __init__(self) -> None:
        super().__init__("embed session's user not found: the user expired")


class TruthSpecError(ChatApiError, ValueError):
    """A truth mapping in an evaluation questions file is malformed.

    The message names the offending part (``chat_api.evaluation.truth``). Also a ``ValueError``,
    so callers that caught that still do.
    """
