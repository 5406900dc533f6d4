"""The workers' consumer group: how ``chat.requests`` partitions are shared, and rebalances.

With :mod:`pipeline.worker`, the only module that imports faust.

Rebalances (issue 4, "Scale-out": a worker joining or leaving rebalances without losing or
duplicating a job). faust's rebalance is eager: every member gives up every partition. Before
it does, faust stops handing records to the agents and waits for the running jobs to end and
be acked (``stream_wait_empty``), commits, and only then rejoins. So a job is never run by two
workers at once and ends where it started; the wait lasts as long as the longest running job,
at most its deadline plus the abort grace, which is why the group's rebalance timeout is that
plus a margin (:func:`pipeline.worker.create_app`). A worker stopped with SIGTERM does the same
before it leaves. A worker that dies (SIGKILL) leaves after the session timeout, and its
uncommitted jobs are continued by the next owner as their next attempt
(:mod:`pipeline.attempts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import faust
from faust.assignor import PartitionAssignor
from faust.types import AppT

from pipeline.job_history import JobHistory

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
    """Forgets the job history on every rebalance (other workers may have run jobs since) and
    logs the partitions of ``topic`` (``chat.requests``) this worker got."""

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
