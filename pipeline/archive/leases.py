"""Leases shared by every worker of the group: PostgreSQL session-level advisory locks.

A lease on a key (a run's or a target's stream slot, or one call of its per-minute budget) is a
session-level advisory lock held by the worker's own connection, in the two-``int4`` form
``(key class, lease number)`` (PostgreSQL documentation, "Advisory Locks" §13.3.5 and the
``pg_locks`` view §54.12: such a lock shows ``classid`` = the first key, ``objid`` = the second,
``objsubid`` = 2). So:

* *counting* a key's leases across every worker, on every machine, is one query of ``pg_locks``
  (granted advisory locks of that class in this database);
* *taking* one is a transaction that first takes the key's transaction-level lock (the one-
  ``bigint`` form, ``objsubid`` = 1, so it never counts as a lease), counts, and takes a lease
  only below the limit: two workers cannot both see the last free slot;
* *a worker that dies* (SIGKILL, a lost machine) loses its connection, and PostgreSQL drops its
  locks with it: no lease outlives its holder, and there is no table to clean.

Nothing is stored: no migration, nothing to expire. The key class is a 31-bit hash of the
namespace (the archive schema) and the key; two keys that share a class (a 1-in-2³¹ chance)
share their count, which errs on the side of fewer streams.

The only SQLAlchemy user of the worker; one connection per worker, used from one thread.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import Final

import sqlalchemy as sa

from pipeline.archive.engine import create_engine, translate_errors
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

_INT4_MASK: Final = 0x7FFFFFFF
_SERIALISE = sa.text("SELECT pg_advisory_xact_lock(:key)")
_COUNT = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted"
    " AND classid = CAST(:key_class AS oid)"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_TAKE = sa.text("SELECT pg_try_advisory_lock(:key_class, :lease_no)")
_RELEASE = sa.text("SELECT pg_advisory_unlock(:key_class, :lease_no)")
_RELEASE_ALL = sa.text("SELECT pg_advisory_unlock_all()")


@dataclass(frozen=True, slots=True)
class Lease:
    """One held lease.

    Attributes:
        key: The key it was taken on (``run:<id>:streams`` ...).
        key_class, lease_no: The advisory lock's two ``int4`` keys.
    """

    key: str
    key_class: int
    lease_no: int


def key_class(namespace: str, key: str) -> int:
    """Returns: the advisory lock class of ``key`` in ``namespace``: a non-negative ``int4``."""
    digest = hashlib.blake2b(f"{namespace}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & _INT4_MASK


class LeaseStore:
    """Takes and releases leases on one dedicated PostgreSQL connection (module docstring).

    Not thread-safe: call it from one thread (the worker runs it on a one-thread executor).

    Args:
        settings: Database URL; ``database_schema`` is the namespace of the keys.
    """

    def __init__(self, settings: Settings) -> None:
        self._namespace = settings.database_schema
        self._engine = create_engine(settings)
        self._connection: sa.Connection | None = None
        self.held = 0

    def __repr__(self) -> str:
        return f"<LeaseStore namespace={self._namespace} held={self.held}>"

    def count(self, key: str) -> int:
        """Returns: leases held on ``key`` by every session of this database.

        Raises:
            ArchiveUnavailableError: PostgreSQL cannot be reached.
        """
        params = {"key_class": key_class(self._namespace, key)}
        with translate_errors("lease count"), self._conn().begin() as tx:
            return int(tx.connection.execute(_COUNT, params).scalar_one())

    def session_pid(self) -> int:
        """Returns: the PostgreSQL server process holding this store's leases (``pg_locks.pid``)."""
        with translate_errors("lease session"), self._conn().begin() as tx:
            return int(tx.connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())

    def try_acquire(self, key: str, *, limit: int) -> Lease | None:
        """Takes a lease on ``key`` when fewer than ``limit`` are held across the group.

        Returns:
            The lease, or None when ``limit`` leases are held already.

        Raises:
            ArchiveUnavailableError: PostgreSQL cannot be reached (the connection is dropped,
                and its leases with it).
        """
        klass = key_class(self._namespace, key)
        try:
            with translate_errors("lease acquire"), self._conn().begin() as tx:
                tx.connection.execute(_SERIALISE, {"key": klass})
                held = int(tx.connection.execute(_COUNT, {"key_class": klass}).scalar_one())
                if held >= limit:
                    return None
                return self._take(tx.connection, key, klass)
        except Exception:
            self._drop()
            raise

    def _take(self, connection: sa.Connection, key: str, klass: int) -> Lease:
        while True:  # a lease number another worker holds (1 in 2**31) is drawn again
            lease_no = secrets.randbits(31)
            params = {"key_class": klass, "lease_no": lease_no}
            if connection.execute(_TAKE, params).scalar_one():
                self.held += 1
                return Lease(key, klass, lease_no)

    def release(self, lease: Lease) -> None:
        """Releases ``lease`` (nothing happens when the connection that held it is gone).

        Raises:
            ArchiveUnavailableError: PostgreSQL cannot be reached (the lease is gone with the
                connection anyway).
        """
        if self._connection is None:
            return
        params = {"key_class": lease.key_class, "lease_no": lease.lease_no}
        try:
            with translate_errors("lease release"), self._connection.begin() as tx:
                released = bool(tx.connection.execute(_RELEASE, params).scalar_one())
            if released:  # False: taken on a connection since lost (it went with it)
                self.held -= 1
        except Exception:
            self._drop()
            raise

    def close(self) -> None:
        """Releases every lease at once and closes the connection.

        A connection that is simply lost releases its leases too, but only once its server
        process has noticed and ended (shortly after, not at the same instant).
        """
        if self._connection is not None and self.held:
            try:
                with translate_errors("lease release"), self._connection.begin() as tx:
                    tx.connection.execute(_RELEASE_ALL)
                self.held = 0
            except Exception as exc:
                logger.warning("lease release failed on close error=%r", exc)
        self._drop()
        self._engine.dispose()

    def _conn(self) -> sa.Connection:
        if self._connection is None:
            self._connection = self._engine.connect()
        return self._connection

    def _drop(self) -> None:
        if self._connection is not None:
            if self.held:
                logger.warning("lease connection closed; its leases go with it held=%s", self.held)
            try:
                self._connection.invalidate()
                self._connection.close()
            finally:
                self._connection = None
                self.held = 0
