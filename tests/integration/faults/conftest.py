"""Fixtures of the fault tests (helpers in ``fault_support`` and ``sink_fault_stack``)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.integration.faults.fault_support import StackFactory, running_stack


@pytest.fixture
def fault_stack(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> StackFactory:
    """``fault_stack(workers=N, line_delay_ms=MS, concurrency=C, **settings)``.

    The context manager :func:`fault_support.running_stack` on the shared Kafka and PostgreSQL,
    with the processes' logs and the Chat API's sent log in ``tmp_path``.
    """
    return functools.partial(running_stack, kafka_bootstrap, database_url, tmp_path)
