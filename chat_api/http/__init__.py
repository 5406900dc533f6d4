"""The Chat API over HTTP (starlette).

Routes, request bodies, streaming, the embed page, OpenAPI.
"""

from __future__ import annotations

from chat_api.http.app import error_response, read_body
from chat_api.http.server import serve

__all__ = ["error_response", "read_body", "serve"]
