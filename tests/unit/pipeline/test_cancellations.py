"""Cancellations a worker received (pipeline.worker.cancellations)."""

from __future__ import annotations

import pytest

from pipeline.worker.cancellations import Cancellations, cancel_reason
from pipeline.worker.job_runner import JobControl


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "cancelled"),
        (b"", "cancelled"),
        (b'{"reason": "operator stop"}', "cancelled: operator stop"),
        (b'{"other": 1}', "cancelled"),
        (b"plain text", "cancelled: plain text"),
        (b"\xff\xfe", "cancelled: \ufffd\ufffd"),
    ],
)
def test_cancel_reason_reads_json_or_text(value: bytes | None, reason: str) -> None:
    assert cancel_reason(value) == reason


def test_a_running_job_is_aborted_and_a_later_one_is_remembered() -> None:
    cancellations = Cancellations(kept=2)
    control = JobControl()
    cancellations.running["j1"] = control
    cancellations.receive(b"j1", b'{"reason": "stop"}')
    assert control.reason == "cancelled: stop"
    for job_id in (b"j2", b"j3", b"j4"):
        cancellations.receive(job_id, None)
    cancellations.receive(None, b"no key")
    assert cancellations.take_early("j2") is None  # the oldest beyond `kept` is forgotten
    assert cancellations.take_early("j4") == "cancelled"
    assert cancellations.take_early("j4") is None
    assert repr(cancellations) == "<Cancellations running=1 early=1>"


def test_a_cancel_value_nested_past_the_recursion_limit_is_read_as_text() -> None:
    """Anyone who can write the topic can send anything; the worker's consumer must not fail."""
    deep = b"[" * 100_000 + b"]" * 100_000
    assert cancel_reason(deep).startswith("cancelled: [[[")
