"""The chaos soak's fault scheduler and supervisor (:mod:`bench.chaos`).

:class:`Faults` injects one fault at a time, drawn from ``random.Random(seed)``, and logs each
(``fault t=+12s kind=stop_broker target=node-2 duration_s=14.0``). Its supervisor thread starts
again any worker or sink that exited while no fault held it, and counts it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from models import wire
from pipeline.kafka.clients import create_producer
from tests.integration.faults.cluster_support import NODES, KafkaCluster
from tests.integration.faults.fault_support import FaultStack, ops_services
from tests.stack_support import ServiceProcess

logger = logging.getLogger("bench.chaos")

KINDS: Final = (
    "kill_worker",
    "stop_worker",
    "kill_sink",
    "stop_sink",
    "kill_broker",
    "stop_broker",
    "pg_restart",
    "rebalance_storm",
    "poison",
)
GAP_S: Final = (10.0, 30.0)
"""Seconds between the end of one fault and the start of the next (uniform)."""
STOP_S: Final = (3.0, 20.0)
"""How long a SIGSTOP lasts: below and past the 6 s session timeouts."""
DOWN_S: Final = (3.0, 15.0)
"""How long a SIGKILLed process or broker stays down before it is started again."""
PG_OUTAGE_S: Final = 60.0
PG_OUTAGE_AT: Final = 1 / 3
"""The PostgreSQL outage starts this far into the soak."""
STORM_ROUNDS: Final = 3
POISON_RECORDS: Final = 3
POISON_PREFIX: Final = b"poison-"
SUPERVISE_EVERY_S: Final = 1.0


@dataclass(frozen=True)
class Fault:
    """One injected fault: when (seconds into the soak), what, on what, how long."""

    at_s: float
    kind: str
    target: str
    duration_s: float

    def __str__(self) -> str:
        return (
            f"fault t=+{self.at_s:.0f}s kind={self.kind} target={self.target} "
            f"duration_s={self.duration_s:.1f}"
        )


class Faults:
    """Injects faults into a running soak stack and restarts what died.

    Args:
        stack: The soak's processes (workers, sinks, Chat API).
        cluster: The three-node cluster of the soak.
        pg_env: ``ops/services.sh`` environment of the soak's private PostgreSQL.
        rng: The seeded random source of the schedule.
    """

    def __init__(
        self,
        stack: FaultStack,
        cluster: KafkaCluster,
        pg_env: dict[str, str],
        rng: random.Random,
    ) -> None:
        self._stack = stack
        self._cluster = cluster
        self._pg_env = pg_env
        self._rng = rng
        self._lock = threading.RLock()
        self._held: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._supervise, name="chaos-supervisor", daemon=True
        )
        self._start = time.monotonic()
        self.log: list[Fault] = []
        self.restarts: Counter[str] = Counter()
        self.poison_keys: set[bytes] = set()

    def supervise(self) -> None:
        """Starts the supervisor thread."""
        self._thread.start()

    def stop_supervising(self) -> None:
        """Stops the supervisor thread."""
        self._stop.set()
        self._thread.join()

    def run_for(self, seconds: float) -> None:
        """Injects faults until ``seconds`` passed (the fault in progress ends first)."""
        self._start = time.monotonic()
        end = self._start + seconds
        outage_at = self._start + seconds * PG_OUTAGE_AT
        outage_done = False
        while True:
            time.sleep(self._rng.uniform(*GAP_S))
            if time.monotonic() >= end:
                return
            if not outage_done and time.monotonic() >= outage_at:
                outage_done = True
                self._pg_outage()
                continue
            kind = self._rng.choice(KINDS)
            getattr(self, f"_{kind}")()

    def heal(self) -> None:
        """Every broker and PostgreSQL running, every process resumed (the end of the soak)."""
        self._cluster.heal()
        ops_services(self._pg_env, "start-postgres")
        with self._lock:
            for process in self._stack.processes:
                if process.popen.poll() is None:
                    os.kill(process.popen.pid, signal.SIGCONT)
            self._held.clear()

    # -- the faults -------------------------------------------------------------------------

    def _record(self, kind: str, target: str, duration_s: float) -> None:
        fault = Fault(time.monotonic() - self._start, kind, target, duration_s)
        self.log.append(fault)
        logger.info("%s", fault)

    def _pick(self, processes: list[ServiceProcess]) -> ServiceProcess:
        with self._lock:
            return self._rng.choice(processes)

    @contextmanager
    def _holding(self, name: str) -> Iterator[None]:
        with self._lock:
            self._held.add(name)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(name)

    def _kill(self, processes: list[ServiceProcess], kind: str) -> None:
        process = self._pick(processes)
        down = self._rng.uniform(*DOWN_S)
        self._record(kind, process.name, down)
        with self._holding(process.name):
            process.kill()
            time.sleep(down)
            self._restart(process)

    def _pause(self, processes: list[ServiceProcess], kind: str) -> None:
        process = self._pick(processes)
        paused = self._rng.uniform(*STOP_S)
        self._record(kind, process.name, paused)
        with self._holding(process.name):
            if process.popen.poll() is None:
                os.kill(process.popen.pid, signal.SIGSTOP)
                time.sleep(paused)
                os.kill(process.popen.pid, signal.SIGCONT)

    def _kill_worker(self) -> None:
        self._kill(self._stack.workers, "kill_worker")

    def _stop_worker(self) -> None:
        self._pause(self._stack.workers, "stop_worker")

    def _kill_sink(self) -> None:
        self._kill(self._stack.sinks, "kill_sink")

    def _stop_sink(self) -> None:
        self._pause(self._stack.sinks, "stop_sink")

    def _kill_broker(self) -> None:
        node = self._rng.choice(NODES)
        down = self._rng.uniform(*DOWN_S)
        self._record("kill_broker", f"node-{node}", down)
        self._cluster.kill(node)
        time.sleep(down)
        self._cluster.start(node)

    def _stop_broker(self) -> None:
        node = self._rng.choice(NODES)
        paused = self._rng.uniform(*STOP_S)
        self._record("stop_broker", f"node-{node}", paused)
        self._cluster.pause(node)
        try:
            time.sleep(paused)
        finally:
            self._cluster.resume(node)

    def _pg_restart(self) -> None:
        self._record("pg_restart", "postgres", 0.0)
        ops_services(self._pg_env, "restart-postgres")

    def _pg_outage(self) -> None:
        self._record("pg_outage", "postgres", PG_OUTAGE_S)
        ops_services(self._pg_env, "stop-postgres")
        try:
            time.sleep(PG_OUTAGE_S)
        finally:
            ops_services(self._pg_env, "start-postgres")

    def _rebalance_storm(self) -> None:
        """Workers join and leave :data:`STORM_ROUNDS` times (each stays 3-10 s)."""
        stays = [self._rng.uniform(3.0, 10.0) for _ in range(STORM_ROUNDS)]
        self._record("rebalance_storm", f"{STORM_ROUNDS} workers", sum(stays))
        for round_, stay in enumerate(stays):
            name = f"worker-storm-{len(self.log)}-{round_}"
            joined = self._stack.start(name, "worker", CHATSCRIBE_WORKER_ID=name)
            time.sleep(stay)
            joined.stop()

    def _poison(self) -> None:
        """Undecodable records on ``chat.requests`` and ``chat.lines``: both are dead-lettered."""
        self._record("poison", f"{2 * POISON_RECORDS} records", 0.0)
        keys = [POISON_PREFIX + os.urandom(6).hex().encode() for _ in range(2 * POISON_RECORDS)]
        self.poison_keys.update(keys)
        asyncio.run(self._produce_poison(keys))

    async def _produce_poison(self, keys: list[bytes]) -> None:
        settings = self._stack.settings
        producer = create_producer(settings, client_id="chaos-poison")
        await producer.start()
        try:
            for n, key in enumerate(keys):
                topic = wire.TOPIC_REQUESTS if n < POISON_RECORDS else wire.TOPIC_LINES
                await producer.send_and_wait(settings.topic(topic), b"{not json", key=key)
        finally:
            await producer.stop()

    # -- the supervisor ---------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self._stop.wait(SUPERVISE_EVERY_S):
            with self._lock:
                for process in [*self._stack.workers, *self._stack.sinks]:
                    if process.name not in self._held and process.popen.poll() is not None:
                        logger.info(
                            "supervisor: %s exited with %s; starting it again",
                            process.name,
                            process.popen.returncode,
                        )
                        self.restarts[process.name] += 1
                        self._restart(process)

    def _restart(self, process: ServiceProcess) -> None:
        with self._lock:
            group = self._stack.workers if process in self._stack.workers else self._stack.sinks
            start: Callable[[str], ServiceProcess] = (
                self._stack.start_worker if group is self._stack.workers else self._stack.start_sink
            )
            group.remove(process)
            start(process.name)
