from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing

import httpx
import pytest

from models.chat import AbortRequest, ChatRequest, GenerateSessionRequest
from pipeline.chat.client import STREAMS_PER_POOL, ChatClient, StreamLine, error_message
from pipeline.errors import (
    ChatAuthError,
    ChatClientError,
    ChatConnectError,
    ChatForbiddenError,
    ChatHttpError,
    ChatLineTooLongError,
    ChatNotFoundError,
    ChatServerError,
    PermanentError,
    StreamBrokenError,
    TransientError,
)

URL = "http://chat.test/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
REQUEST = ChatRequest.model_validate(
    {"input": "How many flights?", "sessionSettings": {"externalId": "analyst-1"}}
)
SESSION_REQUEST = GenerateSessionRequest(external_id="u1")
Handler = Callable[[httpx.Request], httpx.Response]
GZIP = {"Content-Encoding": "gzip"}


def _client(handler: Handler) -> ChatClient:
    return ChatClient(api_key="k-123", transport=httpx.MockTransport(handler))


async def _chunks(parts: Iterable[bytes], error: Exception | None = None) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
    if error is not None:
        raise error


async def _collect(client: ChatClient) -> list[StreamLine]:
    async with client, aclosing(client.stream_chat(URL, REQUEST)) as lines:
        return [line async for line in lines]


async def _collect_into(client: ChatClient, got: list[StreamLine]) -> None:
    async with client, aclosing(client.stream_chat(URL, REQUEST)) as lines:
        async for line in lines:
            got.append(line)


async def test_stream_chat_sends_api_key_json_content_type_and_wire_body() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b'{"id":"__cutoff__"}\n')

    await _collect(_client(handler))
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == URL
    assert request.headers["authorization"] == "Api-Key k-123"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "input": "How many flights?",
        "sessionSettings": {"externalId": "analyst-1"},
    }


async def test_stream_chat_numbers_lines_from_one_across_chunks_and_parses_them() -> None:
    parts = [b'{"id":"__cut', b'off__","state":{"chatId":"c1"}}\n\xff\n', b'{"content":"a"}']

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_chunks(parts))

    lines = await _collect(_client(handler))
    assert [(x.line_no, x.raw, x.terminated) for x in lines] == [
        (1, b'{"id":"__cutoff__","state":{"chatId":"c1"}}', True),
        (2, b"\xff", True),
        (3, b'{"content":"a"}', False),
    ]
    assert lines[0].message is not None
    assert lines[0].message.chat_id == "c1"
    assert lines[1].message is None
    assert lines[1].parse_error is not None
    assert lines[1].parse_error.startswith("invalid UTF-8")
    assert all(x.received_at.tzinfo is not None for x in lines)


async def test_a_compressed_stream_is_decoded_and_a_plain_one_read_as_sent() -> None:
    """Bodies without ``Content-Encoding`` are read raw (no decoder layer); others decoded."""
    body = b'{"id":"__cutoff__"}\n{"content":"a"}\n'
    packer = zlib.compressobj(wbits=31)  # gzip
    packed = packer.compress(body) + packer.flush()
    responses = [
        httpx.Response(200, content=_chunks([packed[:9], packed[9:]]), headers=GZIP),
        httpx.Response(200, content=_chunks([body[:7], body[7:]])),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        return responses.pop(0)

    for _ in range(2):
        lines = await _collect(_client(handler))
        assert [x.raw for x in lines] == [b'{"id":"__cutoff__"}', b'{"content":"a"}']


@pytest.mark.parametrize(
    ("status", "error_type", "transient"),
    [
        (400, ChatClientError, False),
        (401, ChatAuthError, False),
        (403, ChatForbiddenError, False),
        (404, ChatNotFoundError, False),
        (422, ChatClientError, False),
        (500, ChatServerError, True),
        (503, ChatServerError, True),
    ],
)
async def test_stream_chat_maps_error_status_before_the_first_line(
    status: int, error_type: type[ChatHttpError], transient: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": f"boom {status}"})

    with pytest.raises(error_type) as caught:
        await _collect(_client(handler))
    assert type(caught.value) is error_type
    assert caught.value.status_code == status
    assert caught.value.message == f"boom {status}"
    assert isinstance(caught.value, TransientError if transient else PermanentError)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"message":"bad key"}', "bad key"),
        (b'{"detail":{"field":"input"}}', '{"field": "input"}'),
        (b'{"other":1}', '{"other":1}'),
        (b"Internal Server Error", "Internal Server Error"),
        (b"x" * 2000, "x" * 500),
        (b"", "(empty body)"),
    ],
)
def test_error_message_prefers_json_error_fields_then_body_start(body: bytes, message: str) -> None:
    assert error_message(body) == message


async def test_stream_chat_connect_error_becomes_chat_connect_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ChatConnectError, match="connection refused"):
        await _collect(_client(handler))


async def test_stream_chat_connect_timeout_becomes_chat_connect_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    with pytest.raises(ChatConnectError, match="no response in time"):
        await _collect(_client(handler))


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadError("reset by peer"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed connection without sending complete body"),
    ],
)
async def test_stream_chat_break_after_start_yields_tail_then_stream_broken(
    error: Exception,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_chunks([b'{"a":1}\n{"b":2}\n{"c"'], error))

    got: list[StreamLine] = []
    with pytest.raises(StreamBrokenError) as caught:
        await _collect_into(_client(handler), got)
    assert [(x.raw, x.terminated) for x in got] == [
        (b'{"a":1}', True),
        (b'{"b":2}', True),
        (b'{"c"', False),
    ]
    assert caught.value.lines_read == 3
    assert isinstance(caught.value.__cause__, httpx.HTTPError)


async def test_abort_posts_to_abort_path_and_accepts_204() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    async with _client(handler) as client:
        await client.abort(URL, AbortRequest(chat_id="c1"))
    assert str(seen[0].url) == URL + "/abort"
    assert json.loads(seen[0].content) == {"chatId": "c1"}


async def test_abort_of_someone_elses_thread_is_forbidden() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"error": "not your thread"})

    async with _client(handler) as client:
        with pytest.raises(ChatForbiddenError, match="not your thread"):
            await client.abort(URL, AbortRequest(chat_id="c1"))


async def test_generate_session_returns_session_id() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"sessionId": "s-1"})

    async with _client(handler) as client:
        response = await client.generate_session("http://chat.test/", SESSION_REQUEST)
    assert response.session_id == "s-1"
    assert str(seen[0].url) == "http://chat.test/api/v1/embed/generate-session"
    assert json.loads(seen[0].content) == {"externalId": "u1"}


async def test_generate_session_malformed_body_is_a_server_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"id": "s-1"})

    async with _client(handler) as client:
        with pytest.raises(ChatServerError, match="not a session"):
            await client.generate_session("http://chat.test", SESSION_REQUEST)


def test_client_needs_an_api_key() -> None:
    with pytest.raises(ValueError, match="api_key"):
        ChatClient()


async def test_stream_chat_per_call_api_key_overrides_the_clients() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, content=b"")

    client = _client(handler)
    async with client, aclosing(client.stream_chat(URL, REQUEST, api_key="own")) as lines:
        assert [line async for line in lines] == []
    assert seen == ["Api-Key own"]


async def test_streams_spread_over_pools_and_every_call_gives_its_place_back() -> None:
    """Concurrency 12 makes ceil(12 / STREAMS_PER_POOL) = 3 pools; 25 calls fill them evenly."""
    release = asyncio.Event()

    async def held() -> AsyncIterator[bytes]:
        yield b'{"content":"a"}\n'
        await release.wait()
        yield b'{"content":"b"}\n'

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/abort"):
            return httpx.Response(404, json={"error": "unknown chat"})
        return httpx.Response(200, content=held())

    assert STREAMS_PER_POOL == 5
    client = ChatClient(api_key="k", concurrency=12, transport=httpx.MockTransport(handler))
    assert client.pool_loads == (0, 0, 0)
    streams = [client.stream_chat(URL, REQUEST) for _ in range(25)]
    firsts = [await anext(stream) for stream in streams]
    assert [line.line_no for line in firsts] == [1] * 25
    assert client.pool_loads == (9, 8, 8)
    release.set()
    seconds = [[line.raw async for line in stream] for stream in streams[:5]]
    assert seconds == [[b'{"content":"b"}']] * 5
    assert sum(client.pool_loads) == 20
    for stream in streams[5:]:
        await stream.aclose()
    assert client.pool_loads == (0, 0, 0)
    with pytest.raises(ChatNotFoundError):
        await client.abort(URL, AbortRequest(chat_id="c1"))
    assert client.pool_loads == (0, 0, 0)
    await client.aclose()


async def test_a_connect_error_gives_its_pool_place_back() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with ChatClient(api_key="k", transport=httpx.MockTransport(handler)) as client:
        for _ in range(3):
            with pytest.raises(ChatConnectError):
                await _first(client)
        assert set(client.pool_loads) == {0}


async def _first(client: ChatClient) -> StreamLine:
    async with aclosing(client.stream_chat(URL, REQUEST)) as lines:
        return await anext(lines)


async def test_a_line_growing_past_the_record_limit_without_a_newline_ends_the_stream() -> None:
    """A stream that never sends a newline cannot take the worker's memory."""
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        yield b'{"id":"m1","content":"ok"}\n'
        while True:
            sent.append(1)
            yield b"x" * 1000

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    client = ChatClient(api_key="k", transport=httpx.MockTransport(handler), max_line_bytes=10_000)
    got: list[StreamLine] = []
    with pytest.raises(ChatLineTooLongError, match="past 10000 bytes") as raised:
        await _collect_into(client, got)
    assert [x.raw for x in got] == [b'{"id":"m1","content":"ok"}']
    assert raised.value.lines_read == 1 and isinstance(raised.value, PermanentError)
    assert len(sent) <= 11
