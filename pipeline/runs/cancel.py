"""Cancelling a whole run: its unfinished jobs, read from the archive, each get a cancellation.

The run's jobs are the ``jobs`` rows of ``run_id`` whose status is not final yet
(``submitted``, ``running``; read by :func:`pipeline.archive.runs.unfinished_job_ids`); the
cancellations themselves are published by :func:`pipeline.runs.submit.cancel_jobs`.
"""

from __future__ import annotations

import logging
from typing import Final

from pipeline.archive import runs as archive_runs
from pipeline.archive.engine import create_engine
from pipeline.runs.submit import cancel_jobs
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

UNFINISHED: Final = ("submitted", "running")


def unfinished_job_ids(settings: Settings, run_id: str) -> list[str]:
    """Returns: the ids of the run's jobs whose status is ``submitted`` or ``running``, sorted.

    Raises:
        ArchiveUnavailableError: PostgreSQL cannot be reached.
        ArchiveSchemaError: The schema has no ``jobs`` table (``chatscribe db upgrade``).
    """
    engine = create_engine(settings)
    try:
        return archive_runs.unfinished_job_ids(engine, run_id=run_id, statuses=UNFINISHED)
    finally:
        engine.dispose()


async def cancel_run(settings: Settings, run_id: str, *, reason: str = "") -> list[str]:
    """Publishes a cancellation for every unfinished job of ``run_id``.

    Returns:
        The job ids cancelled (empty when the run has none left, or is unknown).

    Raises:
        ArchiveUnavailableError, ArchiveSchemaError: As :func:`unfinished_job_ids`.
        RecordDeliveryError: Kafka did not acknowledge a cancellation.
    """
    job_ids = unfinished_job_ids(settings, run_id)
    if job_ids:
        await cancel_jobs(settings, job_ids, reason=reason)
    logger.info("run cancelled run_id=%s jobs=%d", run_id, len(job_ids))
    return job_ids
