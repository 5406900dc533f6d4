"""The baseline reader: plain asyncio + httpx, reading chat streams and discarding them.

Issue 6's baseline for stream driving and for the end-to-end run: the same requests at the same
concurrency, each stream read with ``aiter_lines`` and dropped, with no Kafka and no archive.
It keeps only what the figures need: per stream the time to the first line and the line count,
per line the delay from the server's send stamp to its arrival here
(:func:`bench.transcripts.sent_at_of`). The recorder and the Chat API benchmark use it too,
with ``keep_lines`` on.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.transcripts import sent_at_of


@dataclass
class StreamStats:
    r"""What reading one stream gave.

    Attributes:
        lines: Lines read.
        first_line_s: Seconds from sending the request to the first line.
        elapsed_s: Seconds from sending the request to the end of the stream.
        kept: The lines themselves (without ``\n``), when asked for.
    """

    lines: int = 0
    first_line_s: float | None = None
    elapsed_s: float = 0.0
    kept: list[bytes] = field(default_factory=list)


@dataclass
class ReadRun:
    """A set of streams read at some concurrency.

    Attributes:
        streams: One entry per request, in request order.
        latencies_s: Per line: arrival time minus the server's send stamp, seconds.
        elapsed_s: Wall time from the first request to the end of the last stream.
    """

    streams: list[StreamStats]
    latencies_s: list[float]
    elapsed_s: float
    failed: int = 0

    @property
    def lines(self) -> int:
        """Lines read over all streams."""
        return sum(s.lines for s in self.streams)


def client(
    api_key: str, *, concurrency: int, verify: ssl.SSLContext | None = None
) -> httpx.AsyncClient:
    """Returns: an ``httpx.AsyncClient`` sending ``Api-Key`` auth, pooled for ``concurrency``.

    Args:
        api_key: Sent as ``Authorization: Api-Key <key>``.
        concurrency: Connections the pool keeps (and allows).
        verify: The SSL context to use; by default the client builds its own, ~17 ms of CPU
            here (httpx's "SSL" documentation: create one context and share it).
    """
    return httpx.AsyncClient(
        headers={"Authorization": f"Api-Key {api_key}"},
        timeout=httpx.Timeout(120.0, connect=10.0, pool=120.0),
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        verify=verify if verify is not None else True,
    )


async def read_stream(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    latencies_s: list[float],
    keep_lines: bool = False,
) -> StreamStats:
    """POSTs ``body`` and reads the NDJSON answer to its end.

    Raises:
        httpx.HTTPStatusError: The answer is not a 2xx.
        httpx.HTTPError: The connection failed.
    """
    stats = StreamStats()
    started = time.perf_counter()
    async with http.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for text in response.aiter_lines():
            raw = text.encode()
            now = time.time()
            if stats.first_line_s is None:
                stats.first_line_s = time.perf_counter() - started
            stats.lines += 1
            sent_at = sent_at_of(raw)
            if sent_at is not None:
                latencies_s.append(now - sent_at)
            if keep_lines:
                stats.kept.append(raw)
    stats.elapsed_s = time.perf_counter() - started
    return stats


async def read_all(
    url: str,
    bodies: Sequence[dict[str, Any]],
    *,
    api_key: str,
    concurrency: int,
    streams_per_client: int = 0,
    keep_lines: bool = False,
) -> ReadRun:
    """Reads every request's stream with at most ``concurrency`` at once.

    Args:
        url: The chat URL.
        bodies: One chat request body per stream.
        api_key: The ``Api-Key`` header.
        concurrency: Streams read at once.
        keep_lines: Keep the lines themselves in the figures.
        streams_per_client: Readers sharing one ``httpx.AsyncClient``; 0: one client for all.
            httpcore's pool scans every connection on each request, so one client for hundreds
            of streams spends most of its time there (``bench/README.md``).

    Returns:
        The streams' figures (request order) and the per-line latencies.

    A stream that fails (connection reset under load) is counted in ``failed`` and left out.
    """
    latencies: list[float] = []
    results: list[StreamStats | None] = [None] * len(bodies)
    pending = list(range(len(bodies) - 1, -1, -1))
    readers = min(concurrency, len(bodies))
    per_client = streams_per_client or max(readers, 1)
    verify = httpx.create_ssl_context()  # one for all clients, as the worker's ChatClient does
    clients = [
        client(api_key, concurrency=per_client, verify=verify)
        for _ in range(0, readers, per_client)
    ]

    failed: list[BaseException] = []

    async def reader(http: httpx.AsyncClient) -> None:
        while pending:
            index = pending.pop()
            try:
                results[index] = await read_stream(
                    http, url, bodies[index], latencies_s=latencies, keep_lines=keep_lines
                )
            except httpx.HTTPError as exc:  # counted, like a worker's failed job
                failed.append(exc)

    try:
        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for number in range(readers):
                group.create_task(reader(clients[number // per_client]))
        elapsed = time.perf_counter() - started
    finally:
        for http in clients:
            await http.aclose()
    return ReadRun([r for r in results if r is not None], latencies, elapsed, len(failed))
