"""Live OpenTelemetry export from the sink (``CHATSCRIBE_OTEL_ENDPOINT``, off by default).

After a batch's database commit, every attempt the batch normalised is read back from the archive
and sent as a trace (:func:`pipeline.otel.export.export_turns`; ids derived from job, attempt and
message ids, so an attempt normalised again replaces its spans instead of adding to them).

Best effort, never in archiving's way: a refused export or an unreachable endpoint is logged with
the number of traces it held, counted in :attr:`TracePublisher.failed`, and the live export
pauses for :data:`PAUSE_AFTER_FAILURE_S` (attempts normalised meanwhile are counted in
:attr:`TracePublisher.skipped`). What was not sent is sent later by
``chatscribe export otel --since T``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Final

from pipeline.archive.engine import create_engine
from pipeline.archive.traces import read_turns
from pipeline.errors import ArchiveUnavailableError, TraceExportError
from pipeline.otel.export import export_turns
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

PAUSE_AFTER_FAILURE_S: Final = 60.0
TIMEOUT_S: Final = 5.0
"""Seconds the live exporter allows one try of a request."""
RETRIES: Final = 1
"""Tries after the first: the live export is best effort, the batch loop waits for it."""


class TracePublisher:
    """Sends normalised attempts to the OTLP endpoint (module docstring).

    Args:
        settings: Database settings and ``otel_endpoint`` (required).
    """

    def __init__(self, settings: Settings) -> None:
        assert settings.otel_endpoint is not None, "CHATSCRIBE_OTEL_ENDPOINT unset"
        self._endpoint = settings.otel_endpoint
        self._engine = create_engine(settings)
        self._paused_until = 0.0
        self.sent = 0
        self.failed = 0
        self.skipped = 0

    def __repr__(self) -> str:
        return (
            f"<TracePublisher endpoint={self._endpoint} sent={self.sent} failed={self.failed} "
            f"skipped={self.skipped}>"
        )

    def close(self) -> None:
        """Disposes of the publisher's engine."""
        self._engine.dispose()

    async def publish(self, pairs: Sequence[tuple[str, int]]) -> int:
        """Sends the traces of ``pairs`` (``(job_id, attempt)``); never raises.

        Returns:
            How many traces the endpoint accepted (0 while paused or on failure).
        """
        if not pairs:
            return 0
        if time.monotonic() < self._paused_until:
            self.skipped += len(pairs)
            return 0
        try:
            sent = await asyncio.to_thread(self._export, pairs)
        except (TraceExportError, ArchiveUnavailableError) as exc:
            self.failed += len(pairs)
            self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE_S
            logger.warning(
                "otel live export failed traces=%d pause_s=%.0f: %s",
                len(pairs),
                PAUSE_AFTER_FAILURE_S,
                exc,
            )
            return 0
        self.sent += sent
        return sent

    def _export(self, pairs: Sequence[tuple[str, int]]) -> int:
        turns = read_turns(self._engine, pairs=pairs)
        return export_turns(
            turns, endpoint=self._endpoint, timeout_s=TIMEOUT_S, retries=RETRIES
        ).traces
