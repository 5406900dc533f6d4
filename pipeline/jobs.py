"""Running one chat job: its Chat API stream out to Kafka, line by line, then one terminal event.

No faust and no Kafka client here. :class:`JobRunner` talks to the Chat API through
:class:`pipeline.client.ChatClient` and writes through an :class:`Output` (in the worker,
:class:`pipeline.kafka.JobOutput`). The records of one attempt, in order::

    started ─ line 1 ─ first_line ─ line 2 … line n ─ (all delivered) ─ terminal event

* Transient errors before the first line are retried (:class:`RetryPolicy`); 4xx never are.
* At the deadline (``job.deadline_s`` or the default) or on a cancellation the runner calls the
  abort endpoint once the chat id is known and keeps reading to the end; ``abort_grace_s`` after
  the request it closes the stream itself.
* The terminal event follows :func:`pipeline.attempts.outcome`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from models.chat import AbortRequest, ChatRequest
from models.records import ChatJob, EventKind, JobEvent, LineEnvelope
from pipeline import metrics
from pipeline.attempts import HTTP_OK, AttemptState, outcome
from pipeline.client import ChatClient, StreamLine
from pipeline.errors import PipelineError, TransientError

logger = logging.getLogger(__name__)

ABORT_GRACE_S: Final = 15.0
"""How long the worker keeps reading after requesting an abort before it closes the stream."""
DEADLINE_REASON: Final = "deadline exceeded"

ChatStream = AsyncGenerator[StreamLine, None]


class Output(Protocol):
    """Where a job's records go (:class:`pipeline.kafka.JobOutput`).

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


@dataclass
class _Run:
    """One attempt in progress."""

    job: ChatJob
    attempt: int
    state: AttemptState
    control: JobControl
    started: float = field(default_factory=time.monotonic)
    chat_id_known: asyncio.Event = field(default_factory=asyncio.Event)


def chat_request(job: ChatJob) -> ChatRequest:
    """Returns: the chat request that asks ``job``'s question (interface, "1. Chat")."""
    return ChatRequest(
        input=job.question,
        chat_id=job.chat_id,
        session_settings=job.session_settings,
        active_branch_name=job.active_branch_name,
        is_default_branch=job.is_default_branch,
    )


class JobRunner:
    """Runs chat jobs: retries, deadline, abort, fan-out of every line, terminal event.

    Args:
        client: The Chat API client (shared by all jobs of the process).
        job_deadline_s: Deadline of jobs that do not carry ``deadline_s``.
        worker_id: Written into every event.
        retry: Retries before the first line.
        abort_grace_s: Seconds to keep reading after an abort request.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        job_deadline_s: float,
        worker_id: str | None = None,
        retry: RetryPolicy | None = None,
        abort_grace_s: float = ABORT_GRACE_S,
    ) -> None:
        self._client = client
        self._job_deadline_s = job_deadline_s
        self._worker_id = worker_id
        self._retry = retry or RetryPolicy()
        self._abort_grace_s = abort_grace_s
        self.jobs_run = 0

    def __repr__(self) -> str:
        return f"<JobRunner jobs_run={self.jobs_run} client={self._client!r}>"

    async def run(
        self, job: ChatJob, output: Output, *, attempt: int = 1, control: JobControl | None = None
    ) -> JobEvent:
        """Runs one attempt of ``job`` to its end and makes every record of it durable.

        Args:
            job: The job (its own ``api_key`` is used when set).
            output: Where the lines and events go.
            attempt: Attempt number written into every record (1 for a first run).
            control: Lets another task request an abort (cancellations).

        Returns:
            The terminal event, delivered after all the attempt's lines were.

        Raises:
            TransientError: From ``output`` (e.g. :class:`pipeline.kafka.RecordDeliveryError`):
                records may not be durable, so the caller must not acknowledge the job.
        """
        run = _Run(job, attempt, AttemptState(chat_id=job.chat_id), control or JobControl())
        if job.chat_id is not None:
            run.chat_id_known.set()
        self.jobs_run += 1
        logger.info("job started job_id=%s attempt=%s", job.job_id, attempt)
        await output.send_event(self._event(run, "started", job=job.without_secrets()))
        error = await self._drive(run, output)
        await output.delivered()
        result = outcome(run.state, abort_reason=run.control.reason, error=error)
        terminal = self._event(
            run,
            result.kind,
            line_count=run.state.lines,
            http_status=result.http_status,
            error=result.error,
            error_type=result.error_type,
        )
        await output.send_event(terminal)
        await output.delivered()
        self._finished(run, terminal)
        return terminal

    async def skip(
        self, job: ChatJob, output: Output, *, reason: str, attempt: int = 1
    ) -> JobEvent:
        """Records ``job`` as aborted without calling the Chat API (cancelled before start).

        Returns:
            The ``aborted`` event (``line_count=0``, ``error=reason``), delivered.
        """
        run = _Run(job, attempt, AttemptState(chat_id=job.chat_id), JobControl())
        fields = {"job": job.without_secrets(), "line_count": 0, "error": reason}
        terminal = self._event(run, "aborted", **fields)
        await output.send_event(terminal)
        await output.delivered()
        self._finished(run, terminal)
        return terminal

    async def _drive(self, run: _Run, output: Output) -> BaseException | None:
        """Streams the job under its deadline; returns what ended it early (None: nothing)."""
        deadline_s = run.job.deadline_s or self._job_deadline_s
        try:
            async with asyncio.timeout(deadline_s + self._abort_grace_s) as hard_stop:
                watchdog = asyncio.create_task(self._watch(run, deadline_s, hard_stop))
                try:
                    await self._stream(run, output)
                finally:
                    watchdog.cancel()
                    await asyncio.gather(watchdog, return_exceptions=True)
        except _OutputFailedError as exc:
            raise exc.error from exc.error.__cause__
        except (PipelineError, TimeoutError) as exc:
            return exc
        except Exception as exc:
            logger.exception("job error job_id=%s error=%r", run.job.job_id, exc)
            return exc
        return None

    async def _stream(self, run: _Run, output: Output) -> None:
        stream, first = await self._open(run)
        run.state.http_status = HTTP_OK
        async with aclosing(stream):
            if first is None:
                return
            await self._publish(run, output, first)
            async for line in stream:
                await self._publish(run, output, line)

    async def _open(self, run: _Run) -> tuple[ChatStream, StreamLine | None]:
        """Opens the stream and reads its first line, retrying transient errors."""
        policy = self._retry
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.attempts),
            wait=wait_exponential_jitter(
                initial=policy.initial_s, max=policy.max_s, jitter=policy.initial_s
            ),
            retry=retry_if_exception_type(TransientError),
            before_sleep=_log_retry,
            reraise=True,
        )
        result: tuple[ChatStream, StreamLine | None] = await retrying(self._first_line, run.job)
        return result

    async def _first_line(self, job: ChatJob) -> tuple[ChatStream, StreamLine | None]:
        stream = self._client.stream_chat(job.chat_url, chat_request(job), api_key=job.api_key)
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return stream, None
        except BaseException:
            await stream.aclose()
            raise
        return stream, first

    async def _publish(self, run: _Run, output: Output, line: StreamLine) -> None:
        if run.state.observe(line.message):
            run.chat_id_known.set()
        envelope = LineEnvelope(
            job_id=run.job.job_id,
            attempt=run.attempt,
            line_no=line.line_no,
            received_at=line.received_at,
            raw=line.raw,
            terminated=line.terminated,
            chat_id=run.state.chat_id,
            message=line.message,
            parse_error=line.parse_error,
        )
        try:
            await output.send_line(envelope)
            run.state.lines += 1
            metrics.LINES.inc()
            if run.state.lines == 1:
                metrics.FIRST_LINE_S.observe(time.monotonic() - run.started)
                await output.send_event(self._event(run, "first_line", line_count=1))
        except TransientError as exc:
            raise _OutputFailedError(exc) from exc

    async def _watch(self, run: _Run, deadline_s: float, hard_stop: asyncio.Timeout) -> None:
        """At the deadline or on request: abort the chat, and close the stream after a grace."""
        try:
            reason = await asyncio.wait_for(run.control.wait(), timeout=deadline_s)
        except TimeoutError:
            run.control.request_abort(DEADLINE_REASON)
            reason = DEADLINE_REASON
        close_at = asyncio.get_running_loop().time() + self._abort_grace_s
        hard_stop.reschedule(min(hard_stop.when() or close_at, close_at))
        job = run.job
        logger.warning("job abort requested job_id=%s reason=%s", job.job_id, reason)
        await run.chat_id_known.wait()
        chat_id = run.state.chat_id or ""
        request = AbortRequest(chat_id=chat_id, session_settings=job.session_settings)
        try:
            await self._client.abort(job.chat_url, request, api_key=job.api_key)
        except PipelineError as exc:
            logger.warning("abort failed job_id=%s chat_id=%s error=%r", job.job_id, chat_id, exc)

    def _event(self, run: _Run, kind: EventKind, **fields: Any) -> JobEvent:
        return JobEvent(
            job_id=run.job.job_id,
            run_id=run.job.run_id,
            kind=kind,
            attempt=run.attempt,
            chat_id=run.state.chat_id,
            worker_id=self._worker_id,
            **fields,
        )

    def _finished(self, run: _Run, terminal: JobEvent) -> None:
        duration_s = time.monotonic() - run.started
        metrics.JOBS.labels(outcome=terminal.kind).inc()
        metrics.JOB_S.observe(duration_s)
        log = logger.info if terminal.kind == "completed" else logger.warning
        log(
            "job finished job_id=%s attempt=%s status=%s lines=%s chat_id=%s http_status=%s "
            "duration_s=%.3f error=%r",
            terminal.job_id,
            terminal.attempt,
            terminal.kind,
            terminal.line_count,
            terminal.chat_id,
            terminal.http_status,
            duration_s,
            terminal.error,
        )


class _OutputFailedError(Exception):
    """Carries a transient output error past the job's own error handling to the caller."""

    def __init__(self, error: TransientError) -> None:
        super().__init__(str(error))
        self.error = error


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    wait_s = state.next_action.sleep if state.next_action else 0.0
    if error is not None:
        metrics.RETRIES.labels(error_type=type(error).__name__).inc()
    logger.warning(
        "chat call retry attempt=%s wait_s=%.2f error=%r", state.attempt_number, wait_s, error
    )
