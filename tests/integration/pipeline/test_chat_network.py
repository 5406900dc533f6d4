"""The chat client's network layer (pipeline.chat.network) over real sockets on localhost.

A scripted HTTP/1.1 server (asyncio, chunked NDJSON) plays the agent: it can pause between
chunks, stall, close an idle connection, or speak TLS with a certificate of a local CA
(trustme). Every test goes through :class:`ChatClient` or an ``httpx.AsyncClient`` on
:class:`LeanTransport`, as the worker does.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest
import trustme
import uvloop

from models.chat import ChatRequest
from pipeline.chat.client import ChatClient
from pipeline.chat.network import AsyncioBackend, LeanTransport, lean_transport
from pipeline.errors import ChatConnectError, StreamBrokenError

REQUEST = ChatRequest.model_validate({"input": "q", "sessionSettings": {"externalId": "u1"}})
LINES = [b'{"id":"__cutoff__","state":{"chatId":"c1"}}', b'{"id":"m1","content":"a"}']


@dataclass
class Script:
    """What the server sends per request: ``(pause_s, chunk)`` steps, then the end or a stall."""

    steps: Sequence[tuple[float, bytes]]
    stall_s: float = 0.0
    close_after: bool = False
    requests: int = field(default=0, init=False)
    connections: int = field(default=0, init=False)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return True


@asynccontextmanager
async def serve(script: Script, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """Serves ``script`` on a free port; yields the chat URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        script.connections += 1
        try:
            while await _read_request(reader):
                script.requests += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for pause_s, data in script.steps:
                    await asyncio.sleep(pause_s)
                    writer.write(_chunk(data))
                    await writer.drain()
                if script.stall_s:
                    await asyncio.sleep(script.stall_s)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                if script.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    async with server:
        yield f"{scheme}://localhost:{port}/api/v1/public/local/demo/agents/1/chat/stream-chat-state"


def _body(lines: Sequence[bytes]) -> list[tuple[float, bytes]]:
    return [(0.0, line + b"\n") for line in lines]


async def _read_all(client: ChatClient, url: str) -> list[bytes]:
    async with aclosing(client.stream_chat(url, REQUEST)) as lines:
        return [line.raw async for line in lines]


def _backends(client: ChatClient) -> list[AsyncioBackend]:
    return [pool._transport.backend for pool in client._pools]  # type: ignore[attr-defined]


async def test_the_client_reads_ndjson_through_the_asyncio_backend() -> None:
    script = Script(steps=[(0.0, b'{"id":"a"}\n{"id":'), (0.01, b'"b"}\n'), (0.01, b"tail")])
    async with serve(script) as url, ChatClient(api_key="k", concurrency=4) as client:
        got = await _read_all(client, url)
        assert got == [b'{"id":"a"}', b'{"id":"b"}', b"tail"]
        assert sum(b.connections for b in _backends(client)) == 1


async def test_a_stalled_stream_fails_after_the_read_timeout_not_before() -> None:
    script = Script(steps=_body(LINES), stall_s=5.0)
    async with serve(script) as url, ChatClient(api_key="k", read_timeout_s=0.4) as client:
        started = time.monotonic()
        with pytest.raises(StreamBrokenError, match="ReadTimeout") as caught:
            await _read_all(client, url)
        waited = time.monotonic() - started
    assert caught.value.lines_read == len(LINES)
    assert 0.35 <= waited < 2.0


async def test_the_read_timeout_is_per_read_so_a_slow_steady_stream_is_not_cut() -> None:
    # 8 chunks 0.25 s apart: 2 s in all, well over the 0.4 s timeout, never 0.4 s silent.
    script = Script(steps=[(0.25, b'{"n":%d}\n' % n) for n in range(8)])
    async with serve(script) as url, ChatClient(api_key="k", read_timeout_s=0.4) as client:
        got = await _read_all(client, url)
    assert len(got) == 8


async def test_a_refused_connection_is_a_connect_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    url = f"http://127.0.0.1:{port}/chat"
    async with ChatClient(api_key="k", connect_timeout_s=2.0) as client:
        with pytest.raises(ChatConnectError, match="ConnectError"):
            await _read_all(client, url)


async def test_a_pooled_connection_is_reused_and_one_the_server_closed_is_not() -> None:
    keep = Script(steps=_body(LINES))
    async with serve(keep) as url, ChatClient(api_key="k", concurrency=1) as client:
        for _ in range(3):
            assert await _read_all(client, url) == LINES
        assert (keep.connections, keep.requests) == (1, 3)
    closing = Script(steps=_body(LINES), close_after=True)
    async with serve(closing) as url, ChatClient(api_key="k", concurrency=1) as client:
        for _ in range(3):
            assert await _read_all(client, url) == LINES
            await asyncio.sleep(0.05)  # the server's close reaches the idle connection
        assert (closing.connections, closing.requests) == (3, 3)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def test_tls_with_a_trusted_certificate_streams_and_an_untrusted_one_is_refused(
    ca: trustme.CA,
) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_tls)
    trusting = httpx.create_ssl_context()
    ca.configure_trust(trusting)
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
    script = Script(steps=_body(LINES))
    async with serve(script, tls=server_tls) as url:
        transport = LeanTransport(limits=limits, verify=trusting)
        async with (
            httpx.AsyncClient(transport=transport) as http,
            http.stream("POST", url, json={}) as response,
        ):
            body = b"".join([chunk async for chunk in response.aiter_bytes()])
        assert body.splitlines() == LINES
        assert transport.backend.connections == 1
        strict = LeanTransport(limits=limits, verify=httpx.create_ssl_context())
        async with httpx.AsyncClient(transport=strict) as http:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.post(url, json={})


def test_tls_and_connection_reuse_under_uvloop_as_the_worker_runs(ca: trustme.CA) -> None:
    async def reads() -> tuple[list[bytes], int, int]:
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost").configure_cert(server_tls)
        trusting = httpx.create_ssl_context()
        ca.configure_trust(trusting)
        script = Script(steps=_body(LINES))
        async with serve(script, tls=server_tls) as url:
            transport = LeanTransport(limits=httpx.Limits(max_connections=2), verify=trusting)
            async with httpx.AsyncClient(transport=transport) as http:
                bodies = [(await http.post(url, json={})).content for _ in range(3)]
        return (
            [line for body in bodies for line in body.splitlines()],
            script.connections,
            (transport.backend.connections),
        )

    lines, served, opened = uvloop.run(reads())
    assert lines == LINES * 3
    assert (served, opened) == (1, 1)


def test_a_proxy_in_the_environment_keeps_httpx_s_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits = httpx.Limits(max_connections=1)
    context = httpx.create_ssl_context()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert isinstance(lean_transport(limits=limits, verify=context), LeanTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert lean_transport(limits=limits, verify=context) is None
