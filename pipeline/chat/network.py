"""httpcore's network layer on plain asyncio streams: the chat client's lean read path.

httpx sends every request through httpcore, and httpcore reads the socket through a *network
backend* (``httpcore.AsyncNetworkBackend``, its documented extension point: "Network
backends", https://www.encode.io/httpcore/network-backends/). The default backend goes through
anyio, which per ``read`` opens a cancel scope for the read timeout (``anyio.fail_after``, even
when the timeout is None), enters a resource guard, yields to the event loop once
(``checkpoint``) and maps exceptions through a generator context manager. An LLM-paced stream
arrives as one small chunk per line, so that is paid per line: a plain httpx reader of paced
streams spent ~80 µs of CPU per line, of which this backend saves ~20 µs (issue 13; the
measurement is in ``bench/history.md``, "second round").

:class:`AsyncioBackend` keeps everything above the socket as it was: httpx builds the request,
httpcore pools the connections and parses HTTP/1.1 (h11), the ``ssl`` module does TLS. It only
replaces the stream:

* ``read`` is ``StreamReader.read``: buffered bytes come back without an event-loop round trip;
* the read timeout is a deadline, not a timer per read: each read notes when it started, and one
  timer per connection checks the deadline only when it comes due and then re-arms itself for
  the read in progress (``call_at``), so a stream pays a timer per ``read_timeout_s`` instead of
  one per chunk. A read waiting longer than its timeout fails with ``httpcore.ReadTimeout``, as
  with the anyio backend;
* errors map to httpcore's own (``ConnectError``/``ConnectTimeout``, ``ReadError``/
  ``ReadTimeout``, ``WriteError``/``WriteTimeout``), which httpx maps to its own as always.

:func:`lean_transport` builds the httpx transport for it. It is used when no proxy is configured
in the environment (a proxy needs httpx's own proxy transports).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.request
from collections.abc import Coroutine, Iterable
from typing import Any, Final

import httpcore
import httpx

READ_BUFFER_BYTES: Final = 256 * 1024
"""``StreamReader`` limit: the transport pauses reading beyond twice this (one large tool result
of a few hundred KiB fits without a pause)."""
_EXTRA_INFO: Final = {
    "ssl_object": "ssl_object",
    "client_addr": "sockname",
    "server_addr": "peername",
    "socket": "socket",
}
"""httpcore's ``get_extra_info`` names → asyncio transport ``get_extra_info`` names."""

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _ReadDeadlineError(Exception):
    """A read waited longer than its timeout (set on the reader by the deadline check)."""


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS) connection as an asyncio ``StreamReader``/``StreamWriter`` pair.

    Args:
        reader, writer: From ``asyncio.open_connection``.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._read_since = 0.0
        self._read_timeout_s = 0.0
        self._reading = False
        self._timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        peer = self._writer.get_extra_info("peername")
        return f"<AsyncioStream peer={peer} reading={self._reading}>"

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        """Returns: up to ``max_bytes`` bytes; ``b""`` at the end of the stream.

        Raises:
            httpcore.ReadTimeout: Nothing arrived for ``timeout`` seconds.
            httpcore.ReadError: The connection failed.
        """
        if timeout is not None:
            self._read_since = self._loop.time()
            self._read_timeout_s = timeout
            if self._timer is None:
                self._timer = self._loop.call_at(self._read_since + timeout, self._check_deadline)
        self._reading = True
        try:
            return await self._reader.read(max_bytes)
        except _ReadDeadlineError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except OSError as exc:  # ssl.SSLError and ConnectionError included
            raise httpcore.ReadError(_describe(exc)) from exc
        finally:
            self._reading = False

    def _check_deadline(self) -> None:
        """The deadline timer: fails the read in progress if it is overdue, or re-arms."""
        self._timer = None
        if not self._reading:
            return  # the next read arms a new timer
        due = self._read_since + self._read_timeout_s
        if self._loop.time() >= due:
            self._reader.set_exception(
                _ReadDeadlineError(f"no data for {self._read_timeout_s:g} s")
            )
        else:
            self._timer = self._loop.call_at(due, self._check_deadline)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Sends ``buffer`` and waits until the transport took it.

        Raises:
            httpcore.WriteTimeout: The peer did not take it within ``timeout`` seconds.
            httpcore.WriteError: The connection failed.
        """
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"write took over {timeout:g} s") from exc
        except OSError as exc:
            raise httpcore.WriteError(_describe(exc)) from exc

    async def aclose(self) -> None:
        """Closes the connection (no wait for the peer)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
    ) -> httpcore.AsyncNetworkStream:
        """Upgrades the connection to TLS in place (``StreamWriter.start_tls``).

        Raises:
            httpcore.ConnectTimeout: The handshake took over ``timeout`` seconds.
            httpcore.ConnectError: The handshake failed (certificate, protocol, connection).
        """
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout:g} s") from exc
        except OSError as exc:
            await self.aclose()
            raise httpcore.ConnectError(_describe(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        """Answers httpcore's questions about the connection.

        ``is_readable`` (asked of an idle pooled connection before reuse) is True when the
        peer closed it or it failed: such a connection is not reused.
        """
        if info == "is_readable":
            reader = self._reader
            return reader.at_eof() or reader.exception() is not None or self._writer.is_closing()
        name = _EXTRA_INFO.get(info)
        return self._writer.get_extra_info(name) if name is not None else None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`AsyncioStream` connections for httpcore (module docstring).

    Attributes:
        connections: Connections opened so far.
    """

    def __init__(self) -> None:
        self.connections = 0

    def __repr__(self) -> str:
        return f"<AsyncioBackend connections={self.connections}>"

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connects to ``host:port`` (TCP_NODELAY, as asyncio sets it).

        Raises:
            httpcore.ConnectTimeout: No connection within ``timeout`` seconds.
            httpcore.ConnectError: The connection was refused or the name did not resolve.
        """
        local = (local_address, 0) if local_address else None
        opening = asyncio.open_connection(host, port, local_addr=local, limit=READ_BUFFER_BYTES)
        return await self._connected(opening, timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connects to a Unix socket. Raises as :meth:`connect_tcp`."""
        opening = asyncio.open_unix_connection(path, limit=READ_BUFFER_BYTES)
        return await self._connected(opening, timeout, socket_options)

    async def _connected(
        self,
        opening: Coroutine[Any, Any, tuple[asyncio.StreamReader, asyncio.StreamWriter]],
        timeout_s: float | None,
        socket_options: Iterable[SocketOption] | None,
    ) -> AsyncioStream:
        """Awaits ``opening`` within ``timeout_s``, mapping its errors to httpcore's."""
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await opening
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection within {timeout_s:g} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(_describe(exc)) from exc
        _set_options(writer, socket_options)
        self.connections += 1
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)


class LeanTransport(httpx.AsyncHTTPTransport):
    """httpx's HTTP transport with httpcore's pool on :class:`AsyncioBackend`.

    httpx (0.28) takes no network backend, so the pool its constructor built is replaced by an
    equal one (same TLS context and limits) that has the backend; requests, responses and
    error mapping stay httpx's own (``AsyncHTTPTransport.handle_async_request``).

    Args:
        limits: Connection limits of the pool.
        verify: The TLS context (``httpx.create_ssl_context()``), shared by the pools.
    """

    def __init__(self, *, limits: httpx.Limits, verify: ssl.SSLContext) -> None:
        super().__init__(limits=limits, verify=verify)
        self.backend = AsyncioBackend()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=verify,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=self.backend,
        )


def lean_transport(*, limits: httpx.Limits, verify: ssl.SSLContext) -> LeanTransport | None:
    """Returns: a :class:`LeanTransport`, or None when the environment names a proxy.

    With ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` set, httpx's default transport (which
    honours them) is the one to use.
    """
    if any(scheme != "no" for scheme in urllib.request.getproxies_environment()):
        return None
    return LeanTransport(limits=limits, verify=verify)


def _set_options(writer: asyncio.StreamWriter, options: Iterable[SocketOption] | None) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is None:
        return
    for option in options or ():
        sock.setsockopt(*option)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
