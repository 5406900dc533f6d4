"""Reading a JSON request body into a pydantic model, with errors that name the field at fault.

Every refusal names each field as a dotted wire path (``sessionSettings.externalId: ...``),
so a client can fix its request (interface, "Errors": 400 for an invalid body).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from chat_api.errors import BodyTooLargeError, InvalidRequestError

MAX_BODY_BYTES = 1024 * 1024
_M = TypeVar("_M", bound=BaseModel)
_SURROGATE = re.compile("[\ud800-\udfff]")


async def read_body(request: Request, model: type[_M]) -> _M:
    """Parses the JSON body into ``model``.

    Returns:
        The validated body.

    Raises:
        BodyTooLargeError: The body is over ``MAX_BODY_BYTES`` (413).
        InvalidRequestError: Not JSON, a string holding NUL or a lone surrogate (which no
            database stores as text), or invalid; the message names each field at fault.
    """
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BodyTooLargeError(MAX_BODY_BYTES)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"body is not valid JSON: {exc}") from exc
    check_text(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_error(exc)) from exc


def describe_validation_error(exc: ValidationError) -> str:
    """Returns: ``"<dotted.path>: <message>"`` per error, joined by ``"; "``."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "body"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def check_text(value: Any, path: str = "body") -> None:
    r"""Refuses strings that cannot be stored as text.

    NUL characters and lone UTF-16 surrogates (``"\ud800"`` in JSON), anywhere in ``value``
    (keys included).

    Raises:
        InvalidRequestError: Naming the dotted path of the first such string.
    """
    if isinstance(value, str):
        if "\x00" in value or _SURROGATE.search(value):
            raise InvalidRequestError(f"{path}: NUL characters and lone surrogates are not allowed")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, path)
            check_text(item, f"{path}.{key}" if path != "body" else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_text(item, f"{path}.{index}")
