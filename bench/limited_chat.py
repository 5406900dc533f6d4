"""A rate-limited, paced synthetic Chat API: a hosted agent that answers 429 above its limit.

Like :mod:`bench.synthetic_chat` (same paths and authentication, recorded transcripts), but:

* at most ``max_streams`` chat streams at once; a chat request above that is answered
  ``429 Too Many Requests`` with ``Retry-After`` (seconds, or an HTTP date with
  ``--retry-after-date``) and a JSON error body, as hosted LLM APIs do;
* each turn is paced over ``turn_s`` seconds (its lines spread evenly), so streams stay open and
  the limit matters;
* ``GET /stats`` gives what it saw: streams served, 429s sent, the peak of concurrent streams,
  the busy window and the mean number of streams over it (``mean_streams``), and over the
  run's middle, from the first time the limit was reached to the last stream opened
  (``steady_mean_streams``), so a test or a benchmark compares the throughput it got with the
  limit (``mean_streams / max_streams``).

Run as ``python -m bench.limited_chat --port N [--max-streams 50] [--turn-s 2]
[--retry-after-s 1] [--api-key KEY]`` (uvicorn, one process).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.synthetic_chat import AGENT, TranscriptIndex, serve
from bench.transcripts import FIXTURE, Transcript, load_transcripts
from models import wire


@dataclass
class LimitStats:
    """What the agent saw (``GET /stats``)."""

    max_streams: int
    active: int = 0
    peak: int = 0
    served: int = 0
    throttled: int = 0
    first_start: float | None = None
    last_end: float | None = None
    busy_stream_s: float = 0.0
    steady_from: tuple[float, float] | None = None
    steady_to: tuple[float, float] | None = None
    _changed_at: float = 0.0

    def _account(self, now: float) -> None:
        self.busy_stream_s += self.active * (now - self._changed_at)
        self._changed_at = now

    def opened(self) -> bool:
        """Returns: True (and counts the stream) when below the limit, else counts a 429."""
        now = time.monotonic()
        if self.active >= self.max_streams:
            self.throttled += 1
            return False
        self._account(now)
        self.first_start = self.first_start if self.first_start is not None else now
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.steady_from is None and self.active >= self.max_streams:
            self.steady_from = (now, self.busy_stream_s)
        if self.steady_from is not None:
            self.steady_to = (now, self.busy_stream_s)
        return True

    def closed(self) -> None:
        """A stream ended (finished or disconnected)."""
        now = time.monotonic()
        self._account(now)
        self.active -= 1
        self.served += 1
        self.last_end = now

    def to_json(self) -> dict[str, Any]:
        """Summarises the agent's load over the run.

        Returns:
            The counters, the busy window (first stream start to last stream end) in seconds,
            the mean number of concurrent streams over it, and its ramp (first stream to the
            limit first reached) and drain (last stream opened to last stream ended), seconds.
        """
        window_s = (
            (self.last_end - self.first_start)
            if self.first_start is not None and self.last_end is not None
            else 0.0
        )
        return {
            "max_streams": self.max_streams,
            "active": self.active,
            "peak": self.peak,
            "served": self.served,
            "throttled": self.throttled,
            "window_s": window_s,
            "mean_streams": self.busy_stream_s / window_s if window_s > 0 else 0.0,
            "steady_mean_streams": self._steady_mean(),
            "ramp_s": self.steady_from[0] - self.first_start
            if self.steady_from is not None and self.first_start is not None
            else None,
            "drain_s": self.last_end - self.steady_to[0]
            if self.steady_to is not None and self.last_end is not None
            else None,
        }

    def _steady_mean(self) -> float:
        """Returns the mean number of concurrent streams while at the limit.

        Mean streams from the first time the limit was reached to the last stream opened (the run's
        middle: without the ramp-up and the final drain); 0 when never reached.
        """
        if self.steady_from is None or self.steady_to is None:
            return 0.0
        (start, busy_start), (end, busy_end) = self.steady_from, self.steady_to
        return (busy_end - busy_start) / (end - start) if end > start else 0.0


def create_app(
    transcripts: Sequence[Transcript],
    *,
    api_key: str,
    max_streams: int,
    turn_s: float,
    retry_after_s: int,
    retry_after_date: bool = False,
) -> Starlette:
    """Builds the limited agent (module docstring)."""
    index = TranscriptIndex(transcripts)
    expected = api_key.encode()
    stats = LimitStats(max_streams=max_streams)

    def refused(request: Request) -> Response | None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "api-key" or not hmac.compare_digest(key.strip().encode(), expected):
            return JSONResponse({"error": "invalid API key", "status": 401}, status_code=401)
        params = request.path_params
        if (params["cloud_region"], params["account_name"], params["agent_id"]) != AGENT:
            return JSONResponse({"error": "agent not found", "status": 404}, status_code=404)
        return None

    def too_many() -> Response:
        when = formatdate(time.time() + retry_after_s, usegmt=True)
        header = when if retry_after_date else str(retry_after_s)
        body = {"error": f"rate limit: {max_streams} concurrent streams", "status": 429}
        return JSONResponse(body, status_code=429, headers={"Retry-After": header})

    async def chat(request: Request) -> Response:
        refusal = refused(request)
        if refusal is not None:
            return refusal
        body = json.loads(await request.body())
        if not stats.opened():
            return too_many()
        transcript = index.find(str(body.get("input") or ""), body.get("sessionSettings") or {})
        pause_s = turn_s / max(len(transcript.lines), 1)
        return StreamingResponse(
            _paced(transcript.lines, pause_s, stats), media_type="application/json"
        )

    async def abort(request: Request) -> Response:
        return refused(request) or Response(status_code=204)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def read_stats(request: Request) -> Response:
        return JSONResponse(stats.to_json())

    return Starlette(
        routes=[
            Route("/healthz", health, methods=["GET"]),
            Route("/stats", read_stats, methods=["GET"]),
            Route(wire.CHAT_PATH_TEMPLATE, chat, methods=["POST"]),
            Route(wire.CHAT_PATH_TEMPLATE + wire.ABORT_SUFFIX, abort, methods=["POST"]),
        ]
    )


async def _paced(lines: Sequence[bytes], pause_s: float, stats: LimitStats) -> AsyncIterator[bytes]:
    try:
        for line in lines:
            await asyncio.sleep(pause_s)
            yield line + b"\n"
    finally:
        stats.closed()


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (module docstring); serves until killed."""
    parser = argparse.ArgumentParser(description="A paced agent that answers 429 above a limit.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default="bench-key")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--max-streams", type=int, default=50)
    parser.add_argument("--turn-s", type=float, default=2.0)
    parser.add_argument("--retry-after-s", type=int, default=1)
    parser.add_argument("--retry-after-date", action="store_true")
    args = parser.parse_args(argv)
    app = create_app(
        load_transcripts(args.fixture),
        api_key=args.api_key,
        max_streams=args.max_streams,
        turn_s=args.turn_s,
        retry_after_s=args.retry_after_s,
        retry_after_date=args.retry_after_date,
    )
    serve(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
