"""Fixtures of the fault tests (helpers in ``fault_support`` and ``sink_fault_stack``)."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.faults.cluster_support import KafkaCluster, kafka_cluster_started
from tests.integration.faults.fault_support import StackFactory, running_stack


@pytest.fixture
def fault_stack(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> StackFactory:
    """``fault_stack(workers=N, line_delay_ms=MS, concurrency=C, **settings)``.

    The context manager :func:`fault_support.running_stack` on the shared Kafka and PostgreSQL,
    with the processes' logs and the Chat API's sent log in ``tmp_path``.
    """
    return functools.partial(running_stack, kafka_bootstrap, database_url, tmp_path)


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """A three-node Kafka cluster of the test module's own (``ops/services.sh up --brokers 3``).

    Started when the module's first test asks for it and stopped (``down --brokers 3``) right
    after its last, so three JVMs never run beside the rest of the suite on a 2-core machine.
    Its state lives in a folder of its own, outside pytest's temporary folders: those are
    pruned to the last three sessions of the user, another session's start included.
    """
    state = Path(tempfile.mkdtemp(prefix="chatscribe-cluster-"))
    try:
        with kafka_cluster_started(state) as cluster:
            yield cluster
    finally:
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster) -> KafkaCluster:
    """:func:`kafka_cluster` with every node running."""
    kafka_cluster.heal()
    return kafka_cluster
