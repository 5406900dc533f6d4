r"""The console's guards: loopback by default, a token beyond it, a strict content policy.

* :func:`check_bind`: binding anything but a loopback address needs ``CHATSCRIBE_CONSOLE_TOKEN``
  (:class:`~pipeline.errors.ConsoleBindError` otherwise).
* :class:`TokenGuard`: when a token is set, every request must carry it: header
  ``Authorization: Bearer <token>`` (RFC 6750, section 2.1; a bare token or another scheme is
  refused), or the ``chatscribe_console`` cookie. A link with ``?token=<token>`` sets the cookie
  (``HttpOnly``, ``SameSite=Strict``) and redirects to the same page without the token in its
  address; the redirect's target is always a path of this console (:func:`local_location`: no
  ``//host``, ``/\host`` or scheme, OWASP "Unvalidated Redirects and Forwards Cheat Sheet").
  Anything else is a 401 page. Compared in constant time (:func:`secrets.compare_digest`).
* :data:`SECURITY_HEADERS`: the content-security policy of the Chat API's embed page
  (:mod:`chat_api.http.embed`) without its nonce: scripts only from the console itself
  (``'unsafe-eval'`` because vega compiles its expressions with ``Function()``), no connection
  anywhere (``default-src 'none'``: a chart spec cannot fetch data), images only as ``data:``.
"""

from __future__ import annotations

import ipaddress
import secrets
from typing import Final
from urllib.parse import quote, unquote, urlencode

from pydantic import SecretStr
from starlette.datastructures import URL, QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.errors import ConsoleBindError

COOKIE: Final = "chatscribe_console"
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_LOOPBACK_NAMES: Final = frozenset({"localhost", "ip6-localhost"})
_BEARER: Final = "bearer"
_PATH_SAFE: Final = "/-._~!$&'()*+,;=:@"
"""Characters left as they are in a redirect's path (RFC 3986 ``pchar`` and ``/``)."""


def is_loopback(host: str) -> bool:
    """Returns: True for ``127.0.0.0/8``, ``::1`` and ``localhost``."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: SecretStr | None) -> None:
    """Refuses to bind beyond loopback without a token.

    Raises:
        ConsoleBindError: ``host`` is not a loopback address and ``token`` is unset or empty.
    """
    if not is_loopback(host) and (token is None or not token.get_secret_value()):
        raise ConsoleBindError(host)


class TokenGuard:
    """ASGI middleware: every HTTP request carries the console token (module docstring)."""

    def __init__(self, app: ASGIApp, *, token: SecretStr) -> None:
        self._app = app
        self._token = token.get_secret_value().encode()

    def _matches(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serves an HTTP request only with the token; other scopes pass through.

        A ``?token=`` query redirects (303) to the same URL without it, setting the cookie; a
        ``Bearer`` header or the cookie lets the request through; anything else is a 401 page.
        """
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        url = URL(scope=scope)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self._matches(QueryParams(url.query).get("token")):
            await _redirect_setting_cookie(url, self._token.decode(), send)
            return
        bearer = _bearer(headers.get("authorization", ""))
        if self._matches(bearer) or self._matches(_cookie(headers.get("cookie", ""))):
            await self._app(scope, receive, send)
            return
        await _refuse(send)


def _bearer(header: str) -> str | None:
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != _BEARER:
        return None
    return credentials.strip() or None


def local_location(path: str, query: str = "") -> str:
    r"""Returns a redirect target that stays on this site, whatever ``path`` holds.

    Args:
        path: The request's decoded path (``scope["path"]``), e.g. ``"/audit"`` or a hostile
            ``"//evil.example/x"``, ``"/\evil.example"``, ``"/\t/evil.example"``.
        query: An already encoded query string, without ``?`` (empty: none).

    Returns:
        ``"/" + path`` (percent-decoded once more) with every leading slash, backslash, space
        or control character removed and the rest percent-encoded (RFC 3986 ``pchar``), so a
        browser reads it as a path of this origin, never as ``//host`` or ``scheme:`` (OWASP,
        "Unvalidated Redirects and Forwards Cheat Sheet").
    """
    rest = unquote(path).lstrip("/\\ \t\r\n\x00\x0b\x0c")
    location = "/" + quote(rest, safe=_PATH_SAFE)
    return location + (f"?{query}" if query else "")


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


async def _redirect_setting_cookie(url: URL, token: str, send: Send) -> None:
    kept = [(k, v) for k, v in QueryParams(url.query).multi_items() if k != "token"]
    location = local_location(url.path, urlencode(kept))
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [(b"location", location.encode()), (b"set-cookie", cookie.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send) -> None:
    body = (
        b"<!doctype html><title>Token required</title><h1>401</h1>"
        b"<p>This console asks for its token: open the link with ?token=... once.</p>"
    )
    headers = [(b"content-type", b"text/html; charset=utf-8")]
    headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response that lacks them."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Adds the missing security headers to the response start; other scopes pass through."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in SECURITY_HEADERS.items()
                    if k.lower().encode() not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self._app(scope, receive, send_with_headers)
