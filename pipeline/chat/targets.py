"""Where the worker may send chat calls, and where its own API key may go (pure, no I/O).

A chat URL comes from a questions file, the command line or a ``chat.requests`` record, so
anyone who can write one of those could point the worker at any host: another service on the
worker's network (its error bodies would land in the archive), the archive's own PostgreSQL
port, or a host of theirs that receives the worker's API key. OWASP's SSRF prevention advice
("Server-Side Request Forgery Prevention Cheat Sheet", case 1: an allow-list of the
applications the server talks to) is followed here:

* every chat URL must match a prefix of the allow-list (``CHATSCRIBE_CHAT_URL_ALLOW``): same
  scheme, same host, same port (``*``: any port, meant for loopback development), and a path
  that starts with the prefix's path on a segment boundary;
* the worker's own key (``CHATSCRIBE_API_KEY``) is sent only to URLs of
  ``CHATSCRIBE_API_KEY_URLS``; a job aimed anywhere else must carry its own key;
* both lists default to the origin (scheme, host, port) of ``CHATSCRIBE_CHAT_URL``: out of the
  box the worker talks to its configured Chat API and nowhere else;
* URLs with user information (``user@host``), dot segments (``/../``), percent-encoded dots or
  slashes, backslashes, whitespace or control characters are refused whatever the lists say:
  they are where URL parsers disagree (OWASP, same sheet, "URL parsing inconsistencies").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import SplitResult, urlsplit

from pipeline.errors import ChatUrlRefusedError

if TYPE_CHECKING:
    from pipeline.settings import Settings

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
ANY_PORT: Final = "*"
_UNSAFE: Final = re.compile(r"[\s\\\x00-\x1f\x7f]|%2e|%2f|%5c", re.IGNORECASE)
_DOT_SEGMENT: Final = re.compile(r"(^|/)\.{1,2}(/|$)")


@dataclass(frozen=True)
class UrlPrefix:
    """One allow-list entry: ``scheme://host[:port|:*][/path]``.

    Attributes:
        scheme: ``http`` or ``https``.
        host: Lower-case host name or address (IPv6 without brackets).
        port: The port; None for ``*`` (any port).
        path: Path prefix without a trailing slash (``""``: any path).
    """

    scheme: str
    host: str
    port: int | None
    path: str

    @classmethod
    def parse(cls, text: str) -> UrlPrefix:
        """Reads an allow-list entry.

        Raises:
            ValueError: Not an ``http(s)`` URL with a host, or one with a query, a fragment,
                user information or an unsafe character.
        """
        any_port = re.search(r"^[a-z]+://[^/]*:\*(/|$)", text.strip(), re.IGNORECASE)
        parts = _split(text.strip().replace(":*", "", 1) if any_port else text.strip())
        if parts.query or parts.fragment:
            raise ValueError(f"allow-list entry {text!r} has a query or fragment")
        port = None if any_port else _port(parts)
        return cls(parts.scheme, parts.hostname or "", port, parts.path.rstrip("/"))

    @classmethod
    def origin_of(cls, url: str) -> UrlPrefix:
        """Returns: the prefix that allows every path of ``url``'s scheme, host and port.

        Raises:
            ValueError: As :meth:`parse`.
        """
        parts = _split(url)
        return cls(parts.scheme, parts.hostname or "", _port(parts), "")

    def matches(self, parts: SplitResult) -> bool:
        """Returns: whether a split (already checked) URL falls under this prefix."""
        if parts.scheme != self.scheme or (parts.hostname or "") != self.host:
            return False
        if self.port is not None and _port(parts) != self.port:
            return False
        return parts.path == self.path or parts.path.startswith(self.path + "/")

    def __str__(self) -> str:
        port = ANY_PORT if self.port is None else str(self.port)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{port}{self.path or '/'}"


@dataclass(frozen=True)
class OutboundPolicy:
    """The chat URLs a worker may call and the ones its own API key may go to.

    Attributes:
        allowed: Prefixes every chat URL must match.
        own_key: Prefixes of the URLs the worker's own API key is sent to.
    """

    allowed: tuple[UrlPrefix, ...]
    own_key: tuple[UrlPrefix, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> OutboundPolicy:
        """Returns: the policy of ``chat_url_allow`` and ``api_key_urls``.

        Each list, when empty, is the origin of ``chat_url`` (module docstring).

        Raises:
            ValueError: An entry does not parse (the settings already checked them).
        """
        default = (UrlPrefix.origin_of(settings.chat_url),)
        allowed = tuple(UrlPrefix.parse(p) for p in settings.chat_url_allow) or default
        own_key = tuple(UrlPrefix.parse(p) for p in settings.api_key_urls) or default
        return cls(allowed, own_key)

    def check(self, url: str, *, own_key: bool) -> None:
        """Refuses a chat URL the worker may not call (or not with its own key).

        Args:
            url: The chat URL of a job (``.../chat/stream-chat-state``).
            own_key: Whether the call would carry the worker's own API key (the job has none).

        Raises:
            ChatUrlRefusedError: The URL is unsafe, matches no allowed prefix, or ``own_key``
                and it matches no prefix of the key's targets; the reason names the lists.
        """
        try:
            parts = _split(url)
            _port(parts)
        except ValueError as exc:
            raise ChatUrlRefusedError(str(exc), url=url) from exc
        if not _any_match(self.allowed, parts):
            reason = f"not under CHATSCRIBE_CHAT_URL_ALLOW ({_names(self.allowed)})"
            raise ChatUrlRefusedError(reason, url=url)
        if own_key and not _any_match(self.own_key, parts):
            reason = (
                "the job carries no API key of its own and the worker's key is only sent to"
                f" CHATSCRIBE_API_KEY_URLS ({_names(self.own_key)})"
            )
            raise ChatUrlRefusedError(reason, url=url)

    def refusal(self, url: str, *, own_key: bool) -> ChatUrlRefusedError | None:
        """Returns: the error :meth:`check` would raise, or None when the URL is allowed."""
        try:
            self.check(url, own_key=own_key)
        except ChatUrlRefusedError as exc:
            return exc
        return None


def _split(url: str) -> SplitResult:
    """Splits ``url`` after refusing what parsers read differently (module docstring)."""
    if _UNSAFE.search(url):
        raise ValueError("the URL holds whitespace, a control character, a backslash or %2e/%2f")
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    if "@" in parts.netloc:
        raise ValueError("the URL holds user information (user@host)")
    if _DOT_SEGMENT.search(parts.path):
        raise ValueError("the URL's path holds a dot segment (. or ..)")
    return parts


def _port(parts: SplitResult) -> int:
    """Returns: the URL's port, or its scheme's default. Raises ValueError for a bad port."""
    port = parts.port  # raises ValueError out of range or not a number
    return port if port is not None else DEFAULT_PORTS[parts.scheme]


def _any_match(prefixes: Iterable[UrlPrefix], parts: SplitResult) -> bool:
    return any(prefix.matches(parts) for prefix in prefixes)


def _names(prefixes: Iterable[UrlPrefix]) -> str:
    return ", ".join(str(p) for p in prefixes)
