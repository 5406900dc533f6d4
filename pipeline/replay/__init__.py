"""The replay server: archived conversations served back through the Chat API protocol."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.replay.server import create_app, serve

__all__ = ["create_app", "serve"]

_EXPORTS: dict[str, str] = {
    "create_app": "pipeline.replay.server",
    "serve": "pipeline.replay.server",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
