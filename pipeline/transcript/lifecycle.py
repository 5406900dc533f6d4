"""A job's row folded from its lifecycle events (pure, no I/O).

Events (``chat.job-events``, :class:`models.records.JobEvent`) arrive at least once and, across
producers, in any order. :func:`fold` applies them to a job's current :class:`JobState` so that
the result does not depend on duplicates or on late arrivals:

* The status only moves forward: ``submitted`` < ``running`` < a terminal status
  (``completed``, ``failed``, ``aborted``), ordered first by attempt. A late ``started`` never
  overwrites a terminal status of the same or a later attempt; the first terminal event of an
  attempt wins over a second one.
* An event of a later attempt starts that attempt afresh: the attempt's worker, times, line
  count, HTTP status and error are reset before it applies. Events of earlier attempts only fill
  the job's description (``accepted``/``started`` carry the :class:`~models.records.ChatJob`).
* Times and other fields of the current attempt are filled, never overwritten, so replaying an
  event changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from models.records import TERMINAL_EVENTS, ChatJob, JobEvent
from pipeline.transcript.tool_calls import ArchiveRow

JobStatus = Literal["submitted", "running", "completed", "failed", "aborted"]
STATUSES: Final[tuple[JobStatus, ...]] = ("submitted", "running", "completed", "failed", "aborted")

_STATUS_OF: Final[dict[str, JobStatus]] = {
    "accepted": "submitted",
    "started": "running",
    "first_line": "running",
    "completed": "completed",
    "failed": "failed",
    "aborted": "aborted",
}
_STATUS_RANK: Final[dict[JobStatus, int]] = {
    "submitted": 0,
    "running": 1,
    "completed": 2,
    "failed": 2,
    "aborted": 2,
}
_EVENT_RANK: Final = {"accepted": 0, "started": 1, "first_line": 2}
_TERMINAL_RANK: Final = 3
_ATTEMPT_FIELDS: Final = (
    "worker_id",
    "started_at",
    "first_line_at",
    "finished_at",
    "line_count",
    "http_status",
    "error",
    "error_type",
)


@dataclass(frozen=True)
class JobState(ArchiveRow):
    """The lifecycle columns of a ``jobs`` row (all but ``normalised_attempt``, ``updated_at``).

    ``attempts`` is the highest attempt seen; ``last_attempt`` the attempt the status, times,
    ``line_count``, ``http_status`` and ``error`` describe. ``session_settings`` is the wire
    JSON of the job's ``sessionSettings``; ``identity`` its owner key (``external:analyst-1``).
    """

    job_id: str
    run_id: str
    status: JobStatus = "submitted"
    attempts: int = 0
    last_attempt: int = 0
    persona: str | None = None
    question: str | None = None
    session_settings: dict[str, Any] | None = None
    identity: str | None = None
    chat_url: str | None = None
    active_branch_name: str | None = None
    chat_id: str | None = None
    worker_id: str | None = None
    line_count: int | None = None
    http_status: int | None = None
    error: str | None = None
    error_type: str | None = None
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    first_line_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        """True for ``completed``, ``failed`` and ``aborted``."""
        return self.status in TERMINAL_EVENTS


COLUMNS: Final = tuple(f.name for f in dataclasses.fields(JobState))
"""The ``jobs`` columns :class:`JobState` holds, in declaration order."""


def event_order(event: JobEvent) -> tuple[int, int, datetime]:
    """Returns: the sort key ``(attempt, kind rank, at)`` that :func:`fold` applies events in."""
    return event.attempt, _EVENT_RANK.get(event.kind, _TERMINAL_RANK), event.at


def fold(state: JobState | None, events: Iterable[JobEvent]) -> JobState:
    """Applies events to a job's state (rules: module docstring).

    Args:
        state: The job's current row, or None when the archive has none yet.
        events: Events of this job, in any order, duplicates allowed.

    Returns:
        The new state.

    Raises:
        ValueError: ``events`` is empty and ``state`` is None, or an event is for another job.
    """
    ordered = sorted(events, key=event_order)
    if state is None:
        if not ordered:
            raise ValueError("fold needs a state or at least one event")
        state = JobState(job_id=ordered[0].job_id, run_id=ordered[0].run_id)
    for event in ordered:
        if event.job_id != state.job_id:
            raise ValueError(f"event for job {event.job_id} folded into job {state.job_id}")
        state = apply(state, event)
    return state


def apply(state: JobState, event: JobEvent) -> JobState:
    """Applies one event to a job's state (rules: module docstring)."""
    state = _describe(state, event)
    if event.attempt < state.last_attempt:
        return state
    if event.attempt > state.last_attempt:
        reset: dict[str, Any] = dict.fromkeys(_ATTEMPT_FIELDS)
        state = dataclasses.replace(state, last_attempt=event.attempt, status="submitted", **reset)
    if event.is_terminal and state.is_terminal:
        return _fill(state, chat_id=event.chat_id)
    status = _STATUS_OF[event.kind]
    if _status_rank(status) <= _status_rank(state.status) or state.is_terminal:
        status = state.status
    state = dataclasses.replace(state, status=status)
    return _fill(state, chat_id=event.chat_id, worker_id=event.worker_id, **_times(event))


def _describe(state: JobState, event: JobEvent) -> JobState:
    """Fills the job's description from ``event.job`` and counts the attempt."""
    state = dataclasses.replace(state, attempts=max(state.attempts, event.attempt))
    job: ChatJob | None = event.job
    submitted_at = event.at if event.kind == "accepted" else None
    if job is None:
        return _fill(state, submitted_at=submitted_at)
    settings = job.session_settings
    return _fill(
        state,
        persona=job.persona,
        question=job.question,
        session_settings=settings.to_wire(),
        identity=settings.user_key,
        chat_url=job.chat_url,
        active_branch_name=job.active_branch_name,
        chat_id=job.chat_id,
        submitted_at=job.submitted_at or submitted_at,
    )


def _times(event: JobEvent) -> dict[str, Any]:
    if event.kind == "started":
        return {"started_at": event.at, "http_status": event.http_status}
    if event.kind == "first_line":
        return {"first_line_at": event.at, "http_status": event.http_status}
    if event.is_terminal:
        return {
            "finished_at": event.at,
            "line_count": event.line_count,
            "http_status": event.http_status,
            "error": event.error,
            "error_type": event.error_type,
        }
    return {}


def _fill(state: JobState, **values: Any) -> JobState:
    """Returns: ``state`` with each given non-None value set where the state has None."""
    missing = {k: v for k, v in values.items() if v is not None and getattr(state, k) is None}
    return dataclasses.replace(state, **missing) if missing else state


def _status_rank(status: JobStatus) -> int:
    return _STATUS_RANK[status]
