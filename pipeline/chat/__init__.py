"""The Chat API client: one httpx stream per job, split into NDJSON lines (spec "Chat endpoint").

The only package that imports httpx; its errors are translated into :mod:`pipeline.errors` here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.chat.client import ChatClient, StreamLine

__all__ = ["ChatClient", "StreamLine"]

_EXPORTS: dict[str, str] = {
    "ChatClient": "pipeline.chat.client",
    "StreamLine": "pipeline.chat.client",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
