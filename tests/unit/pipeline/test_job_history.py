"""Waiting for a topic's partitions at start-up (pipeline.worker.history.topic_partitions)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from aiokafka.errors import KafkaConnectionError

from pipeline.errors import RecordDeliveryError
from pipeline.worker.history import topic_partitions


class _Metadata:
    """Answers as aiokafka's ``partitions_for`` does, one scripted answer per call."""

    def __init__(self, *answers: Iterable[int] | Exception | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self) -> Iterable[int] | None:
        self.calls += 1
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_topic_partitions_waits_while_the_new_topic_lists_none() -> None:
    metadata = _Metadata(set(), None, KafkaConnectionError(), {2, 0, 1})
    assert await topic_partitions(metadata, topic="t", timeout_s=30) == [0, 1, 2]
    assert metadata.calls == 4


async def test_topic_partitions_gives_up_after_the_timeout_with_a_clear_error() -> None:
    metadata = _Metadata(set())
    with pytest.raises(RecordDeliveryError, match=r"topic has no partitions after 0.5 s") as err:
        await topic_partitions(metadata, topic="x.chat.job-events", timeout_s=0.5)
    assert err.value.topic == "x.chat.job-events"
    assert metadata.calls >= 2


async def test_topic_partitions_reports_the_last_kafka_error() -> None:
    metadata = _Metadata(KafkaConnectionError("refused"))
    with pytest.raises(RecordDeliveryError, match="KafkaConnectionError"):
        await topic_partitions(metadata, topic="t", timeout_s=0.3)
