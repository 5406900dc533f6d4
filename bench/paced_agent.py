"""An LLM-paced synthetic Chat API: paced turns (:mod:`bench.paced_turns`) on a cheap server.

Same paths and ``Api-Key`` authentication as the Chat API (``models.wire.CHAT_PATH_TEMPLATE``,
``chat-api-interface.md``, "Endpoints", "Authentication"). A chat request gets the paced turn of
its question (else one picked by the question's hash), each line its own HTTP/1.1 chunk, sent at
its scheduled time and stamped with that time (:func:`bench.transcripts.stamp_line`). Abort
answers 204.

The pacer must cost little CPU next to what it measures (1,000 streams at 15 lines/s): a plain
``asyncio.Protocol`` speaking just enough HTTP/1.1 (``Content-Length`` bodies, keep-alive,
chunked answers), and one timer task for all streams that wakes every :data:`TICK_S`, takes the
due streams off a heap and writes their due lines; no task or timer per line or per stream.

Run as ``python -m bench.paced_agent --port N [--turn-s S] [--lines-per-s R]`` (uvloop).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import hmac
import itertools
import json
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, cast

import uvloop

from bench.paced_turns import Pacing, schedule, turns
from bench.transcripts import load_transcripts, stamp_line
from models import wire

TICK_S: Final = 0.01
WARM_UP_QUESTION: Final = "bench warm-up"
"""A request asking this gets the first turn with every line due at once (warm-ups)."""
AGENT_PATH: Final = wire.CHAT_PATH_TEMPLATE.format(
    cloud_region="local", account_name="demo", agent_id="1"
)
_HEAD_END: Final = b"\r\n\r\n"
_STREAM_HEAD: Final = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
)


@dataclass(order=True)
class _Stream:
    due: float
    seq: int
    lines: Sequence[bytes] = field(compare=False)
    offsets: Sequence[float] = field(compare=False)
    started: float = field(compare=False)
    protocol: _Http = field(compare=False)
    index: int = field(default=0, compare=False)


class Pacer:
    """The one timer of all streams: a heap of streams by the send time of their next line."""

    def __init__(self) -> None:
        self._heap: list[_Stream] = []
        self._seq = itertools.count()
        self.lines_sent = 0

    def add(self, protocol: _Http, lines: Sequence[bytes], offsets: Sequence[float]) -> None:
        """Schedules ``lines`` at ``offsets`` seconds from now on ``protocol``'s connection."""
        now = time.monotonic()
        heapq.heappush(self._heap, _Stream(now, next(self._seq), lines, offsets, now, protocol))

    async def run(self) -> None:
        """Writes every due line, then sleeps one tick; forever."""
        while True:
            now = time.monotonic()
            wall = time.time()
            heap = self._heap
            while heap and heap[0].due <= now:
                stream = heapq.heappop(heap)
                if self._send_due(stream, now, wall):
                    heapq.heappush(heap, stream)
            await asyncio.sleep(TICK_S)

    def _send_due(self, stream: _Stream, now: float, wall: float) -> bool:
        """Writes ``stream``'s due lines; returns whether it has more to send."""
        transport = stream.protocol.transport
        if transport is None or transport.is_closing():
            return False
        while stream.index < len(stream.lines):
            due = stream.started + stream.offsets[stream.index]
            if due > now:
                stream.due = due
                return True
            line = stamp_line(stream.lines[stream.index], wall) + b"\n"
            transport.write(b"%x\r\n%s\r\n" % (len(line), line))
            stream.index += 1
            self.lines_sent += 1
        transport.write(b"0\r\n\r\n")
        stream.protocol.stream_done()
        return False


class _Http(asyncio.Protocol):
    """One connection: requests one at a time (keep-alive), answers as the module says."""

    def __init__(self, agent: PacedAgent) -> None:
        self.agent = agent
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._serve()

    def stream_done(self) -> None:
        self._streaming = False
        self._serve()

    def _serve(self) -> None:
        while not self._streaming and self.transport is not None:
            end = self._buffer.find(_HEAD_END)
            if end < 0:
                return
            head = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
            headers = dict(_header(line) for line in head[1:])
            length = int(headers.get("content-length", "0"))
            if len(self._buffer) < end + 4 + length:
                return
            body = bytes(self._buffer[end + 4 : end + 4 + length])
            del self._buffer[: end + 4 + length]
            method, path, _ = head[0].split(" ", 2)
            self._answer(method, path, headers, body)

    def _answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        assert self.transport is not None
        if path == "/healthz":
            return self._json(200, {"status": "ok"})
        if not self.agent.authorised(headers.get("authorization", "")):
            return self._json(401, {"error": "invalid API key", "status": 401})
        if method == "POST" and path == AGENT_PATH + wire.ABORT_SUFFIX:
            return self.transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        if method != "POST" or path != AGENT_PATH:
            return self._json(404, {"error": "not found", "status": 404})
        question = str(json.loads(body).get("input") or "")
        lines, offsets = self.agent.turn_for(question)
        self._streaming = True
        self.transport.write(_STREAM_HEAD)
        self.agent.pacer.add(self, lines, offsets)

    def _json(self, status: int, value: object) -> None:
        assert self.transport is not None
        body = json.dumps(value).encode()
        head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: "
        self.transport.write(head.encode() + b"%d\r\n\r\n%s" % (len(body), body))


def _header(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


class PacedAgent:
    """The paced turns, the API key and the pacer of one server."""

    def __init__(self, pacing: Pacing, *, api_key: str) -> None:
        found = turns(load_transcripts(), pacing)
        self._turns = [(lines, schedule(len(lines), pacing)) for lines in found]
        self._by_question = {
            _question(lines): turn for lines, turn in zip(found, self._turns, strict=True)
        }
        self._warm_up = (found[0], [0.0] * len(found[0]))
        self._expected = f"api-key {api_key}".encode()
        self.pacer = Pacer()

    def authorised(self, header: str) -> bool:
        """Returns: whether ``header`` is ``Api-Key <the key>`` (scheme case-insensitive)."""
        scheme, _, key = header.partition(" ")
        return hmac.compare_digest(f"{scheme.lower()} {key.strip()}".encode(), self._expected)

    def turn_for(self, question: str) -> tuple[Sequence[bytes], Sequence[float]]:
        """Returns: the turn of ``question`` (or one by its hash) and its send offsets."""
        if question == WARM_UP_QUESTION:
            return self._warm_up
        found = self._by_question.get(question)
        if found is None:
            found = self._turns[zlib.crc32(question.encode()) % len(self._turns)]
        return found


def _question(lines: Sequence[bytes]) -> str:
    for line in lines:
        message = json.loads(line)
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


async def serve(pacing: Pacing, *, host: str, port: int, api_key: str) -> None:
    """Serves the paced agent on ``host:port`` until cancelled."""
    agent = PacedAgent(pacing, api_key=api_key)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Http(agent), host, port, backlog=4096)
    async with server:
        await agent.pacer.run()


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (``--help``): serves until killed."""
    parser = argparse.ArgumentParser(description="Serve LLM-paced synthetic chat turns.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default="bench-key")
    parser.add_argument("--turn-s", type=float, default=Pacing.turn_s)
    parser.add_argument("--lines-per-s", type=float, default=Pacing.lines_per_s)
    args = parser.parse_args(argv)
    pacing = Pacing(turn_s=args.turn_s, lines_per_s=args.lines_per_s)
    uvloop.run(serve(pacing, host=args.host, port=args.port, api_key=args.api_key))


if __name__ == "__main__":
    main()
