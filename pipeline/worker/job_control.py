"""What a running job is controlled by: its output, retry policy and abort requests (no I/O).

Used by :class:`pipeline.worker.job_runner.JobRunner`: transient errors before the first line are
retried with exponential backoff and jitter (tenacity), a bounded number of times; the deadline or
a cancellation requests an abort through :class:`JobControl`.

Throttling (HTTP 429, or 503 with ``Retry-After``: :class:`~pipeline.errors.ChatThrottledError`)
is not a failure: the call is made again without counting an attempt, after the wait the agent
asked for but never sooner than the throttle floor (1 s by default, doubling with each throttled
answer of the call up to 30 s, plus jitter: an agent answering ``Retry-After: 0`` forever gets a
call every few seconds, not thousands). A call throttled ``max_throttles`` times fails the job
(:class:`~pipeline.errors.ChatThrottleLimitError`), as does a wait that would end past the job's
deadline (with the throttling error). Every throttled answer is told to the job's
:class:`Throttling` observer (the admission ticket, which lowers the target's adaptive
concurrency) and counted in :attr:`JobControl.throttled`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from models.chat import ChatRequest
from models.records import ChatJob, Headers, JobEvent
from pipeline import metrics
from pipeline.errors import ChatThrottledError, ChatThrottleLimitError, TransientError

logger = logging.getLogger(__name__)
T = TypeVar("T")

THROTTLE_MAX_WAIT_S: Final = 30.0
"""Where the doubling throttle floor stops growing (an agent's longer ``Retry-After`` wins)."""
ABORT_GRACE_S: Final = 15.0
"""How long the worker keeps reading after requesting an abort before it closes the stream."""
DEADLINE_REASON: Final = "deadline exceeded"


class Output(Protocol):
    """Where a job's records go (:class:`pipeline.kafka.clients.JobOutput`).

    Errors: a :class:`~pipeline.errors.PermanentError` means this one record can never be
    written (the job fails, the worker carries on); a :class:`~pipeline.errors.TransientError`
    means records may not be durable, and :meth:`JobRunner.run` passes it to its caller.
    """

    async def send_line(self, raw: bytes, headers: Headers) -> None:
        """Queues a line for ``chat.lines``: its bytes as received and its headers.

        ``headers`` come from :class:`models.records.LineHeaders` (the record's key is the
        output's job id).
        """

    async def send_event(self, event: JobEvent) -> None:
        """Queues a lifecycle event for ``chat.job-events``."""

    async def delivered(self) -> None:
        """Waits until every queued record is durable."""


class Throttling(Protocol):
    """Told about a job's call outcomes (:class:`pipeline.worker.admission.Ticket`)."""

    def throttled(self, retry_after_s: float | None) -> None:
        """The agent answered 429 (or 503 with ``Retry-After``)."""

    def accepted(self) -> None:
        """The agent accepted the call (a 2xx status): it serves this stream."""

    def first_line(self, latency_s: float) -> None:
        """The first line arrived ``latency_s`` seconds after the successful call started."""

    def stream_ended(self) -> None:
        """The attempt's stream is closed: its slot and stream leases may go to another job."""

    async def admitted(self) -> None:
        """Returns once the job holds a stream slot again (after :meth:`stream_ended`)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retries before the first line: failures with backoff, throttling after ``Retry-After``.

    Failures wait an exponential backoff with jitter, throttling the agent's ``Retry-After`` (module
    docstring).

    Attributes:
        attempts: Calls that fail other than by throttling, in all (the first one included).
        initial_s, max_s: First and largest backoff; each doubles, plus up to ``initial_s`` of
            random jitter.
        throttle_floor_s: Shortest wait after the first throttled answer of a call; it doubles
            with each further one up to :data:`THROTTLE_MAX_WAIT_S`, plus up to
            ``throttle_floor_s`` of jitter. The agent's ``Retry-After`` wins when longer.
        max_throttles: Throttled answers of one call that fail the job
            (:class:`~pipeline.errors.ChatThrottleLimitError`) instead of being waited out.
    """

    attempts: int = 4
    initial_s: float = 0.2
    max_s: float = 5.0
    throttle_floor_s: float = 1.0
    max_throttles: int = 30

    def retrying(
        self, control: JobControl | None = None, *, deadline_at: float | None = None
    ) -> AsyncRetrying:
        """Returns: a tenacity controller for one job's call (a fresh one per call).

        Args:
            control: The job's control: counts throttled answers and tells its observer.
            deadline_at: ``time.monotonic()`` value of the job's deadline; no wait ends past
                it (the last error is raised instead). None: no bound but ``attempts``.
        """
        budget = _Budget(self, control or JobControl(), deadline_at)
        return AsyncRetrying(
            stop=budget.stop,
            wait=budget.wait,
            retry=retry_if_exception_type(TransientError),
            before_sleep=_log_retry,
            reraise=True,
        )

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        control: JobControl | None = None,
        deadline_at: float | None = None,
    ) -> T:
        """Calls ``fn()`` and retries its transient errors as :meth:`retrying` does.

        The first call is made directly: a tenacity controller costs ~0.1 ms of CPU per call
        it wraps (100 short streams at once, ``bench/history.md``, "sixth round"), and nearly
        every call succeeds. The controller is built once the first call fails with a
        :class:`~pipeline.errors.TransientError`, and takes that failure as its first
        attempt's outcome: the waits, stops, logs and throttle counts are those of a
        controller around every call.

        Args:
            fn: Makes one call.
            control: As for :meth:`retrying`.
            deadline_at: As for :meth:`retrying`.

        Raises:
            ChatThrottleLimitError: The call was throttled ``max_throttles`` times.
            Whatever the last call raised (tenacity's ``reraise=True``); an error other than a
            :class:`~pipeline.errors.TransientError` at once.
        """
        control = control or JobControl()
        throttles = 0

        async def once() -> T:
            nonlocal throttles
            try:
                return await fn()
            except ChatThrottledError as exc:
                throttles += 1
                if throttles < self.max_throttles:
                    raise
                control.on_throttled(exc.retry_after_s)
                raise ChatThrottleLimitError(exc, throttles=throttles) from exc

        try:
            return await once()
        except TransientError as exc:
            first: TransientError | None = exc

        async def again() -> T:
            nonlocal first
            if first is not None:  # the call already made, as the controller's attempt 1
                error, first = first, None
                raise error
            return await once()

        retrying = self.retrying(control, deadline_at=deadline_at)
        return await retrying(again)

    def backoff_s(self, failures: int) -> float:
        """Returns: the wait after the ``failures``-th failure (1, 2, ...) in seconds."""
        exponent = max(failures - 1, 0)
        wait_s: float = self.initial_s * 2**exponent + random.uniform(0, self.initial_s)
        return min(wait_s, self.max_s)

    def throttle_wait_s(self, throttles: int, retry_after_s: float | None) -> float:
        """Returns: the wait in seconds after the ``throttles``-th throttled answer (1, 2, ...).

        The agent's ``retry_after_s`` when longer than the floor (``throttle_floor_s`` doubled
        per earlier throttled answer, at most :data:`THROTTLE_MAX_WAIT_S`), else the floor,
        plus up to ``throttle_floor_s`` of random jitter.
        """
        doubled_s: float = self.throttle_floor_s * 2 ** max(throttles - 1, 0)
        floor_s = min(doubled_s, THROTTLE_MAX_WAIT_S) + random.uniform(0, self.throttle_floor_s)
        return max(floor_s, retry_after_s or 0.0)


class _Budget:
    """One call's retry state: failures and throttled answers counted apart."""

    def __init__(self, policy: RetryPolicy, control: JobControl, deadline_at: float | None):
        self._policy = policy
        self._control = control
        self._deadline_at = deadline_at
        self.failures = 0
        self.throttles = 0

    def wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, ChatThrottledError):
            self.throttles += 1
            self._control.on_throttled(error.retry_after_s)
            return self._policy.throttle_wait_s(self.throttles, error.retry_after_s)
        self.failures += 1
        return self._policy.backoff_s(self.failures)

    def stop(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        past_deadline = (
            self._deadline_at is not None
            and time.monotonic() + state.upcoming_sleep > self._deadline_at
        )
        if isinstance(error, ChatThrottledError):
            if past_deadline:
                logger.warning("throttled past the deadline wait_s=%.1f", state.upcoming_sleep)
            return past_deadline
        return past_deadline or self.failures >= self._policy.attempts


class JobControl:
    """Abort requests for one running job (the first reason wins), and what its calls met.

    Args:
        observer: Told of throttled and accepted calls and first-line latencies (the admission
            ticket).

    Attributes:
        reason: Why an abort was requested; None while none was.
        throttled: Throttled answers absorbed since :meth:`take_throttled` last ran.
        call_started: ``time.monotonic()`` when the latest call to the Chat API started.
    """

    def __init__(self, observer: Throttling | None = None) -> None:
        self._observer = observer
        self._on_abort: Callable[[str], None] | None = None
        self.reason: str | None = None
        self.throttled = 0
        self.call_started = time.monotonic()

    def request_abort(self, reason: str) -> None:
        """Asks the runner to abort the chat (the deadline, a cancellation); the first wins."""
        if self.reason is None:
            self.reason = reason
            if self._on_abort is not None:
                self._on_abort(reason)

    def on_abort(self, listener: Callable[[str], None] | None) -> None:
        """Sets who is told the reason when an abort is requested (None: nobody).

        The runner's attempt listens while its stream is open (a callback, not a task per
        job: ``bench/history.md``, "sixth round"); a request made before it listened is told
        at once.
        """
        self._on_abort = listener
        if listener is not None and self.reason is not None:
            listener(self.reason)

    def on_throttled(self, retry_after_s: float | None) -> None:
        """Counts a throttled answer and tells the observer."""
        self.throttled += 1
        metrics.THROTTLED.inc()
        if self._observer is not None:
            self._observer.throttled(retry_after_s)

    def accepted(self) -> None:
        """Tells the observer the agent accepted the latest call (its status was a 2xx)."""
        if self._observer is not None:
            self._observer.accepted()

    def first_line(self) -> None:
        """Tells the observer how long the latest call took to give its first line."""
        if self._observer is not None:
            self._observer.first_line(time.monotonic() - self.call_started)

    def stream_ended(self) -> None:
        """Tells the observer the attempt's stream is closed.

        Its slot is free before the terminal event is delivered.
        """
        if self._observer is not None:
            self._observer.stream_ended()

    async def admitted(self) -> None:
        """Waits until the job may open a stream (a slot before each call).

        The call's first-line latency is counted from here, not from before the wait.
        """
        if self._observer is not None:
            await self._observer.admitted()
        self.call_started = time.monotonic()

    def take_throttled(self) -> int:
        """Returns: throttled answers since the last call (for an attempt's terminal event)."""
        count, self.throttled = self.throttled, 0
        return count


def chat_request(job: ChatJob, *, state_of: str | None = None) -> ChatRequest:
    """Returns: the chat request for ``job`` (interface, "1. Chat").

    Args:
        job: The job.
        state_of: A chat id: ask for that thread's current state (no ``input``) instead of
            asking the question.
    """
    return ChatRequest(
        input=job.question if state_of is None else None,
        chat_id=state_of or job.chat_id,
        session_settings=job.session_settings,
        active_branch_name=job.active_branch_name,
        is_default_branch=job.is_default_branch,
    )


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    wait_s = state.next_action.sleep if state.next_action else 0.0
    if error is not None:
        metrics.RETRIES.labels(error_type=type(error).__name__).inc()
    logger.warning(
        "chat call retry attempt=%s wait_s=%.2f error=%r", state.attempt_number, wait_s, error
    )
