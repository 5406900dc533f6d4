"""Our own Chat API: a deterministic analytics agent over a Cube-format semantic model.

What the pipeline may use (``pipeline.cli`` and ``pipeline.replay`` only) is exported here and
in the subpackages' ``__all__``; ``tests/unit/test_layout.py`` checks that nothing else is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.errors import (
        ChatApiError,
        NotFoundError,
        RequestError,
        ThreadOwnerError,
        UnauthorizedError,
    )
    from chat_api.settings import ChatApiSettings

__all__ = [
    "ChatApiError",
    "ChatApiSettings",
    "NotFoundError",
    "RequestError",
    "ThreadOwnerError",
    "UnauthorizedError",
]

_EXPORTS: dict[str, str] = {
    "ChatApiError": "chat_api.errors",
    "ChatApiSettings": "chat_api.settings",
    "NotFoundError": "chat_api.errors",
    "RequestError": "chat_api.errors",
    "ThreadOwnerError": "chat_api.errors",
    "UnauthorizedError": "chat_api.errors",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
