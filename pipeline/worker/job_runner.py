"""Running one chat job: its Chat API stream out to Kafka, line by line, then one terminal event.

No faust and no Kafka client here. :class:`JobRunner` talks to the Chat API through
:class:`pipeline.chat.client.ChatClient` and writes through an :class:`Output` (in the worker,
:class:`pipeline.kafka.clients.JobOutput`). The records of one attempt, in order::

    started ─ line 1 ─ first_line ─ line 2 … line n ─ (all delivered) ─ terminal event

* Transient errors before the first line are retried (:class:`RetryPolicy`); 4xx never are.
* One attempt's response may carry at most ``max_attempt_lines`` lines and
  ``max_attempt_bytes`` bytes: past either the stream is closed and the attempt fails
  (:class:`~pipeline.errors.ChatResponseTooLargeError`); the lines before it stay published.
* At the deadline (``job.deadline_s`` cut to ``job_deadline_max_s``, or the default) or on a
  cancellation the runner calls the abort endpoint once the chat id is known and keeps reading to
  the end; ``abort_grace_s`` after the request it closes the stream itself.
* The terminal event follows :func:`pipeline.worker.attempts.outcome`.
* ``started`` is durable before the Chat API is called, so a worker taking the job over after a
  crash knows the attempt number (:func:`pipeline.worker.attempts.plan_attempt`).
* :meth:`JobRunner.run_job` runs a job's attempts: a stream that breaks mid-way ends its attempt
  (``failed``, ``StreamBrokenError``) and the job goes on as the next attempt, fetching the
  thread's state when the chat id is known, up to ``max_attempts``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from models.chat import AbortRequest
from models.records import ChatJob, EventKind, JobEvent, LineHeaders
from pipeline import metrics
from pipeline.chat.client import ChatClient, StreamLine
from pipeline.errors import ChatResponseTooLargeError, PipelineError, TransientError
from pipeline.settings import (
    DEFAULT_JOB_DEADLINE_MAX_S,
    DEFAULT_MAX_ATTEMPT_BYTES,
    DEFAULT_MAX_ATTEMPT_LINES,
)
from pipeline.worker.attempts import (
    DEFAULT_MAX_ATTEMPTS,
    ERROR_TYPE_EXHAUSTED,
    HTTP_OK,
    AttemptMode,
    AttemptPlan,
    AttemptState,
    PriorAttempts,
    outcome,
    plan_attempt,
)
from pipeline.worker.job_control import (
    ABORT_GRACE_S,
    DEADLINE_REASON,
    JobControl,
    Output,
    RetryPolicy,
    chat_request,
)

__all__ = ["ABORT_GRACE_S", "JobControl", "JobRunner", "Output", "RetryPolicy", "chat_request"]

logger = logging.getLogger(__name__)

ChatStream = AsyncGenerator[StreamLine, None]
STATE_POLL_S: Final = 1.0


def _streaming(line: StreamLine) -> bool:
    """True when the line's ``state.isStreaming`` is true (field notes, ``__cutoff__``)."""
    state = line.message.state if line.message is not None else None
    return bool(state and state.get("isStreaming") is True)


@dataclass
class _Run:
    """One attempt in progress."""

    job: ChatJob
    attempt: int
    state: AttemptState
    control: JobControl
    started: float = field(default_factory=time.monotonic)
    bytes_read: int = 0
    chat_id_known: asyncio.Event = field(default_factory=asyncio.Event)
    headers: LineHeaders = field(init=False)

    def __post_init__(self) -> None:
        self.headers = LineHeaders(self.attempt, self.job.submitted_at)


class JobRunner:
    """Runs chat jobs: retries, deadline, abort, fan-out of every line, terminal event.

    Args:
        client: The Chat API client (shared by all jobs of the process).
        job_deadline_s: Deadline of jobs that do not carry ``deadline_s``.
        worker_id: Written into every event.
        retry: Retries before the first line.
        abort_grace_s: Seconds to keep reading after an abort request.
        max_attempts: Attempts of one job in all (:func:`pipeline.worker.attempts.plan_attempt`).
        state_poll_s: Pause between two state fetches of a thread that is still streaming.
        job_deadline_max_s: Longest deadline a job may ask for; a longer ``deadline_s`` is
            cut to it.
        max_attempt_lines, max_attempt_bytes: Caps on one attempt's response (lines; bytes of
            the lines with their newlines).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        job_deadline_s: float,
        worker_id: str | None = None,
        retry: RetryPolicy | None = None,
        abort_grace_s: float = ABORT_GRACE_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        state_poll_s: float = STATE_POLL_S,
        job_deadline_max_s: float = DEFAULT_JOB_DEADLINE_MAX_S,
        max_attempt_lines: int = DEFAULT_MAX_ATTEMPT_LINES,
        max_attempt_bytes: int = DEFAULT_MAX_ATTEMPT_BYTES,
    ) -> None:
        self._job_deadline_max_s = job_deadline_max_s
        self._max_attempt_lines = max_attempt_lines
        self._max_attempt_bytes = max_attempt_bytes
        self._client = client
        self._max_attempts = max_attempts
        self._state_poll_s = state_poll_s
        self._job_deadline_s = job_deadline_s
        self._worker_id = worker_id
        self._retry = retry or RetryPolicy()
        self._abort_grace_s = abort_grace_s
        self.jobs_run = 0

    def __repr__(self) -> str:
        return f"<JobRunner jobs_run={self.jobs_run} client={self._client!r}>"

    async def run_job(
        self,
        job: ChatJob,
        output: Output,
        *,
        prior: PriorAttempts | None = None,
        control: JobControl | None = None,
    ) -> JobEvent | None:
        """Runs ``job``'s next attempts until one ends other than with a broken stream.

        Args:
            job: The job.
            output: Where the lines and events go.
            prior: What the job's events say about earlier attempts (a takeover); None or
                ``PriorAttempts()`` for a fresh job.
            control: Lets another task request an abort (cancellations).

        Returns:
            The last attempt's terminal event; None when the job already had a final outcome.

        Raises:
            TransientError: As :meth:`run`.
        """
        control = control or JobControl()
        plan = plan_attempt(prior or PriorAttempts(), max_attempts=self._max_attempts)
        terminal: JobEvent | None = None
        while plan is not None:
            if plan.attempt > 1:
                metrics.TAKEOVERS.labels(mode=plan.mode).inc()
                logger.warning(
                    "job continues job_id=%s attempt=%s mode=%s chat_id=%s",
                    job.job_id,
                    plan.attempt,
                    plan.mode,
                    plan.chat_id,
                )
            terminal = await self._attempt(job, output, plan, control)
            plan = None if control.reason else self._after(terminal)
        return terminal

    async def _attempt(
        self, job: ChatJob, output: Output, plan: AttemptPlan, control: JobControl
    ) -> JobEvent:
        if plan.mode == "exhausted":
            reason = f"gave up after {plan.attempt - 1} attempts"
            return await self._record_only(
                job, output, plan.attempt, "failed", reason, ERROR_TYPE_EXHAUSTED
            )
        return await self.run(
            job, output, attempt=plan.attempt, control=control, mode=plan.mode, chat_id=plan.chat_id
        )

    def _after(self, terminal: JobEvent) -> AttemptPlan | None:
        prior = PriorAttempts(attempt=terminal.attempt).observe(terminal)
        return plan_attempt(prior, max_attempts=self._max_attempts)

    async def run(
        self,
        job: ChatJob,
        output: Output,
        *,
        attempt: int = 1,
        control: JobControl | None = None,
        mode: AttemptMode = "ask",
        chat_id: str | None = None,
    ) -> JobEvent:
        """Runs one attempt of ``job`` to its end and makes every record of it durable.

        Args:
            job: The job (its own ``api_key`` is used when set).
            output: Where the lines and events go.
            attempt: Attempt number written into every record (1 for a first run).
            control: Lets another task request an abort (cancellations).
            mode: ``ask`` sends the question; ``state`` fetches the state of thread ``chat_id``
                (a chat request without ``input``) and records what the agent produced.
            chat_id: The thread of a ``state`` attempt.

        Returns:
            The terminal event, delivered after all the attempt's lines were.

        Raises:
            TransientError: From ``output`` (e.g.
            :class:`pipeline.kafka.clients.RecordDeliveryError`):
                records may not be durable, so the caller must not acknowledge the job.
        """
        state = AttemptState(chat_id=chat_id or job.chat_id, state_fetch=mode == "state")
        run = _Run(job, attempt, state, control or JobControl())
        if state.chat_id is not None:
            run.chat_id_known.set()
        self.jobs_run += 1
        logger.info("job started job_id=%s attempt=%s mode=%s", job.job_id, attempt, mode)
        await output.send_event(self._event(run, "started", job=job.without_secrets()))
        await output.delivered()
        metrics.JOBS_IN_FLIGHT.inc()
        try:
            error = await self._drive(run, output)
            await output.delivered()
        finally:
            metrics.JOBS_IN_FLIGHT.dec()
        result = outcome(run.state, abort_reason=run.control.reason, error=error)
        terminal = self._event(
            run,
            result.kind,
            line_count=run.state.lines,
            http_status=result.http_status,
            error=result.error,
            error_type=result.error_type,
            throttled=run.control.take_throttled() or None,
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
        return await self._record_only(job, output, attempt, "aborted", reason, None)

    async def _record_only(
        self,
        job: ChatJob,
        output: Output,
        attempt: int,
        kind: EventKind,
        reason: str,
        error_type: str | None,
    ) -> JobEvent:
        """Records a terminal event for an attempt that never calls the Chat API."""
        run = _Run(job, attempt, AttemptState(chat_id=job.chat_id), JobControl())
        fields = {"job": job.without_secrets(), "line_count": 0, "error": reason}
        terminal = self._event(run, kind, error_type=error_type, **fields)
        await output.send_event(terminal)
        await output.delivered()
        self._finished(run, terminal)
        return terminal

    async def _drive(self, run: _Run, output: Output) -> BaseException | None:
        """Streams the job under its deadline; returns what ended it early (None: nothing)."""
        deadline_s = self._deadline_s(run.job)
        loop = asyncio.get_running_loop()
        aborting: list[asyncio.Task[None]] = []
        try:
            async with asyncio.timeout(deadline_s + self._abort_grace_s) as hard_stop:

                def abort(reason: str) -> None:  # once, from the timer or a cancellation
                    if not hard_stop.expired():  # expiring: the stream is being closed anyway
                        close_at = loop.time() + self._abort_grace_s
                        hard_stop.reschedule(min(hard_stop.when() or close_at, close_at))
                    aborting.append(asyncio.create_task(self._abort(run, reason)))

                deadline = loop.call_later(deadline_s, run.control.request_abort, DEADLINE_REASON)
                run.control.on_abort(abort)
                try:
                    await self._stream(run, output)
                finally:
                    deadline.cancel()
                    run.control.on_abort(None)
                    run.control.stream_ended()
                    for task in aborting:
                        task.cancel()
                    await asyncio.gather(*aborting, return_exceptions=True)
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
        """Opens the stream and reads its first line, retrying transient errors.

        A state fetch whose first line says the thread is still streaming (the turn goes on at
        the service after the previous worker was lost) is closed unrecorded and fetched again
        every ``state_poll_s`` until the turn ended; the deadline bounds the wait.
        """
        while True:
            deadline_at = run.started + self._deadline_s(run.job)
            result = await self._retry.call(
                partial(self._first_line, run), control=run.control, deadline_at=deadline_at
            )
            stream, first = result
            if not (run.state.state_fetch and first is not None and _streaming(first)):
                return result
            await stream.aclose()
            logger.info("thread still streaming job_id=%s", run.job.job_id)
            await asyncio.sleep(self._state_poll_s)

    def _deadline_s(self, job: ChatJob) -> float:
        """Returns: the job's deadline in seconds, cut to ``job_deadline_max_s``."""
        return min(job.deadline_s or self._job_deadline_s, self._job_deadline_max_s)

    async def _first_line(self, run: _Run) -> tuple[ChatStream, StreamLine | None]:
        await run.control.admitted()  # a stream slot (again after a 429 or a broken stream)
        job = run.job
        state_of = run.state.chat_id if run.state.state_fetch else None
        request = chat_request(job, state_of=state_of)
        stream = self._client.stream_chat(
            job.chat_url, request, api_key=job.api_key, on_accepted=run.control.accepted
        )
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return stream, None
        except BaseException:
            await stream.aclose()
            raise
        return stream, first

    async def _publish(self, run: _Run, output: Output, line: StreamLine) -> None:
        self._within_caps(run, line)
        if line.may_matter:  # most lines (deltas) are forwarded without a parse
            self._observe(run, line)
        # The record is the raw bytes with the envelope's headers (models.records.LineHeaders):
        # no envelope per line; its fields are our counters and the client's line.
        headers = run.headers.of(line.line_no, line.received_at, line.terminated, run.state.chat_id)
        if run.state.lines == 0:
            # The agent's latency: when the line came, not when Kafka took it (a busy producer
            # held first lines for seconds at 1,000 streams, read as the agent slowing: issue 13).
            metrics.FIRST_LINE_S.observe(time.monotonic() - run.started)
            run.control.first_line()
        try:
            await output.send_line(line.raw, headers)
            run.state.lines += 1
            metrics.LINES.inc()
            if run.state.lines == 1:
                await output.send_event(self._event(run, "first_line", line_count=1))
        except TransientError as exc:
            raise _OutputFailedError(exc) from exc

    def _within_caps(self, run: _Run, line: StreamLine) -> None:
        """Raises ChatResponseTooLargeError when ``line`` would pass an attempt's cap."""
        run.bytes_read += len(line.raw) + 1
        over_lines = run.state.lines >= self._max_attempt_lines
        if over_lines or run.bytes_read > self._max_attempt_bytes:
            limit = self._max_attempt_lines if over_lines else self._max_attempt_bytes
            raise ChatResponseTooLargeError(
                url=run.job.chat_url,
                limit=limit,
                unit="lines" if over_lines else "bytes",
                lines_read=run.state.lines,
            )

    @staticmethod
    def _observe(run: _Run, line: StreamLine) -> None:
        answered = run.state.answered
        if run.state.observe(line.message):
            run.chat_id_known.set()
        if run.state.answered and not answered:
            metrics.FINAL_ANSWER_S.observe(time.monotonic() - run.started)

    async def _abort(self, run: _Run, reason: str) -> None:
        """Calls the abort endpoint once the chat id is known.

        The stream is closed ``abort_grace_s`` after the request by the attempt's timeout
        (:meth:`_drive`), whether or not the agent stops.
        """
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
