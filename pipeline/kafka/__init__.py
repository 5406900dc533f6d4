"""Kafka adapters: producers, consumers, topics, job output, dead letters and consumer lag.

With :mod:`pipeline.worker` the only packages that import aiokafka; errors are translated here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.kafka import consumer
    from pipeline.kafka.clients import (
        DEFAULT_PARTITIONS,
        JobOutput,
        Pending,
        create_consumer,
        create_producer,
        delivered,
        ensure_topics,
        send,
    )
    from pipeline.kafka.dead_letters import (
        DLQ_TOPICS,
        DeadLetterRef,
        Record,
        StoredDeadLetter,
        read_dead_letter,
        read_dead_letters,
        replay,
        send_dead_letters,
    )
    from pipeline.kafka.lag import LagReporter, assigned_lag

__all__ = [
    "DEFAULT_PARTITIONS",
    "DLQ_TOPICS",
    "DeadLetterRef",
    "JobOutput",
    "LagReporter",
    "Pending",
    "Record",
    "StoredDeadLetter",
    "assigned_lag",
    "consumer",
    "create_consumer",
    "create_producer",
    "delivered",
    "ensure_topics",
    "read_dead_letter",
    "read_dead_letters",
    "replay",
    "send",
    "send_dead_letters",
]

_EXPORTS: dict[str, str] = {
    "DEFAULT_PARTITIONS": "pipeline.kafka.clients",
    "DLQ_TOPICS": "pipeline.kafka.dead_letters",
    "DeadLetterRef": "pipeline.kafka.dead_letters",
    "JobOutput": "pipeline.kafka.clients",
    "LagReporter": "pipeline.kafka.lag",
    "Pending": "pipeline.kafka.clients",
    "Record": "pipeline.kafka.dead_letters",
    "StoredDeadLetter": "pipeline.kafka.dead_letters",
    "assigned_lag": "pipeline.kafka.lag",
    "consumer": "pipeline.kafka.consumer",
    "create_consumer": "pipeline.kafka.clients",
    "create_producer": "pipeline.kafka.clients",
    "delivered": "pipeline.kafka.clients",
    "ensure_topics": "pipeline.kafka.clients",
    "read_dead_letter": "pipeline.kafka.dead_letters",
    "read_dead_letters": "pipeline.kafka.dead_letters",
    "replay": "pipeline.kafka.dead_letters",
    "send": "pipeline.kafka.clients",
    "send_dead_letters": "pipeline.kafka.dead_letters",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
