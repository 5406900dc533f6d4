"""Our own Chat API: a deterministic analytics agent over a Cube-format semantic model.

What the pipeline may use (``pipeline.cli`` and ``pipeline.replay`` only) is exported here and
in the subpackages' ``__all__``; ``tests/unit/test_layout.py`` checks that nothing else is.
"""

from __future__ import annotations

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
