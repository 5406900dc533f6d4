"""A three-node Kafka cluster of the test session's own, started by ``ops/services.sh``.

:func:`kafka_cluster_started` runs ``ops/services.sh up --brokers 3`` in a state folder of its own
(the Kafka jars are linked from the shared cache, as ``test_fault_kafka_restart`` does) on six
free loopback ports, and ``down --brokers 3`` afterwards, so it never touches the single node
other tests and engineers use. :class:`KafkaCluster` drives one node (``kill-broker``,
``stop-broker``, ``cont-broker``, ``start-broker``) and reads the cluster's metadata: which node
leads the partitions that hold the most records, and whether every replica is back in sync.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from tests.stack_support import ROOT

NODES = (1, 2, 3)
SHARED_STATE = Path(os.environ.get("CHATSCRIBE_STATE_DIR", Path.home() / ".local/state/chatscribe"))
OPS_TIMEOUT_S = 180.0
DESCRIBE_ATTEMPTS = 10


def _free_block(ports: int) -> int:
    """Returns: a base port with ``ports`` consecutive ports free on 127.0.0.1 a moment ago.

    Drawn below Linux's ephemeral range (32768-60999), where no outgoing connection takes one
    between this check and the nodes' start.
    """
    for _ in range(200):
        base = random.randrange(20_000, 32_000, 2)
        if all(_port_free(base + n) for n in range(ports)):
            return base
    raise AssertionError(f"no {ports} consecutive free ports found")


def _port_free(port: int) -> bool:
    with closing(socket.socket()) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class KafkaCluster:
    """A running three-node cluster: its bootstrap servers and the ``ops/services.sh`` env."""

    bootstrap: str
    env: dict[str, str]

    def ops(self, *args: str) -> str:
        """Runs ``ops/services.sh ARGS``; returns its output, failing the test when it fails."""
        done = subprocess.run(
            [str(ROOT / "ops/services.sh"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=OPS_TIMEOUT_S,
        )
        assert done.returncode == 0, f"services.sh {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def kill(self, node: int) -> None:
        """SIGKILL node ``node`` (no clean shutdown); returns once it is gone."""
        self.ops("kill-broker", str(node))

    def pause(self, node: int) -> None:
        """SIGSTOP node ``node``."""
        self.ops("stop-broker", str(node))

    def resume(self, node: int) -> None:
        """SIGCONT node ``node``."""
        self.ops("cont-broker", str(node))

    def start(self, node: int) -> None:
        """Starts node ``node`` again (a running node is left alone); returns once it serves."""
        self.ops("start-broker", str(node))

    def heal(self) -> None:
        """Every node running: paused ones resumed, stopped ones started (a test's start)."""
        for node in NODES:
            if self._paused(node):
                self.resume(node)
            else:
                self.start(node)

    def _paused(self, node: int) -> bool:
        pid_file = Path(self.env["CHATSCRIBE_STATE_DIR"]) / f"kafka-cluster/node-{node}/kafka.pid"
        try:
            stat = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def busiest_leader(self, topic: str, *, other_than: Sequence[int] = ()) -> int:
        """Returns: the node leading the most records of ``topic`` (end offsets summed).

        Nodes in ``other_than`` are not chosen; a node leading nothing counts 0.
        """
        partitions, ends = _run(_leaders_and_ends(self.bootstrap, topic))
        load: Counter[int] = Counter({node: 0 for node in NODES if node not in other_than})
        for partition in partitions:
            if partition["leader"] in load:
                load[partition["leader"]] += ends[partition["partition"]]
        return load.most_common(1)[0][0]

    def coordinator(self, group: str) -> int:
        """Returns: the node that coordinates the consumer group ``group``."""
        node: int = _run(_find_coordinator(self.bootstrap, group))
        return node

    def leaders(self, topics: Sequence[str]) -> set[int]:
        """Returns: the nodes that lead a partition of ``topics`` now."""
        described = _run(_describe(self.bootstrap, topics))
        return {p["leader"] for t in described for p in t["partitions"]}

    def wait_in_sync(self, topics: Sequence[str], *, timeout_s: float) -> None:
        """Waits until every partition of ``topics`` has all three replicas in sync."""
        deadline = time.monotonic() + timeout_s
        while True:
            described = _run(_describe(self.bootstrap, topics))
            short = [
                f"{t['topic']}/{p['partition']} isr={p['isr']}"
                for t in described
                for p in t["partitions"]
                if len(p["isr"]) < len(NODES)
            ]
            if not short:
                return
            assert time.monotonic() < deadline, f"replicas not in sync: {short}"
            time.sleep(1)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _describe(bootstrap: str, topics: Sequence[str]) -> list[dict[str, Any]]:
    """The topics' metadata, asked again of another node while the one asked is down."""
    for attempt in range(DESCRIBE_ATTEMPTS):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        try:
            await admin.start()
            described: list[dict[str, Any]] = await admin.describe_topics(list(topics))
            return described
        except KafkaError:
            if attempt == DESCRIBE_ATTEMPTS - 1:
                raise
        finally:
            await admin.close()
        await asyncio.sleep(1)
    raise AssertionError("unreachable")


async def _find_coordinator(bootstrap: str, group: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        await admin.start()
        node: int = await admin.find_coordinator(group)
        return node
    finally:
        await admin.close()


async def _leaders_and_ends(
    bootstrap: str, topic: str
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    (described,) = await _describe(bootstrap, [topic])
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        await consumer.start()
        wanted = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
        ends = await consumer.end_offsets(wanted)
        return described["partitions"], {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


@contextmanager
def kafka_cluster_started(state: Path) -> Iterator[KafkaCluster]:
    """``ops/services.sh up --brokers 3`` in ``state`` on free ports; ``down --brokers 3`` after.

    Raises:
        AssertionError: The shared Kafka jars are missing (run ``make services-up``), or a
            ``services.sh`` command failed (with its output).
    """
    shared = SHARED_STATE / "kafka"
    assert (shared / "libs.pom.sha256").is_file(), "no Kafka jars: run `make services-up` first"
    (state / "kafka").mkdir(parents=True)
    (state / "kafka/libs").symlink_to(shared / "libs")
    (state / "kafka/libs.pom.sha256").write_bytes((shared / "libs.pom.sha256").read_bytes())
    base = _free_block(2 * len(NODES))
    env = {
        **os.environ,
        "CHATSCRIBE_STATE_DIR": str(state),
        "CHATSCRIBE_KAFKA_CLUSTER_PORT": str(base),
        "CHATSCRIBE_KAFKA_BROKERS": "3",
    }
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * (node - 1)}" for node in NODES)
    cluster = KafkaCluster(bootstrap, env)
    try:
        cluster.ops("up", "--brokers", "3")
        yield cluster
    finally:
        cluster.ops("down", "--brokers", "3")
