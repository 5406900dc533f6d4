"""Topics the pipeline creates are replicated for the cluster it finds (the real one-node Kafka)."""

from __future__ import annotations

import logging

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from models import wire
from pipeline.errors import RecordDeliveryError
from pipeline.kafka.clients import cluster_replication, ensure_topics
from pipeline.settings import Settings
from tests.stack_support import unique_settings

pytestmark = pytest.mark.integration


async def _described(settings: Settings, topic: str) -> tuple[int, str]:
    """Returns: (replicas of partition 0, ``min.insync.replicas``) of ``topic``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        [description] = await admin.describe_topics([topic])
        [config] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, None)]
        )
    finally:
        await admin.close()
    replicas = len(description["partitions"][0]["replicas"])
    entries = {entry[0]: entry[1] for entry in config.resources[0][4]}
    return replicas, entries["min.insync.replicas"]


async def test_topics_on_one_broker_get_one_replica_and_one_in_sync(
    kafka_bootstrap: str, database_url: str
) -> None:
    settings = unique_settings(kafka_bootstrap, database_url, tag="rep")
    replication = await cluster_replication(settings)
    assert (replication.factor, replication.min_insync) == (1, 1)
    created = await ensure_topics(settings, (wire.TOPIC_LINES,))
    assert created == [settings.topic(wire.TOPIC_LINES)]
    assert await _described(settings, created[0]) == (1, "1")


async def test_a_replication_factor_the_cluster_cannot_hold_is_a_clear_error(
    kafka_bootstrap: str, database_url: str
) -> None:
    settings = unique_settings(kafka_bootstrap, database_url, tag="rep", kafka_replication_factor=3)
    with pytest.raises(RecordDeliveryError, match="create failed") as caught:
        await ensure_topics(settings, (wire.TOPIC_LINES,))
    assert settings.topic(wire.TOPIC_LINES) in str(caught.value)


async def test_a_topic_with_fewer_replicas_than_wanted_is_warned_about_at_start(
    kafka_bootstrap: str, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = unique_settings(kafka_bootstrap, database_url, tag="rep")
    await ensure_topics(settings, (wire.TOPIC_LINES,))
    wanting_two = settings.model_copy(update={"kafka_replication_factor": 2})
    with caplog.at_level(logging.WARNING, logger="pipeline.kafka.clients"):
        assert await ensure_topics(wanting_two, (wire.TOPIC_LINES,)) == []
    [warning] = [r.getMessage() for r in caplog.records if "under-replicated" in r.getMessage()]
    assert f"{settings.topic(wire.TOPIC_LINES)}:0" in warning
