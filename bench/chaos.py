"""``python -m bench.chaos --minutes N --seed S``: a chaos soak (issue 25, part 3).

LLM-paced load (our Chat API with ``line_delay_ms``) through two workers and two sinks on a
three-node Kafka cluster, while a seeded scheduler injects faults; then the invariants, and as
the last line::

    chaos: submitted=N completed=N agent_failed=N lost=N duplicate_lines=N unverified_chains=N
    stray_dead_letters=N final_lag=N longest_idle_wait_s=X faults=N

(one line). The exit code is 1 when an invariant fails: lost, duplicate lines, unverified
chains, stray dead letters and final lag must be 0, and every poison record must be
dead-lettered.

Everything it starts is its own and removed afterwards: the cluster (``ops/services.sh up
--brokers 3`` in a temporary state folder on free ports, as the fault tests do), a private
PostgreSQL cluster on a free port (``ops/services.sh start-postgres`` with its own state folder
and URL; the shared server on 15432 is never touched), the Chat API, workers and sinks
(``tests.stack_support``: the fault tests' process stack, audit and cluster helpers are reused,
not copied).

Faults (:mod:`bench.chaos_faults`), one at a time, 10-30 s apart, kinds and targets drawn from
``random.Random(seed)``: SIGKILL and SIGSTOP/SIGCONT of a worker, a sink or a broker, a
PostgreSQL restart, one 60 s PostgreSQL outage (a third into the soak), a rebalance storm
(workers joining and leaving) and poison records (undecodable ``chat.requests`` and
``chat.lines`` records). A process that exits while no fault holds it (a worker stops itself
when Kafka does not confirm records, or when its partitions stall) is started again, as a
supervisor would, and counted. Durations on a loaded machine differ run to run; the schedule's
kinds, targets and pauses do not.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from bench.chaos_checks import Summary, check
from bench.chaos_faults import Faults
from tests.integration.faults.cluster_support import KafkaCluster, kafka_cluster_started
from tests.integration.faults.fault_support import (
    API_KEY,
    FaultStack,
    make_jobs,
    ops_services,
    submit,
)
from tests.stack_support import ChatApi, free_port, isolated_settings

logger = logging.getLogger("bench.chaos")

WORKERS: Final = ("worker-a", "worker-b")
SINKS: Final = ("sink-a", "sink-b")
CONCURRENCY: Final = 4
LINE_DELAY_MS: Final = 200
"""About 20 lines a job at 200 ms: a job streams ~4 s, the pace of an LLM agent's answer."""
JOBS_PER_RUN: Final = 4
SUBMIT_EVERY_S: Final = 5.0
SESSION_TIMEOUT_S: Final = 6.0
STALL_TIMEOUT_S: Final = 20.0
"""The watchdogs' stall timeout in the soak (the default is 60 s): well past a rebalance."""
DRAIN_TIMEOUT_S: Final = 600.0
READY_TIMEOUT_S: Final = 180.0
STOP_TIMEOUT_S: Final = 60.0


@contextmanager
def private_postgres(state: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A PostgreSQL cluster of the soak's own on a free port; yields its URL and ops env."""
    state.mkdir(parents=True)
    state.chmod(0o755)  # the postgres user keeps its data in it
    url = f"postgresql+psycopg://chatscribe:chatscribe@127.0.0.1:{free_port()}/chatscribe"
    env = {**os.environ, "CHATSCRIBE_STATE_DIR": str(state), "CHATSCRIBE_DATABASE_URL": url}
    ops_services(env, "start-postgres")
    try:
        yield url, env
    finally:
        ops_services(env, "stop-postgres")


class Load:
    """Submits :data:`JOBS_PER_RUN` jobs every :data:`SUBMIT_EVERY_S` seconds from a thread.

    A submission Kafka does not confirm is sent again, same jobs (a job's id makes a second
    copy a no-op for the workers), until it is confirmed: every run counted is in Kafka.
    """

    def __init__(self, stack: FaultStack) -> None:
        self._stack = stack
        self.runs: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-load", daemon=True)

    def start(self) -> None:
        """Starts submitting."""
        self._thread.start()

    def stop(self) -> None:
        """Stops after the submission in progress."""
        self._stop.set()
        self._thread.join()

    @property
    def submitted(self) -> int:
        """Jobs confirmed by Kafka."""
        return sum(count for _, count in self.runs)

    def _loop(self) -> None:
        while not self._stop.wait(SUBMIT_EVERY_S):
            jobs = make_jobs(JOBS_PER_RUN, self._stack.chat_url)
            while not self._stop.is_set():
                try:
                    submit(self._stack.settings, jobs)
                    break
                except Exception as exc:  # a broker away: the same jobs again
                    logger.info("submission not confirmed, again: %r", exc)
                    time.sleep(1)
            else:
                return
            self.runs.append((jobs[0].run_id, len(jobs)))


@contextmanager
def soak_stack(cluster: KafkaCluster, database_url: str, logs: Path) -> Iterator[FaultStack]:
    """The Chat API, :data:`WORKERS` and :data:`SINKS` on the cluster and the private database."""
    with isolated_settings(
        cluster.bootstrap,
        database_url,
        tag="c",
        api_key=API_KEY,
        worker_concurrency=CONCURRENCY,
        worker_session_timeout_s=SESSION_TIMEOUT_S,
        worker_stall_timeout_s=STALL_TIMEOUT_S,
        sink_stall_timeout_s=STALL_TIMEOUT_S,
    ) as settings:
        stack = FaultStack(
            settings, logs, READY_TIMEOUT_S, STOP_TIMEOUT_S, True, sent_log=logs / "sent.ndjson"
        )
        chat = ChatApi(
            env={
                "CHATSCRIBE_LINE_DELAY_MS": str(LINE_DELAY_MS),
                "CHATSCRIBE_SENT_LOG": str(stack.sent_log),
            }
        )
        with stack.running([chat], workers=WORKERS, sinks=SINKS):
            stack.wait_until(stack.balanced, timeout_s=READY_TIMEOUT_S, what="a balanced group")
            yield stack


def soak(minutes: float, seed: int, logs: Path) -> Summary:
    """Runs the whole soak in ``logs`` (processes' logs, sent log); returns its summary."""
    state = Path(tempfile.mkdtemp(prefix="chatscribe-chaos-"))
    state.chmod(0o755)  # the postgres user reaches its data folder below
    try:
        with (
            private_postgres(state / "pg") as (database_url, pg_env),
            kafka_cluster_started(state / "kafka") as cluster,
            soak_stack(cluster, database_url, logs) as stack,
        ):
            faults = Faults(stack, cluster, pg_env, random.Random(seed))
            load = Load(stack)
            faults.supervise()
            try:
                load.start()
                try:
                    faults.run_for(minutes * 60)
                finally:
                    load.stop()
                    faults.heal()
                logger.info("soak over; draining %d runs", len(load.runs))
                return check(stack, load.runs, faults, drain_timeout_s=DRAIN_TIMEOUT_S)
            finally:
                faults.stop_supervising()
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs a soak; prints the fault log, its summary and the ``chaos:`` line.

    Returns:
        0 when every invariant holds, else 1.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=2.0, help="faults injected this long")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fault schedule")
    parser.add_argument("--logs", type=Path, default=None, help="folder of the processes' logs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logs = args.logs or Path(".state/chaos") / f"seed{args.seed}-{uuid.uuid4().hex[:6]}"
    logs.mkdir(parents=True, exist_ok=True)
    print(f"chaos: logs in {logs}", flush=True)
    summary = soak(args.minutes, args.seed, logs)
    for line in summary.report():
        print(line, flush=True)
    print(summary.last_line(), flush=True)
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
