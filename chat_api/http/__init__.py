"""The Chat API over HTTP (starlette).

Routes, request bodies, streaming, the embed page, OpenAPI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.http.app import error_response, load_toolbox, read_body
    from chat_api.http.server import serve

__all__ = ["error_response", "load_toolbox", "read_body", "serve"]

_EXPORTS: dict[str, str] = {
    "error_response": "chat_api.http.app",
    "load_toolbox": "chat_api.http.app",
    "read_body": "chat_api.http.app",
    "serve": "chat_api.http.server",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
