"""Admission: when a worker may take a job, and when the job may open its stream.

A job waits in :meth:`Admission.acquire` (before its ``started`` event) until all of these hold:

1. **headroom** — the worker holds fewer than ``worker_concurrency`` jobs, and its event loop
   runs on time and its CPU is below ``worker_max_cpu`` (:class:`~.limits.Headroom`, sampled
   every :data:`SAMPLE_S`); one job is always allowed;
2. **the target's adaptive limit** — fewer jobs prepared for the job's agent
   (:func:`target_key`: the chat URL's host and path) than its :class:`~.limits.AimdLimit`
   allows plus a spare half (as many in slow start); the limit grows with every call the agent
   accepts (2xx) and shrinks on 429s (never below the calls it is serving) and on rising
   first-line latency measured while the worker runs on time, so a run finds the agent's limit
   by itself (each worker its share);
3. **the group's leases** — when the job carries ``limits`` (key: its run) or
   ``target_limits`` (key: its target): a stream lease below ``max_concurrency`` and a
   one-minute lease below ``requests_per_minute``, each counted across every worker of the
   group in PostgreSQL (:mod:`pipeline.archive.leases`). A job that finds a limit reached gives
   its place back and tries again every ``leases_poll_s`` (±50%).

Then, right before each call (:meth:`Ticket.admitted`, after ``started`` is durable), the job
takes a stream slot of the target's limit (at most ``allowed`` streams at once); the slot and the
stream leases are freed as soon as the stream closes (:meth:`Ticket.stream_ended`), so the next,
already prepared, job calls at once instead of after two Kafka round trips. A throttled call
gives its slot back while it waits out ``Retry-After`` (it is not streaming) and takes one again
to ask again; a next attempt of the same job (a broken stream) takes its leases and slot again.

The :class:`Ticket` is the job's :class:`~pipeline.worker.job_control.Throttling` observer. A
per-minute lease runs out 60 s after it was taken (or when the worker's connection closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Final, TypeVar
from urllib.parse import urlsplit

from models.records import ChatJob, RateLimits
from pipeline import metrics
from pipeline.archive.leases import Lease, LeaseStore
from pipeline.errors import ArchiveUnavailableError
from pipeline.settings import Settings
from pipeline.worker.limits import AimdLimit, Headroom

logger = logging.getLogger(__name__)

SAMPLE_S: Final = 0.25
RATE_WINDOW_S: Final = 60.0
MIN_IN_FLIGHT: Final = 1
T = TypeVar("T")


def target_key(chat_url: str) -> str:
    """Returns: the target of a chat URL: ``host[:port]/path`` (the agent), lowercased host."""
    parts = urlsplit(chat_url)
    return f"{parts.netloc.lower()}{parts.path.rstrip('/')}"


def lease_keys(job: ChatJob) -> list[tuple[str, int, bool]]:
    """Returns: the group leases ``job`` needs, as ``(key, limit, per_minute)``."""
    keys: list[tuple[str, int, bool]] = []
    scopes: list[tuple[str, RateLimits | None]] = [
        (f"run:{job.run_id}", job.limits),
        (f"target:{target_key(job.chat_url)}", job.target_limits),
    ]
    for scope, limits in scopes:
        if limits is None:
            continue
        if limits.max_concurrency is not None:
            keys.append((f"{scope}:streams", limits.max_concurrency, False))
        if limits.requests_per_minute is not None:
            keys.append((f"{scope}:minute", limits.requests_per_minute, True))
    return keys


class Ticket:
    """A job's admission: its queue place, its stream slot and its leases.

    Its place among the target's prepared jobs, its stream slot while it streams, and its leases
    (module docstring).
    """

    def __init__(
        self,
        admission: Admission,
        job: ChatJob,
        limit: AimdLimit,
        wanted: list[tuple[str, int, bool]],
        leases: list[Lease],
    ) -> None:
        self._admission = admission
        self._limit = limit
        self._target = target_key(job.chat_url)
        self._wanted = wanted
        self._epoch = limit.epoch
        self.leases: list[Lease] | None = leases
        self.streaming = False
        self.served = False
        self.released = False
        self._retrying = False

    def throttled(self, retry_after_s: float | None) -> None:
        """The call was throttled: the target's limit decreases, once per overshoot.

        No decrease when one came after this stream slot was taken (its retries answer the same
        overshoot).
        """
        if self._limit.on_throttled(self._epoch):
            self._admission.limit_changed(self._target, self._limit, "throttled")
        if self.streaming:  # no stream while it waits: the slot may serve a job the limit allows
            self._retrying = True
            self._free_slot()

    def accepted(self) -> None:
        """The agent accepted the call (2xx): it counts as served and the limit grows."""
        if self.streaming and not self.served:
            self.served = True
            self._limit.on_accepted()

    def first_line(self, latency_s: float) -> None:
        """The call's first line came: the limit shrinks when the latency rose.

        Not while the worker itself runs late or hot (:meth:`Admission.runs_on_time`): the
        latency then measures this process, not the agent (issue 13: at 1,000 paced streams
        the worker's own backlog raised it, the limit fell from 910 to 750, and the last jobs
        waited for streams to end; the headroom already holds new jobs back meanwhile).
        """
        self._retrying = False
        if not self._admission.runs_on_time():
            return
        if self._limit.on_first_line(self._epoch, latency_s):
            self._admission.limit_changed(self._target, self._limit, "latency")
        metrics.TARGET_LIMIT.labels(target=self._target).set(self._limit.limit)

    async def admitted(self) -> None:
        """Waits for the leases (a next attempt) and a stream slot, before each call.

        A call asked again after a 429 keeps the epoch of its first slot (one decrease per
        overshoot).
        """
        if self.streaming:
            return
        if self.leases is None:
            self.leases = await self._admission.wait_leases(self._wanted)
        epoch = await self._admission.stream_slot(self._limit)
        if not self._retrying:
            self._epoch = epoch
        self.streaming = True

    def stream_ended(self) -> None:
        """The stream closed: frees the stream slot and the stream leases now."""
        self._retrying = False
        if self.streaming:
            self._free_slot()
        if self.leases is not None:
            self._admission.release_leases(self.leases)
            self.leases = None

    def _free_slot(self) -> None:
        self.streaming = False
        self._limit.release(served=self.served)
        self.served = False
        self._admission.changed()

    def release(self) -> None:
        """The job ended: frees everything it held (idempotent)."""
        if not self.released:
            self.released = True
            self.stream_ended()
            self._limit.unprepare()
            self._admission.job_ended()


class Admission:
    """Decides when a job may start (module docstring). Start it, then :meth:`admitted` jobs.

    Args:
        settings: ``worker_concurrency``, ``worker_max_loop_lag_ms``, ``worker_max_cpu``,
            ``target_initial_concurrency``, ``leases_poll_s``; the database for leases.
        store_factory: Builds the lease store when the first job with limits arrives
            (default: :class:`~pipeline.archive.leases.LeaseStore` on ``settings``).
    """

    def __init__(
        self, settings: Settings, *, store_factory: Callable[[], LeaseStore] | None = None
    ) -> None:
        self._settings = settings
        self._ceiling = settings.worker_concurrency
        self._headroom = Headroom(
            max_lag_s=settings.worker_max_loop_lag_ms / 1000, max_cpu=settings.worker_max_cpu
        )
        self._targets: dict[str, AimdLimit] = {}
        self._wake = asyncio.Event()
        self._store_factory = store_factory or (lambda: LeaseStore(settings))
        self._store: LeaseStore | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leases")
        self._sampler: asyncio.Task[None] | None = None
        self._leases_down_since: float | None = None
        self.in_flight = 0

    def __repr__(self) -> str:
        limits = {t: round(lim.limit, 1) for t, lim in self._targets.items()}
        return f"<Admission in_flight={self.in_flight} headroom={self.has_headroom()} {limits}>"

    def has_headroom(self) -> bool:
        """True while the worker may take another job (below the ceiling, loop and CPU fine)."""
        if self.in_flight < MIN_IN_FLIGHT:
            return True
        return self.in_flight < self._ceiling and self._headroom.ok

    def runs_on_time(self) -> bool:
        """True while this process's loop lag and CPU are within limits (:attr:`.Headroom.calm`).

        In the latest sample as in the smoothed figures. A first-line latency measured
        meanwhile is the agent's, not this process's backlog.
        """
        return self._headroom.calm

    def limit_of(self, chat_url: str) -> AimdLimit:
        """Returns: the adaptive limit of ``chat_url``'s target (created on first use)."""
        target = target_key(chat_url)
        limit = self._targets.get(target)
        if limit is None:
            initial = min(self._settings.target_initial_concurrency, self._ceiling)
            limit = self._targets[target] = AimdLimit(initial=initial, maximum=self._ceiling)
        return limit

    async def start(self) -> None:
        """Starts sampling the event loop's lag and the process's CPU."""
        self._sampler = asyncio.create_task(self._sample(), name="admission-headroom")

    async def stop(self) -> None:
        """Stops sampling and closes the lease connection (its leases go with it)."""
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        if self._store is not None:
            await self._in_thread(self._store.close)
        self._executor.shutdown(wait=False)

    @asynccontextmanager
    async def admitted(self, job: ChatJob) -> AsyncIterator[Ticket]:
        """Waits for ``job``'s admission (:meth:`acquire`); releases it on the way out.

        Yields:
            The job's ticket (its throttling observer).
        """
        ticket = await self.acquire(job)
        try:
            yield ticket
        finally:
            ticket.release()

    async def acquire(self, job: ChatJob) -> Ticket:
        """Waits until ``job`` may start (module docstring, 1–3). Returns: its ticket.

        While PostgreSQL cannot be reached, a job that needs leases keeps waiting (a limit that
        cannot be counted is not ignored).
        """
        started = time.monotonic()
        limit = self.limit_of(job.chat_url)
        wanted = lease_keys(job)
        while True:
            await self._prepare(limit)
            leases = await self._take_leases(wanted)
            if leases is not None:
                break
            limit.unprepare()
            self.job_ended()
            await asyncio.sleep(self._settings.leases_poll_s * random.uniform(0.5, 1.5))
        metrics.ADMISSION_WAIT_S.observe(time.monotonic() - started)
        return Ticket(self, job, limit, wanted, leases)

    async def stream_slot(self, limit: AimdLimit) -> int:
        """Waits for a stream slot of ``limit``. Returns: the epoch it was taken in."""
        while (epoch := limit.try_acquire()) is None:
            await self._wake.wait()
        return epoch

    async def wait_leases(self, wanted: list[tuple[str, int, bool]]) -> list[Lease]:
        """Waits until every lease in ``wanted`` is taken (polling). Returns: the leases."""
        while (leases := await self._take_leases(wanted)) is None:  # noqa: ASYNC110 (other workers)
            await asyncio.sleep(self._settings.leases_poll_s * random.uniform(0.5, 1.5))
        return leases

    def release_leases(self, leases: list[Lease]) -> None:
        """Releases the stream leases among ``leases`` (per-minute ones run out by themselves)."""
        streams = [lease for lease in leases if not lease.key.endswith(":minute")]
        if streams:
            asyncio.get_running_loop().run_in_executor(self._executor, self._release, streams)

    def job_ended(self) -> None:
        """A job admitted by :meth:`acquire` ended (or gave its place back)."""
        self.in_flight -= 1
        self.changed()

    def changed(self) -> None:
        """Wakes the jobs waiting for a place or a stream slot."""
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def limit_changed(self, target: str, limit: AimdLimit, why: str) -> None:
        """Logs and exports a decrease of ``target``'s limit."""
        metrics.TARGET_LIMIT.labels(target=target).set(limit.limit)
        h = self._headroom
        logger.info(
            "target limit decreased target=%s limit=%.1f in_flight=%s why=%s"
            " loop_lag_s=%.3f/%.3f cpu=%.2f/%.2f",
            target,
            limit.limit,
            limit.in_flight,
            why,
            h.last_lag_s,
            h.lag_s,
            h.last_cpu,
            h.cpu,
        )

    async def _prepare(self, limit: AimdLimit) -> None:
        while not (self.has_headroom() and limit.try_prepare()):
            await self._wake.wait()
        self.in_flight += 1

    async def _take_leases(self, wanted: list[tuple[str, int, bool]]) -> list[Lease] | None:
        if not wanted:
            return []
        try:
            leases = await self._in_thread(lambda: self._take_all(wanted))
        except ArchiveUnavailableError as exc:
            if self._leases_down_since is None:  # one warning per outage, not one per poll
                self._leases_down_since = time.monotonic()
                logger.warning("leases unavailable; jobs with limits wait error=%s", exc)
            return None
        if self._leases_down_since is not None:
            down_s = time.monotonic() - self._leases_down_since
            logger.warning("leases available again down_s=%.1f", down_s)
            self._leases_down_since = None
        return leases

    def _take_all(self, wanted: list[tuple[str, int, bool]]) -> list[Lease] | None:
        """In the lease thread: every lease, or none (the ones taken are given back)."""
        if self._store is None:
            self._store = self._store_factory()
        taken: list[Lease] = []
        for key, limit, _per_minute in wanted:
            lease = self._store.try_acquire(key, limit=limit)
            if lease is None:
                self._release(taken)
                return None
            taken.append(lease)
        for lease in taken:
            if lease.key.endswith(":minute"):
                self._later(RATE_WINDOW_S, functools.partial(self._release, [lease]))
        return taken

    def _later(self, delay_s: float, action: Callable[[], None]) -> None:
        """Runs ``action`` in the lease thread ``delay_s`` seconds from now (not after stop)."""

        def submit() -> None:
            with contextlib.suppress(RuntimeError):  # shut down: the connection is closed
                self._executor.submit(action)

        timer = threading.Timer(delay_s, submit)
        timer.daemon = True
        timer.start()

    def _release(self, leases: list[Lease]) -> None:
        """In the lease thread: releases ``leases``, logging a failure.

        A failure means the connection is gone, and the leases with it.
        """
        if self._store is None:
            return
        for lease in leases:
            try:
                self._store.release(lease)
            except Exception as exc:
                logger.warning("lease release failed key=%s error=%r", lease.key, exc)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        wall, cpu = loop.time(), time.process_time()
        while True:
            await asyncio.sleep(SAMPLE_S)
            now, now_cpu = loop.time(), time.process_time()
            lag_s = now - wall - SAMPLE_S
            self._headroom.sample(lag_s=lag_s, cpu_s=now_cpu - cpu, wall_s=now - wall)
            wall, cpu = now, now_cpu
            metrics.WORKER_HEADROOM.set(1 if self._headroom.ok else 0)
            self.changed()
