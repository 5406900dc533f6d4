"""The sink: a batched Kafka consumer that writes lines and events into the archive.

Commits offsets after the database commit, and publishes compact answer records.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.sink.loop import Sink, run_sink

__all__ = ["Sink", "run_sink"]

_EXPORTS: dict[str, str] = {
    "Sink": "pipeline.sink.loop",
    "run_sink": "pipeline.sink.loop",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
