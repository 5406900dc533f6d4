"""What a running job is controlled by: its output, retry policy and abort requests (no I/O).

Used by :class:`pipeline.worker.job_runner.JobRunner`: transient errors before the first line are
retried
with exponential backoff and jitter (tenacity, ``wait_exponential_jitter``), a bounded number of
times; the deadline or a cancellation requests an abort through :class:`JobControl`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final, Protocol

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from models.chat import ChatRequest
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline import metrics
from pipeline.errors import TransientError

logger = logging.getLogger(__name__)

ABORT_GRACE_S: Final = 15.0
"""How long the worker keeps reading after requesting an abort before it closes the stream."""
DEADLINE_REASON: Final = "deadline exceeded"


class Output(Protocol):
    """Where a job's records go (:class:`pipeline.kafka.clients.JobOutput`).

    Errors: a :class:`~pipeline.errors.PermanentError` means this one record can never be
    written (the job fails, the worker carries on); a :class:`~pipeline.errors.TransientError`
    means records may not be durable, and :meth:`JobRunner.run` passes it to its caller.
    """

    async def send_line(self, envelope: LineEnvelope) -> None:
        """Queues a line for ``chat.lines``."""

    async def send_event(self, event: JobEvent) -> None:
        """Queues a lifecycle event for ``chat.job-events``."""

    async def delivered(self) -> None:
        """Waits until every queued record is durable."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of transient errors before the first line: exponential backoff with jitter.

    Attributes:
        attempts: Calls in all (the first one included).
        initial_s, max_s: First and largest wait; each wait doubles, plus up to ``initial_s``
            of random jitter.
    """

    attempts: int = 4
    initial_s: float = 0.2
    max_s: float = 5.0

    def retrying(self) -> AsyncRetrying:
        """Returns: a tenacity controller retrying :class:`TransientError` by this policy.

        Counting each retry in ``chatscribe_worker_stream_retries_total``.
        """
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential_jitter(
                initial=self.initial_s, max=self.max_s, jitter=self.initial_s
            ),
            retry=retry_if_exception_type(TransientError),
            before_sleep=_log_retry,
            reraise=True,
        )


class JobControl:
    """Abort requests for one running job; the first reason wins."""

    def __init__(self) -> None:
        self._requested = asyncio.Event()
        self.reason: str | None = None

    def request_abort(self, reason: str) -> None:
        """Asks the runner to abort the chat (the deadline, a cancellation)."""
        if self.reason is None:
            self.reason = reason
            self._requested.set()

    async def wait(self) -> str:
        """Returns: the reason, once an abort is requested."""
        await self._requested.wait()
        return self.reason or ""


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
