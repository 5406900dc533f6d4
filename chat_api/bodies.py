"""Reading a JSON request body into a pydantic model, with errors that name the field at fault.

Every refusal names each field as a dotted wire path (``sessionSettings.externalId: ...``),
so a client can fix its request (interface, "Errors": 400 for an invalid body).
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from chat_api.errors import BodyTooLargeError, InvalidRequestError

MAX_BODY_BYTES = 1024 * 1024
_M = TypeVar("_M", bound=BaseModel)


async def read_body(request: Request, model: type[_M]) -> _M:
    """Parses the JSON body into ``model``.

    Returns:
        The validated body.

    Raises:
        BodyTooLargeError: The body is over ``MAX_BODY_BYTES`` (413).
        InvalidRequestError: Not JSON, or invalid; the message names each field at fault.
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
