"""The workers' consumer group: how ``chat.requests`` partitions are shared, and rebalances.

With :mod:`pipeline.worker.app`, the only module that imports faust.

Rebalances (issue 4, "Scale-out": a worker joining or leaving rebalances without losing or
duplicating a job). faust's rebalance is eager: every member gives up every partition. Before
it does, faust stops handing records to the agents and waits for the running jobs to end and
be acked (``stream_wait_empty``), commits, and only then rejoins. So a job is never run by two
workers at once; the wait lasts as long as the longest running job, but at most
:data:`HANDOVER_GRACE_S`: then the jobs still running are handed over (:class:`HandOver`) and
continued by the partition's next owner. A worker stopped with SIGTERM does the same before it
leaves. A worker that dies (SIGKILL) leaves after the session timeout, and its uncommitted jobs
are continued by the next owner as their next attempt (:mod:`pipeline.worker.attempts`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, cast

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from faust.assignor import PartitionAssignor
from faust.types import AppT

from pipeline.errors import RecordDeliveryError
from pipeline.worker.history import JobHistory

logger = logging.getLogger(__name__)


class BalancedAssignor(PartitionAssignor):
    """faust's co-partitioning assignor without standby replicas, so a joining worker gets work.

    faust (0.15) builds its assignor with ``table_standby_replicas`` (default 1) replicas; with
    a replica, ``faust.assignor.copartitioned_assignor.CopartitionedAssignor`` lets every
    worker keep up to ``ceil(partitions / workers)`` partitions: two workers holding two of four
    partitions each keep them all when a third joins, and the third gets none. With no replica
    it first takes every worker down to ``floor(partitions / workers)``, so each gets at least
    one while there are as many partitions as workers. The worker has no tables, so it needs
    no standbys. ``chat.cancellations`` stays co-partitioned with ``chat.requests`` (a job's
    cancellation reaches the worker that runs it).
    """

    def __init__(self, app: AppT, replicas: int = 0) -> None:
        super().__init__(app, replicas=0)


def add_rebalance_hooks(app: faust.App, history: JobHistory, *, worker_id: str, topic: str) -> None:
    """Forgets the job history on every rebalance and logs the partitions this worker got.

    Other workers may have run jobs since; the partitions logged are those of ``topic``
    (``chat.requests``).
    """

    def forget(sender: Any, *args: Any, **kwargs: Any) -> None:
        history.forget()

    def assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
        history.forget()
        mine = sorted(tp.partition for tp in assigned if tp.topic == topic)
        logger.info(
            "partitions assigned worker_id=%s topic=%s partitions=%s", worker_id, topic, mine
        )

    app.on_partitions_revoked.connect(cast(Any, forget))  # mode types its handlers oddly
    app.on_partitions_assigned.connect(cast(Any, assigned))


def assignment(app: faust.App, topic: str) -> Callable[[], list[tuple[str, int]]]:
    """Returns: a function giving this worker's assigned partitions of ``topic``."""

    def assigned() -> list[tuple[str, int]]:
        try:
            tps = app.consumer.assignment()
        except Exception:  # the consumer is not started yet
            return []
        return [(tp.topic, tp.partition) for tp in tps if tp.topic == topic]

    return assigned


HANDOVER_GRACE_S: Final = 10.0
"""How long a rebalance (or a stop) waits for running jobs before they are handed over."""
HANDOVER_POLL_S: Final = 0.5


class HandOver:
    """Hands the running jobs over when a rebalance has waited ``grace_s`` for them.

    faust's rebalance waits for every running job (module docstring); a job streams for up to its
    deadline (300 s by default), and the whole group waits with it. So when a rebalance (or a stop)
    has waited ``grace_s``, the jobs that were running when it began are handed over: their task is
    cancelled (the HTTP stream is closed; the Chat API goes on with the turn), the job's record is
    published again to ``chat.requests`` (same key, value, headers and timestamp, so the same
    partition), and only then is the original acked. Whoever gets the partition reads the job's
    events back: its attempt has no terminal event, so it records it as superseded and continues
    with a state fetch (:mod:`pipeline.worker.attempts`). A worker killed between the two leaves
    both records; the second finds the job finished and only acks it.

    Args:
        waiting: True while faust waits for the running jobs (``app.rebalancing`` or
            ``app.should_stop``).
        grace_s: Seconds the jobs get to end by themselves.
        poll_s: How often ``waiting`` is checked.
    """

    def __init__(
        self,
        waiting: Callable[[], bool],
        *,
        grace_s: float = HANDOVER_GRACE_S,
        poll_s: float = HANDOVER_POLL_S,
    ) -> None:
        self._waiting = waiting
        self._grace_s = grace_s
        self._poll_s = poll_s
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.handed_over = 0

    def __repr__(self) -> str:
        return f"<HandOver running={len(self.tasks)} handed_over={self.handed_over}>"

    async def run(self, job_id: str, job: Coroutine[Any, Any, Any]) -> bool:
        """Runs ``job`` as a task that a long rebalance may cancel.

        Returns:
            True when it ended by itself, False when it was handed over (cancelled here).

        Raises:
            Whatever ``job`` raises; ``CancelledError`` when the caller itself is cancelled.
        """
        task = asyncio.ensure_future(job)
        self.tasks[job_id] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise
            return False
        finally:
            self.tasks.pop(job_id, None)
        return True

    async def watch(self) -> None:
        """Cancels the tasks a rebalance found running once it waited ``grace_s`` (forever)."""
        found: set[asyncio.Task[Any]] | None = None
        since = 0.0
        while True:
            await asyncio.sleep(self._poll_s)
            if not self._waiting():
                found = None
            elif found is None:
                found, since = set(self.tasks.values()), time.monotonic()
            elif found and time.monotonic() - since >= self._grace_s:
                running = [task for task in found if not task.done()]
                logger.warning("handing over running jobs jobs=%d", len(running))
                for task in running:
                    task.cancel()
                self.handed_over += len(running)
                found = set()


async def requeue(producer: AIOKafkaProducer, message: Any) -> None:
    """Publishes a ``chat.requests`` record again, as it was (key, value, headers, timestamp).

    Raises:
        RecordDeliveryError: Kafka did not acknowledge it.
    """
    try:
        await producer.send_and_wait(
            message.topic,
            message.value,
            key=message.key,
            headers=list(message.headers or ()),
            timestamp_ms=int(message.timestamp * 1000),
        )
    except KafkaError as exc:
        raise RecordDeliveryError(f"job not requeued: {exc!r}", topic=message.topic) from exc
    logger.info(
        "job handed over topic=%s partition=%s offset=%s key=%r",
        message.topic,
        message.partition,
        message.offset,
        message.key,
    )
