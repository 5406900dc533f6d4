"""The Kafka pipeline: Chat API client, worker, sink, archive, batch runs, reports, replay, CLI.

One package per subsystem; the import rules between them are in ``docs/layout.md`` and are
checked by ``tests/unit/test_layout.py``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.errors import ChildError
    from pipeline.settings import Settings

__all__ = ["ChildError", "Settings"]

_EXPORTS: dict[str, str] = {
    "ChildError": "pipeline.errors",
    "Settings": "pipeline.settings",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
