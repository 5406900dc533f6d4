"""Fixtures of the fault tests (helpers in ``fault_support`` and ``sink_fault_stack``)."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.faults.cluster_support import (
    SHARED_STATE,
    KafkaCluster,
    kafka_cluster_started,
)
from tests.integration.faults.fault_support import StackFactory, ops_services, running_stack
from tests.stack_support import free_port


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


@pytest.fixture(scope="session")
def private_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A one-node Kafka of the fault tests' own; yields its bootstrap address and ops env.

    One for the session (its start takes ~40 s on a loaded machine): each test that stops,
    restarts or pauses it leaves it running, and uses topics of its own. Its state
    (``kafka/kafka.pid`` among it) is in a session temporary folder; the jars are linked from
    the shared cache.
    """
    state = tmp_path_factory.mktemp("private-kafka") / "state"
    (state / "kafka").mkdir(parents=True)
    shared = SHARED_STATE / "kafka"
    (state / "kafka/libs").symlink_to(shared / "libs")
    (state / "kafka/libs.pom.sha256").write_bytes((shared / "libs.pom.sha256").read_bytes())
    bootstrap = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "CHATSCRIBE_STATE_DIR": str(state),
        "CHATSCRIBE_KAFKA_BOOTSTRAP": bootstrap,
        "CHATSCRIBE_KAFKA_CONTROLLER_PORT": str(free_port()),
    }
    ops_services(env, "start-kafka")
    try:
        yield bootstrap, env
    finally:
        ops_services(env, "stop-kafka")
