"""``CHATSCRIBE_LINES_RETENTION_MS`` becomes ``chat.lines``' ``retention.ms`` (real Kafka)."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from models import wire
from pipeline.kafka.clients import ensure_topics
from pipeline.settings import Settings
from tests.conftest import NameFactory

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

THREE_DAYS_MS = 3 * 24 * 3600 * 1000  # the broker default is 7 days


async def _retention_ms(bootstrap: str, topic: str) -> str | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        responses: list[Any] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": None})]
        )
    finally:
        await admin.close()
    for resource in responses[0].resources:
        for name, value, *_ in resource[4]:
            if name == "retention.ms":
                return str(value)
    return None


async def test_lines_topic_is_created_with_the_archive_s_retention(
    kafka_bootstrap: str, unique_name: NameFactory
) -> None:
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=unique_name("retention-"),
        lines_retention_ms=THREE_DAYS_MS,
    )
    await ensure_topics(settings, [wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS])
    lines = await _retention_ms(kafka_bootstrap, settings.topic(wire.TOPIC_LINES))
    events = await _retention_ms(kafka_bootstrap, settings.topic(wire.TOPIC_JOB_EVENTS))
    assert lines == str(THREE_DAYS_MS)
    assert events != str(
        THREE_DAYS_MS
    )  # only chat.lines is set; the rest keeps the broker's default
