"""What one attempt of a chat job saw, and the terminal event it earns (pure, no I/O).

Terminal event kind, first rule that applies:

1. ``aborted`` — an abort was requested (the deadline passed, or a cancellation) and the stream
   then ended, broke, or was closed by the worker;
2. ``failed`` — the call failed: HTTP 4xx, 5xx or no connection after the retries, a broken
   stream, a line Kafka cannot hold, an unexpected error;
3. ``aborted`` — the stream ended with ``__aborted__`` (field notes, "Lines that the interface
   does not list");
4. ``failed`` — the stream carried an ``{"error": ...}`` line inside the HTTP 200 (field notes),
   or was ``__suspended__``;
5. ``failed`` — a state fetch (a takeover's chat request without ``input``) whose thread shows
   no answer to the question (``TurnInterrupted``);
6. ``completed``.

Attempts (:func:`plan_attempt`): a job's attempt number and chat id survive a worker crash in
the job's own events on ``chat.job-events`` (:class:`PriorAttempts`, read back by
:mod:`pipeline.worker.history`). A takeover of a job whose thread already received the question
fetches the thread's state instead of asking again (issue 4, "Delivery"); otherwise it asks
again as the next attempt. An attempt whose worker was lost has no terminal event; the takeover
records one for it (``failed``, ``AttemptSuperseded``: :func:`superseded_event`) before its own
``started``, so every attempt in the archive ends exactly once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, Literal

from models import wire
from models.chat import StreamMessage
from models.records import JobEvent
from pipeline.errors import ChatHttpError, StreamBrokenError
from pipeline.transcript.thread_state import state_answer

TerminalKind = Literal["completed", "failed", "aborted"]
AttemptMode = Literal["ask", "state", "exhausted"]
"""``ask``: send the question; ``state``: fetch the thread's state (chat request without
``input``, interface "1. Chat"); ``exhausted``: record a failure without calling."""

ERROR_TYPE_STREAM_ERROR: Final = "StreamErrorLine"
ERROR_TYPE_SUSPENDED: Final = "ChatSuspended"
ERROR_TYPE_CLOSED: Final = "StreamClosedByWorker"
ERROR_TYPE_INTERRUPTED: Final = "TurnInterrupted"
ERROR_TYPE_EXHAUSTED: Final = "AttemptsExhausted"
ERROR_TYPE_BROKEN: Final = StreamBrokenError.__name__
"""``error_type`` of an attempt whose stream broke mid-way: the job continues as a new attempt."""
ERROR_TYPE_SUPERSEDED: Final = "AttemptSuperseded"
"""``error_type`` recorded for an attempt whose worker was lost, when the next one starts."""
_CONTINUED: Final = frozenset({ERROR_TYPE_BROKEN, ERROR_TYPE_SUPERSEDED})
HTTP_OK: Final = 200
DEFAULT_MAX_ATTEMPTS: Final = 3


@dataclass
class AttemptState:
    """What the lines of one attempt showed so far.

    Attributes:
        chat_id: The thread id (``state.chatId`` of ``__cutoff__``, or the job's own).
        lines: Lines produced to ``chat.lines``.
        http_status: 200 once the stream opened.
        error_line: Message of the first ``{"error": ...}`` line.
        aborted_code: ``code`` of an ``__aborted__`` line.
        suspended: Whether a ``__suspended__`` line came.
        state_fetch: Whether this attempt fetched the thread's state instead of asking.
        answered: Whether a final answer line came, or a ``__state__`` line whose messages
            end with an answer after the last question.
    """

    chat_id: str | None = None
    lines: int = 0
    http_status: int | None = None
    error_line: str | None = None
    aborted_code: str | None = None
    suspended: bool = False
    state_fetch: bool = False
    answered: bool = False

    def observe(self, message: StreamMessage | None) -> bool:
        """Takes note of one parsed line (None for a line that did not parse).

        Returns:
            True when this line told the chat id for the first time.
        """
        if message is None:
            return False
        if message.is_error_line and self.error_line is None:
            error = message.error
            self.error_line = error if isinstance(error, str) else json.dumps(error)
        if message.id == wire.ID_ABORTED:
            self.aborted_code = message.code or "chat_aborted"
        self.suspended = self.suspended or message.id == wire.ID_SUSPENDED
        self.answered = self.answered or message.is_final_answer or _state_answers(message)
        if self.chat_id is None and message.chat_id is not None:
            self.chat_id = message.chat_id
            return True
        return False


@dataclass(frozen=True)
class Outcome:
    """The terminal event's kind and error fields."""

    kind: TerminalKind
    http_status: int | None = None
    error: str | None = None
    error_type: str | None = None


def outcome(
    state: AttemptState, *, abort_reason: str | None, error: BaseException | None
) -> Outcome:
    """Decides the terminal event of an attempt (rules in the module docstring).

    Args:
        state: What the attempt's lines showed.
        abort_reason: Why an abort was requested (``"deadline exceeded"``, ``"cancelled: ..."``),
            or None.
        error: What ended the stream early: an error of ours, ``TimeoutError`` when the worker
            closed the stream, or None when the stream ended by itself.

    Returns:
        The outcome; ``http_status`` is the error's status, else 200 once the stream opened.
    """
    status = error.status_code if isinstance(error, ChatHttpError) else state.http_status
    ended_or_closed = error is None or isinstance(error, TimeoutError | StreamBrokenError)
    if abort_reason is not None and ended_or_closed:
        if isinstance(error, TimeoutError):
            detail = f"{abort_reason}; stream closed by the worker"
            return Outcome("aborted", status, detail, ERROR_TYPE_CLOSED)
        return Outcome("aborted", status, abort_reason)
    if error is not None:
        return Outcome("failed", status, str(error) or repr(error), type(error).__name__)
    if state.aborted_code is not None:
        return Outcome("aborted", status, f"chat aborted by the service ({state.aborted_code})")
    if state.error_line is not None:
        return Outcome("failed", status, state.error_line, ERROR_TYPE_STREAM_ERROR)
    if state.suspended:
        return Outcome("failed", status, "chat suspended (retryable)", ERROR_TYPE_SUSPENDED)
    if state.state_fetch and not state.answered:
        detail = "the thread's state holds no answer to the question (turn interrupted)"
        return Outcome("failed", status, detail, ERROR_TYPE_INTERRUPTED)
    return Outcome("completed", status)


def _state_answers(message: StreamMessage) -> bool:
    """True for a ``__state__`` line holding an answer after the last question.

    See :func:`pipeline.transcript.thread_state.state_answer`.
    """
    return message.id == wire.ID_STATE and state_answer(message.state) is not None


@dataclass(frozen=True)
class PriorAttempts:
    """What a job's own events on ``chat.job-events`` tell about its earlier attempts.

    Attributes:
        attempt: The highest attempt that started (0: none).
        open: Whether that attempt may be continued: it has no terminal event (its worker was
            lost), or it ended as broken (``error_type`` ``StreamBrokenError``) or superseded
            (``AttemptSuperseded``, :func:`superseded_event`).
        chat_id: The thread that received the question: the chat id of a ``first_line`` event
            or of a terminal event with lines (a line came back, so the service took the input).
        lost: Whether that attempt started and has no terminal event at all.
    """

    attempt: int = 0
    open: bool = False
    chat_id: str | None = None
    lost: bool = False

    def observe(self, event: JobEvent) -> PriorAttempts:
        """Returns: the summary with ``event`` (of this job, in topic order) taken into account."""
        attempt, open_, chat_id, lost = self.attempt, self.open, self.chat_id, self.lost
        with_lines = event.kind == "first_line" or (event.is_terminal and bool(event.line_count))
        if with_lines and event.chat_id is not None:
            chat_id = event.chat_id
        if event.kind == "started" and event.attempt >= attempt:
            attempt, open_, lost = event.attempt, True, True
        elif event.is_terminal and event.attempt >= attempt:
            attempt, open_, lost = event.attempt, event.error_type in _CONTINUED, False
        return PriorAttempts(attempt, open_, chat_id, lost)


def superseded_event(
    prior: PriorAttempts, *, job_id: str, run_id: str, worker_id: str
) -> JobEvent | None:
    """The terminal event that closes a lost attempt, sent before the next attempt starts.

    A worker killed mid-stream, or one that handed its running job over on a long rebalance
    (:class:`pipeline.worker.group.HandOver`), leaves its attempt without a terminal event; so
    that every attempt in the archive ends with exactly one, the worker that takes the job over
    records it as ``failed`` with ``error_type`` ``AttemptSuperseded`` (its lines stay as they
    were stored; ``line_count`` is unknown, so the attempt is never normalised). The attempt
    stays open (:class:`PriorAttempts`), so a takeover that dies before its own ``started`` is
    taken over again, and the event is sent once: only while the attempt has no terminal event.

    Returns:
        The event, or None when the highest attempt is not lost.
    """
    if not prior.lost:
        return None
    return JobEvent(
        job_id=job_id,
        run_id=run_id,
        kind="failed",
        attempt=prior.attempt,
        chat_id=prior.chat_id,
        error=(
            f"attempt {prior.attempt} ended without an outcome (its worker was lost or handed "
            "the job over); continued as the next attempt"
        ),
        error_type=ERROR_TYPE_SUPERSEDED,
        worker_id=worker_id,
    )


@dataclass(frozen=True)
class AttemptPlan:
    """The next attempt of a job: its number, what it sends, and the thread it continues."""

    attempt: int
    mode: AttemptMode
    chat_id: str | None = None


def plan_attempt(
    prior: PriorAttempts, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
) -> AttemptPlan | None:
    """Decides a job's next attempt from its earlier ones (module docstring, "Attempts").

    Args:
        prior: The job's earlier attempts (``PriorAttempts()`` for a job never started).
        max_attempts: Attempts allowed in all; the one after them is ``exhausted``.

    Returns:
        None when the job already has a final outcome (its offset was simply not committed);
        else attempt 1 ``ask`` for a fresh job, or the next attempt: ``exhausted`` past
        ``max_attempts``, ``state`` when the thread already received the question, ``ask``
        otherwise.
    """
    if prior.attempt == 0:
        return AttemptPlan(1, "ask")
    if not prior.open:
        return None
    attempt = prior.attempt + 1
    if attempt > max_attempts:
        return AttemptPlan(attempt, "exhausted", prior.chat_id)
    if prior.chat_id is not None:
        return AttemptPlan(attempt, "state", prior.chat_id)
    return AttemptPlan(attempt, "ask")
