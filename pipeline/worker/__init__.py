"""The worker: a faust app that takes chat jobs from ``chat.requests`` and drives their streams.

Group membership, ordered acks, cancellations, attempt history and the job runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.worker.app import run_worker
    from pipeline.worker.job_runner import JobRunner, chat_request

__all__ = ["JobRunner", "chat_request", "run_worker"]

_EXPORTS: dict[str, str] = {
    "JobRunner": "pipeline.worker.job_runner",
    "chat_request": "pipeline.worker.job_runner",
    "run_worker": "pipeline.worker.app",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
