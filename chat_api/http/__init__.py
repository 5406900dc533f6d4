"""The Chat API over HTTP (starlette).

Routes, request bodies, streaming, the embed page, OpenAPI.
"""

from __future__ import annotations

from chat_api.http.app import error_response, read_body
from chat_api.http.server import serve
from chat_api.http.streaming import aborted_within

__all__ = ["aborted_within", "error_response", "read_body", "serve"]
