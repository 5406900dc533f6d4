"""The PostgreSQL archive writer: one transaction per sink batch.

A database module (SQLAlchemy 2 Core, psycopg 3). SQLAlchemy owns the engine and the
transaction; the line path reaches psycopg's ``cursor.copy()`` through the SQLAlchemy
connection. Database errors are translated once, by
:func:`pipeline.archive.engine.translate_errors`:

* connection refused, server restarting, deadlock, serialization failure →
  :class:`~pipeline.errors.ArchiveUnavailableError` (transient: retry the whole batch);
* a value PostgreSQL refuses (SQLSTATE class 22/23) → :class:`~pipeline.errors.ArchiveRejectedError`
  (permanent: the sink isolates the record);
* a missing table or column, or no permission (class 42/3F) →
  :class:`~pipeline.errors.ArchiveSchemaError` (permanent: run ``chatscribe db upgrade``);
* anything else the server reports (disk full, shutdown, lock timeout ...) → transient.

One :meth:`ArchiveWriter.write_batch` call is one transaction (design.md, "Flow"):

1. advisory locks on the batch's job ids (sorted), so two sinks never interleave one job;
2. ``job_events`` inserted ``ON CONFLICT DO NOTHING``; ``jobs`` rows folded from the events
   (:mod:`pipeline.transcript.lifecycle`) and upserted (:mod:`pipeline.archive.jobs`);
3. lines ``COPY``'d into ``stream_lines``, or into a temporary staging table and then
   ``INSERT INTO stream_lines SELECT ... ON CONFLICT DO NOTHING`` (:mod:`pipeline.archive.lines`);
   the lines this statement inserted are kept, parsed and as stored, in the writer's
   :class:`~pipeline.archive.attempt_state.AttemptState`, and folded into their attempt's
   transcript as soon as they continue it in line order (that state's invariant says what a
   rolled-back batch leaves there: nothing);
4. every touched (job, attempt) whose terminal event gave a ``line_count`` equal to the lines
   stored, and which has no ``answers`` row yet, is normalised (:mod:`pipeline.archive.derived`),
   from its fold when the writer folded every line, else from the lines read back.

Before its first batch and then every :data:`PARTITION_CHECK_S`, the writer creates the
``stream_lines`` partitions of the current and next month if missing
(:func:`pipeline.archive.partitions.ensure_ahead`, migration 0006); a line of a month without
one lands in the default partition.

Every step is idempotent, so a batch written twice (sink killed between the database commit and
the offset commit) changes nothing, and lines and events may arrive in any order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import sqlalchemy as sa

from models.records import TERMINAL_EVENTS, JobEvent, LineEnvelope
from pipeline.archive import derived as archive_derived
from pipeline.archive import jobs as archive_jobs
from pipeline.archive import lines as archive_lines
from pipeline.archive import partitions as archive_partitions
from pipeline.archive import seals as archive_seals
from pipeline.archive.attempt_state import AttemptState
from pipeline.archive.engine import create_engine, translate_errors
from pipeline.archive.redaction import Redactor
from pipeline.collector import collector_paused
from pipeline.errors import ArchiveRejectedError, ArchiveUnavailableError
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

PARTITION_CHECK_S: Final = 3600.0
"""Seconds between two checks that the current and next month's partitions exist."""
PARTITIONS_AHEAD: Final = 1


JobAttempt = tuple[str, int]


@dataclass(frozen=True)
class BatchOutcome:
    """What one :meth:`ArchiveWriter.write_batch` changed.

    Attributes:
        lines, events: Records given.
        lines_inserted, events_inserted: Rows new to the archive (the rest were duplicates).
        jobs_updated: ``jobs`` rows whose lifecycle columns changed.
        normalised: (job id, attempt) pairs whose derived rows were written.
        elapsed_s: Wall time of the transaction.
        kept_bytes, folded_bytes: Raw bytes of the lines the writer holds parsed after the
            batch, as lines and folded into open attempts
            (:class:`~pipeline.archive.parsed.ParsedLines`); ``open_folds``: those attempts.
    """

    lines: int
    events: int
    lines_inserted: int
    events_inserted: int
    jobs_updated: int
    normalised: tuple[JobAttempt, ...]
    elapsed_s: float
    kept_bytes: int = 0
    folded_bytes: int = 0
    open_folds: int = 0


class ArchiveWriter:
    """Writes sink batches into the archive, one transaction each (module docstring).

    Args:
        engine: From :func:`create_engine`; the writer does not own it unless built with
            :meth:`from_settings`; its connections' ``search_path`` is the archive's schema.
        state: What the writer knows of open attempts across batches (default: a new
            :class:`~pipeline.archive.attempt_state.AttemptState`, its invariant there).
    """

    def __init__(
        self,
        engine: sa.Engine,
        *,
        owns_engine: bool = False,
        redactor: Redactor | None = None,
        anchor: archive_seals.Anchor | None = None,
        state: AttemptState | None = None,
    ) -> None:
        self._engine = engine
        self._redactor = redactor
        self._anchor = anchor
        self._state = state if state is not None else AttemptState()
        self._owns_engine = owns_engine
        self.batches = 0
        self.lines_inserted = 0
        self.events_inserted = 0
        self.attempts_normalised = 0
        self._partitions_checked: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ArchiveWriter:
        """Returns: a writer with its own engine (:func:`create_engine`); :meth:`close` it."""
        engine = create_engine(settings)
        redactor = Redactor.build(
            detectors=settings.redact_detectors, patterns=settings.redact_patterns
        )
        directory = settings.chain_anchor_dir
        anchor = archive_seals.Anchor(directory) if directory is not None else None
        return cls(engine, owns_engine=True, redactor=redactor, anchor=anchor)

    def __repr__(self) -> str:
        return (
            f"<ArchiveWriter batches={self.batches} "
            f"lines_inserted={self.lines_inserted} events_inserted={self.events_inserted} "
            f"attempts_normalised={self.attempts_normalised}>"
        )

    @property
    def engine(self) -> sa.Engine:
        """The engine the writer writes through (the sink reads its answers outbox with it)."""
        return self._engine

    def close(self) -> None:
        """Disposes of the engine when the writer created it."""
        if self._owns_engine:
            self._engine.dispose()

    def write_batch(
        self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]
    ) -> BatchOutcome:
        """Archives a batch in one transaction; idempotent (module docstring).

        Args:
            lines: Decoded ``chat.lines`` records, any jobs, any order, duplicates allowed.
            events: Decoded ``chat.job-events`` records, likewise.

        Returns:
            What changed.

        Raises:
            ArchiveUnavailableError: PostgreSQL is unreachable or the transaction lost a
                conflict; nothing was written, retry the batch.
            ArchiveRejectedError: PostgreSQL refused a value; nothing was written.
            ArchiveSchemaError: The archive's tables are missing (run ``upgrade``).
        """
        started = time.monotonic()
        checked = self._partitions_checked
        if checked is None or started - checked >= PARTITION_CHECK_S:
            self._ensure_partitions_quietly()
        parsed = self._state.parsed
        with self._state.batch() as claims:
            with collector_paused(), translate_errors("write_batch"), self._engine.begin() as conn:
                events_inserted, jobs_updated = self._write_events(conn, lines, events)
                lines = _refuse_late(conn, lines)
                written = archive_lines.write_lines(
                    conn, lines, redactor=self._redactor, known_heads=self._state.heads
                )
                claims.keep(lines, written.stored)
                touched = _touched(lines, events)
                parsed.fold(touched)
                normalised = archive_derived.normalise_ready(
                    conn, touched, known=parsed.known, folds=parsed.folds
                )
                self._seal(conn, normalised, events)
            claims.committed(heads=written.heads, normalised=normalised)
        outcome = BatchOutcome(
            lines=len(lines),
            events=len(events),
            lines_inserted=written.inserted,
            events_inserted=events_inserted,
            jobs_updated=jobs_updated,
            normalised=tuple(normalised),
            elapsed_s=time.monotonic() - started,
            kept_bytes=parsed.bytes,
            folded_bytes=parsed.folded_bytes,
            open_folds=len(parsed.folds),
        )
        self._count(outcome)
        return outcome

    def ensure_partitions(self, now: datetime | None = None) -> list[str]:
        """Creates this and next month's ``stream_lines`` partitions when missing.

        Args:
            now: The current time (default: now, UTC).

        Returns:
            The partitions created.

        Raises:
            ArchiveUnavailableError, ArchiveSchemaError: As :meth:`write_batch` (a schema
                before migration 0006 has no partitioned table: ``ArchiveSchemaError``).
        """
        with translate_errors("ensure_partitions"), self._engine.begin() as conn:
            created = archive_partitions.ensure_ahead(
                conn, now=now or datetime.now(UTC), ahead=PARTITIONS_AHEAD
            )
        self._partitions_checked = time.monotonic()
        return created

    def _ensure_partitions_quietly(self) -> None:
        try:
            self.ensure_partitions()
        except ArchiveUnavailableError as exc:  # the default partition takes the lines meanwhile
            logger.warning("partitions not checked, retrying next batch: %s", exc)

    def renormalise(self, job_id: str, attempt: int) -> bool:
        """Recomputes one attempt's derived rows from its stored lines.

        Returns:
            True when the attempt is complete (terminal event with ``line_count``, all lines
            stored) and was normalised; False otherwise.

        Raises:
            ArchiveUnavailableError, ArchiveRejectedError: As :meth:`write_batch`.
        """
        with translate_errors("renormalise"), self._engine.begin() as conn:
            archive_jobs.lock_jobs(conn, [job_id])
            done = archive_derived.normalise_ready(conn, [(job_id, attempt)], force=True)
            self._seal(conn, done, [])
        return bool(done)

    def _seal(
        self, conn: sa.Connection, normalised: Sequence[JobAttempt], events: Sequence[JobEvent]
    ) -> None:
        """Seals the attempts just normalised and reseals those whose job row changed.

        The seals reach the anchor file before the transaction commits
        (:mod:`pipeline.archive.seals`).
        """
        records = archive_seals.seal_attempts(conn, normalised, reason="normalised")
        changed = {e.job_id for e in events} - {job_id for job_id, _ in normalised}
        if changed:
            sealed = archive_seals.sealed_of_jobs(conn, changed)
            records += archive_seals.seal_attempts(
                conn, sealed, reason="job_changed", only_changed=True
            )
        if self._anchor is not None:
            self._anchor.append(records)

    def _write_events(
        self, conn: sa.Connection, lines: Sequence[LineEnvelope], batch: Sequence[JobEvent]
    ) -> tuple[int, int]:
        archive_jobs.lock_jobs(conn, {line.job_id for line in lines} | {e.job_id for e in batch})
        inserted = archive_jobs.insert_events(conn, batch)
        return inserted, archive_jobs.upsert_jobs(conn, batch)

    def _count(self, outcome: BatchOutcome) -> None:
        self.batches += 1
        self.lines_inserted += outcome.lines_inserted
        self.events_inserted += outcome.events_inserted
        self.attempts_normalised += len(outcome.normalised)
        logger.debug(
            "batch archived lines=%d new_lines=%d events=%d new_events=%d jobs_updated=%d "
            "normalised=%d elapsed_s=%.3f",
            outcome.lines,
            outcome.lines_inserted,
            outcome.events,
            outcome.events_inserted,
            outcome.jobs_updated,
            len(outcome.normalised),
            outcome.elapsed_s,
        )


def _refuse_late(conn: sa.Connection, lines: Sequence[LineEnvelope]) -> Sequence[LineEnvelope]:
    """Returns: the lines to write (:func:`pipeline.archive.seals.late_lines`).

    Raises:
        ArchiveRejectedError: A line arrived after its attempt ended; the sink isolates and
            dead-letters it.
    """
    keep, refused = archive_seals.late_lines(conn, lines)
    if refused:
        raise ArchiveRejectedError("; ".join(refused.values()), sqlstate=None)
    return keep


def _touched(lines: Sequence[LineEnvelope], batch: Sequence[JobEvent]) -> list[JobAttempt]:
    """Returns: the (job, attempt) pairs a batch may have completed, sorted."""
    pairs = {(line.job_id, line.attempt) for line in lines}
    pairs |= {(e.job_id, e.attempt) for e in batch if e.kind in TERMINAL_EVENTS}
    return sorted(pairs)
