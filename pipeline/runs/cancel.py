"""Cancelling a whole run: its unfinished jobs, read from the archive, each get a cancellation.

A database module (SQLAlchemy): the run's jobs are the ``jobs`` rows of ``run_id`` in
``settings.database_schema`` whose status is not final yet (``submitted``, ``running``); the
cancellations themselves are published by :func:`pipeline.runs.submit.cancel_jobs`.
"""

from __future__ import annotations

import logging
from typing import Final

import sqlalchemy as sa

from pipeline.archive.engine import create_engine, translate_errors
from pipeline.runs.submit import cancel_jobs
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

UNFINISHED: Final = ("submitted", "running")
_JOBS_SQL: Final = (
    "SELECT job_id FROM {schema}.jobs WHERE run_id = :run AND status = ANY(:statuses)"
)


def unfinished_job_ids(settings: Settings, run_id: str) -> list[str]:
    """Returns: the ids of the run's jobs whose status is ``submitted`` or ``running``, sorted.

    Raises:
        ArchiveUnavailableError: PostgreSQL cannot be reached.
        ArchiveSchemaError: The schema has no ``jobs`` table (``chatscribe db upgrade``).
    """
    query = sa.text(_JOBS_SQL.format(schema=settings.database_schema))
    engine = create_engine(settings)
    try:
        with translate_errors("read the run's jobs"), engine.connect() as connection:
            rows = connection.execute(query, {"run": run_id, "statuses": list(UNFINISHED)})
            return sorted(row.job_id for row in rows)
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
