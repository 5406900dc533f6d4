"""The read-only web console over the archive (``chatscribe console``).

Starlette with server-rendered jinja2 templates; it reads the archive only through
:mod:`pipeline.archive` (read-only transactions) and renders answers with
:mod:`models.rendering`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.console.app import create_app, serve

__all__ = ["create_app", "serve"]

_EXPORTS: dict[str, str] = {
    "create_app": "pipeline.console.app",
    "serve": "pipeline.console.app",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
