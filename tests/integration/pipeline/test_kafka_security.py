"""Every Kafka client of the pipeline over TLS and SASL (a broker with a SASL_SSL listener).

The test starts its own single KRaft node from the jars ``ops/services.sh`` resolved, on free
ports, with a certificate for ``127.0.0.1`` from a test CA (trustme) and SASL/PLAIN users in
the listener's JAAS configuration: what managed Kafka services require of clients.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from pydantic import SecretStr, ValidationError

from models import wire
from pipeline.errors import RecordDeliveryError
from pipeline.kafka.clients import create_consumer, create_producer, ensure_topics
from pipeline.settings import Settings
from tests.stack_support import free_port, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

STATE_DIR = Path(os.environ.get("CHATSCRIBE_STATE_DIR", Path.home() / ".local/state/chatscribe"))
KAFKA_LIBS = STATE_DIR / "kafka" / "libs"
LOG4J = Path(__file__).resolve().parents[3] / "ops" / "kafka" / "log4j.properties"
READY_TIMEOUT_S = 90.0
USER, PASSWORD = "pipeline", "pipeline-secret"


@dataclass(frozen=True)
class SecuredKafka:
    bootstrap: str
    cafile: Path


def _properties(folder: Path, ports: dict[str, int], keystore: Path) -> str:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";'
    )
    listeners = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@{listeners['CONTROLLER']}",
            "controller.listener.names=CONTROLLER",
            "listeners=" + ",".join(f"{n}://{a}" for n, a in listeners.items()),
            f"advertised.listeners=BROKER://{listeners['BROKER']},SECURED://{listeners['SECURED']}",
            "inter.broker.listener.name=BROKER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,BROKER:PLAINTEXT,SECURED:SASL_SSL",
            "listener.name.secured.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.secured.plain.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={keystore}",
            f"log.dirs={folder / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def _java(*args: str, log: Path) -> subprocess.Popen[bytes]:
    command = [
        "java",
        "-Xmx384m",
        "-XX:+UseSerialGC",
        f"-Dlog4j.configuration=file:{LOG4J}",
        "-Dchatscribe.root.logger=stderr",
        "-Dchatscribe.log.threshold=WARN",
        "-cp",
        f"{KAFKA_LIBS}/*",
        *args,
    ]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _cluster_id() -> str:
    """A Kafka Uuid as ``kafka-storage random-uuid`` prints it: never starting with '-'.

    (A leading '-' makes ``kafka-storage format -t ID`` read the id as an option.)
    """
    while (text := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode())[0] == "-":
        pass
    return text


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A KRaft node whose client listener is SASL_SSL (PLAIN), stopped after the module."""
    assert KAFKA_LIBS.is_dir(), f"no Kafka jars in {KAFKA_LIBS}: run ops/services.sh up first"
    folder = tmp_path_factory.mktemp("secured-kafka")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    keystore = folder / "server.pem"
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(  # Kafka's PEM key store reads PKCS#8 keys only
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keystore.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in server.cert_chain_pems))
    cafile = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    ports = {"BROKER": free_port(), "SECURED": free_port(), "CONTROLLER": free_port()}
    props = folder / "server.properties"
    props.write_text(_properties(folder, ports, keystore), encoding="utf-8")
    log = folder / "kafka.log"
    cluster_id = _cluster_id()
    storage = "kafka.tools.StorageTool"
    _java(storage, "format", "-t", cluster_id, "-c", str(props), log=log).wait(timeout=120)
    broker = _java("kafka.Kafka", str(props), log=log)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _accepts(ports["SECURED"]):
            assert broker.poll() is None, log.read_text(encoding="utf-8")[-3000:]
            assert time.monotonic() < deadline, log.read_text(encoding="utf-8")[-3000:]
            time.sleep(0.5)
        yield SecuredKafka(bootstrap=f"127.0.0.1:{ports['SECURED']}", cafile=cafile)
    finally:
        broker.terminate()
        try:
            broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()


def _settings(kafka: SecuredKafka, database_url: str, **overrides: Any) -> Settings:
    secured = {
        "kafka_security_protocol": "SASL_SSL",
        "kafka_sasl_mechanism": "PLAIN",
        "kafka_sasl_username": USER,
        "kafka_sasl_password": SecretStr(PASSWORD),
        "kafka_ssl_cafile": kafka.cafile,
        **overrides,
    }
    return unique_settings(kafka.bootstrap, database_url, tag="tls", **secured)


async def test_topics_records_and_groups_work_over_sasl_ssl(
    secured_kafka: SecuredKafka, database_url: str
) -> None:
    settings = _settings(secured_kafka, database_url)
    created = await _ready(ensure_topics(settings, (wire.TOPIC_LINES,)))
    assert created == [settings.topic(wire.TOPIC_LINES)]
    producer = create_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(created[0], b"over TLS", key=b"job")
    finally:
        await producer.stop()
    consumer = create_consumer(settings, created[0], group_id=settings.sink_group)
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), timeout=60)
    finally:
        await consumer.stop()
    assert (record.key, record.value) == (b"job", b"over TLS")


async def test_a_wrong_password_is_a_clear_error_at_start(
    secured_kafka: SecuredKafka, database_url: str
) -> None:
    settings = _settings(secured_kafka, database_url, kafka_sasl_password=SecretStr("wrong"))
    with pytest.raises(RecordDeliveryError, match="Invalid username or password"):
        await asyncio.wait_for(ensure_topics(settings, (wire.TOPIC_LINES,)), timeout=60)


async def test_a_broker_certificate_from_an_untrusted_ca_is_refused(
    secured_kafka: SecuredKafka, database_url: str, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    settings = _settings(secured_kafka, database_url, kafka_ssl_cafile=other)
    with pytest.raises(RecordDeliveryError, match=r"(?i)certificate verify failed"):
        await asyncio.wait_for(ensure_topics(settings, (wire.TOPIC_LINES,)), timeout=60)


def test_a_sasl_protocol_without_credentials_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="CHATSCRIBE_KAFKA_SASL_USERNAME"):
        Settings(kafka_security_protocol="SASL_SSL")


async def _ready(created: object) -> list[str]:
    """Awaits ``created`` (a first call right after start may meet a broker still starting)."""
    assert asyncio.iscoroutine(created)
    return await asyncio.wait_for(created, timeout=90)
