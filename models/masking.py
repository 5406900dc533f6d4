r"""Secrets masked wherever text meant for people or logs may carry one (pure).

Used where a record, a header or a request line is shown or logged as it is: ``chatscribe dlq
show``/``list`` (a dead-lettered job carries its ``api_key``) and the Chat API's access log
(an embed link carries its ``?session=`` id). Each secret's value becomes :data:`MASK`; names
and everything else stay, so the text still says what it was.

* :func:`mask_bytes` / :func:`mask_text`: in JSON-like text (valid or not, UTF-8 or not), the
  string value of every member whose name is a secret's (:data:`SECRET_NAME`: ``api_key``,
  ``apiKey``, ``authorization``, ``token``, ``password``, ``secret``, ``sessionId``,
  ``session``, ``cookie``, any case, ``-`` or ``_`` between the words), and the credentials after
  ``Api-Key``, ``Bearer`` or ``Basic`` (RFC 9110, section 11.6.2, ``Authorization``).
* :func:`mask_query`: every parameter value of a URL's query string (names kept): a query may
  hold a session id or a token, and which ones do is not known where the line is logged.
* :func:`is_secret_name`: whether a header or field name holds a secret (its value is masked
  whole).
* :class:`AccessLogMask`: a :class:`logging.Filter` for uvicorn's access logger
  (:data:`ACCESS_LOGGER`) that passes each request line's target through :func:`mask_query`;
  :func:`mask_access_log` installs it (the Chat API and the console do at start-up).

OWASP, "Logging Cheat Sheet": session identifiers, access tokens and passwords are never
recorded in logs.
"""

from __future__ import annotations

import logging
import re
from typing import Final

MASK: Final = "***"
ACCESS_LOGGER: Final = "uvicorn.access"
"""The logger of uvicorn's access lines: ``client - "METHOD target HTTP/v" status``."""
SECRET_NAME: Final = (
    r"(?:x[-_]?)?(?:api[-_]?key|authorization|(?:access[-_]?|refresh[-_]?)?token|password|"
    r"secret|session(?:[-_]?id)?|cookie|set[-_]?cookie)"
)
_NAME: Final = re.compile(rf"{SECRET_NAME}", re.IGNORECASE)
_MEMBER_TEXT: Final = re.compile(
    rf'("{SECRET_NAME}"\s*:\s*")((?:[^"\\]|\\.)*)(")', re.IGNORECASE | re.DOTALL
)
_MEMBER_BYTES: Final = re.compile(_MEMBER_TEXT.pattern.encode(), re.IGNORECASE | re.DOTALL)
_SCHEME_TEXT: Final = re.compile(r"\b((?:Api-Key|Bearer|Basic)\s+)([^\s\"'\\,;]+)", re.IGNORECASE)
_SCHEME_BYTES: Final = re.compile(_SCHEME_TEXT.pattern.encode(), re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Returns: True when ``name`` (a header or field name, any case) names a secret."""
    return _NAME.fullmatch(name.strip()) is not None


def mask_bytes(data: bytes) -> bytes:
    """Returns: ``data`` with every secret's value replaced by :data:`MASK` (module docstring)."""
    masked = _MEMBER_BYTES.sub(lambda m: m[1] + MASK.encode() + m[3], data)
    return _SCHEME_BYTES.sub(lambda m: m[1] + MASK.encode(), masked)


def mask_text(text: str) -> str:
    """Returns: ``text`` with every secret's value replaced by :data:`MASK` (module docstring)."""
    masked = _MEMBER_TEXT.sub(lambda m: m[1] + MASK + m[3], text)
    return _SCHEME_TEXT.sub(lambda m: m[1] + MASK, masked)


def mask_query(target: str) -> str:
    """Masks the query of a request target.

    Args:
        target: A path with an optional query, ``"/embed/chat/c1/?session=abc&x=1"``.

    Returns:
        The path unchanged and each query value as :data:`MASK`:
        ``"/embed/chat/c1/?session=***&x=***"`` (a parameter without ``=`` is masked whole).
    """
    path, mark, query = target.partition("?")
    if not mark:
        return target
    parts = [name + "=" + MASK if eq else MASK for name, eq, _ in _pairs(query)]
    return f"{path}?{'&'.join(parts)}"


def _pairs(query: str) -> list[tuple[str, str, str]]:
    return [part.partition("=") for part in query.split("&")]


class AccessLogMask(logging.Filter):
    """Masks the query of the request target in uvicorn's access log records.

    uvicorn logs ``(client_addr, method, full_path, http_version, status_code)`` as the
    record's ``args``; ``full_path`` goes through :func:`mask_query`. Other records pass as
    they are.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrites the record's target in place; never drops the record."""
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (*args[:2], mask_query(args[2]), *args[3:])
        return True


def mask_access_log(logger_name: str = ACCESS_LOGGER) -> None:
    """Installs :class:`AccessLogMask` on ``logger_name`` once (after uvicorn set its logging)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, AccessLogMask) for f in logger.filters):
        logger.addFilter(AccessLogMask())
