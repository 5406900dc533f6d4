"""Cancellations a worker received (``chat.cancellations``), for its jobs (pure, no I/O).

A cancellation record's key is the job id and its value the reason (JSON ``{"reason": ...}`` or
text). A job running here is asked to abort (:class:`~pipeline.worker.job_runner.JobControl`); any
other is remembered, in case its record arrives later (the job then ends aborted before it starts).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Final

from models import json_values
from pipeline.worker.job_runner import JobControl

logger = logging.getLogger(__name__)

EARLY_CANCELLATIONS_KEPT: Final = 10_000
"""Cancellations of jobs not running here, remembered in case the job arrives later."""
REASON_CHARS: Final = 500


class Cancellations:
    """The abort controls of the jobs running here, and early cancellations.

    Attributes:
        running: job id → the running job's control.
    """

    def __init__(self, *, kept: int = EARLY_CANCELLATIONS_KEPT) -> None:
        self.running: dict[str, JobControl] = {}
        self._early: OrderedDict[str, str] = OrderedDict()
        self._kept = kept

    def __repr__(self) -> str:
        return f"<Cancellations running={len(self.running)} early={len(self._early)}>"

    def receive(self, key: bytes | None, value: bytes | None) -> None:
        """Handles one ``chat.cancellations`` record.

        Aborts the job if it runs here, else remembers it (the oldest of more than ``kept``
        are forgotten).
        """
        if not key:
            logger.warning("cancellation without a job id ignored")
            return
        job_id = key.decode(errors="replace")
        reason = cancel_reason(value)
        control = self.running.get(job_id)
        logger.info("cancellation job_id=%s running_here=%s", job_id, control is not None)
        if control is not None:
            control.request_abort(reason)
            return
        self._early[job_id] = reason
        while len(self._early) > self._kept:
            self._early.popitem(last=False)

    def take_early(self, job_id: str) -> str | None:
        """Returns: the reason of a cancellation that came before the job (forgetting it)."""
        return self._early.pop(job_id, None)


def cancel_reason(value: bytes | None) -> str:
    """Returns: ``cancelled`` plus the record's reason (JSON ``{"reason": ...}`` or text)."""
    if not value:
        return "cancelled"
    try:
        parsed: Any = json_values.loads(value)
    except ValueError:
        parsed = value.decode(errors="replace")
    if isinstance(parsed, dict):
        parsed = parsed.get("reason")
    if isinstance(parsed, str) and parsed:
        return f"cancelled: {parsed}"[:REASON_CHARS]
    return "cancelled"
