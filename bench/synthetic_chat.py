"""A fast synthetic Chat API: recorded transcripts streamed back with no planning delay.

Same paths and authentication as our Chat API (``models.wire.CHAT_PATH_TEMPLATE``,
``Authorization: Api-Key <key>``; ``chat-api-interface.md``, "Endpoints", "Authentication"),
so the worker cannot tell it apart. A chat request is answered with the recorded transcript of
the same question and identity (:func:`bench.transcripts.request_key`), else of the same
question, else one picked by the question's hash. Each line goes out as its own chunk, stamped
with the time it was sent (:func:`bench.transcripts.stamp_line`). Abort answers 204 and does
nothing (the streams are too short to need it).

Run as ``python -m bench.synthetic_chat --port N [--api-key KEY] [--fixture PATH]`` (uvicorn,
one process).
"""

from __future__ import annotations

import argparse
import hmac
import json
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.transcripts import FIXTURE, Transcript, load_transcripts, request_key, stamp_line
from models import wire

AGENT: tuple[str, str, str] = ("local", "demo", "1")


class TranscriptIndex:
    """Finds the transcript that answers a request (module docstring)."""

    def __init__(self, transcripts: Sequence[Transcript]) -> None:
        if not transcripts:
            raise ValueError("no transcripts to serve")
        self._all = list(transcripts)
        self._by_key = {t.key: t for t in transcripts}
        self._by_question: dict[str, Transcript] = {}
        for transcript in transcripts:
            self._by_question.setdefault(transcript.question, transcript)

    def find(self, question: str, session_settings: dict[str, object]) -> Transcript:
        """Returns: the transcript for this question and identity (never fails)."""
        found = self._by_key.get(request_key(question, session_settings))
        if found is None:
            found = self._by_question.get(question)
        if found is None:
            found = self._all[zlib.crc32(question.encode()) % len(self._all)]
        return found


def create_app(transcripts: Sequence[Transcript], *, api_key: str) -> Starlette:
    """Builds the synthetic endpoint serving ``transcripts`` to callers presenting ``api_key``."""
    index = TranscriptIndex(transcripts)
    expected = api_key.encode()

    def refused(request: Request) -> Response | None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "api-key" or not hmac.compare_digest(key.strip().encode(), expected):
            body = {"error": "invalid API key", "status": 401}
            return JSONResponse(body, status_code=401)
        params = request.path_params
        if (params["cloud_region"], params["account_name"], params["agent_id"]) != AGENT:
            return JSONResponse({"error": "agent not found", "status": 404}, status_code=404)
        return None

    async def chat(request: Request) -> Response:
        refusal = refused(request)
        if refusal is not None:
            return refusal
        body = json.loads(await request.body())
        question = str(body.get("input") or "")
        transcript = index.find(question, body.get("sessionSettings") or {})
        return StreamingResponse(_stream(transcript.lines), media_type="application/json")

    async def abort(request: Request) -> Response:
        return refused(request) or Response(status_code=204)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/healthz", health, methods=["GET"]),
            Route(wire.CHAT_PATH_TEMPLATE, chat, methods=["POST"]),
            Route(wire.CHAT_PATH_TEMPLATE + wire.ABORT_SUFFIX, abort, methods=["POST"]),
        ]
    )


async def _stream(lines: Sequence[bytes]) -> AsyncIterator[bytes]:
    for line in lines:
        yield stamp_line(line, time.time()) + b"\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``--host``, ``--port``, ``--api-key``, ``--fixture``; serves until killed."""
    parser = argparse.ArgumentParser(description="Serve recorded chat transcripts, fast.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default="bench-key")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    args = parser.parse_args(argv)
    app = create_app(load_transcripts(args.fixture), api_key=args.api_key)
    serve(app, host=args.host, port=args.port)


def serve(app: Any, *, host: str, port: int) -> None:
    """Serves a synthetic agent under uvicorn until killed: no access log, a deep backlog.

    Args:
        app: The ASGI app.
        host: Address to bind.
        port: Port to bind.
    """
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
        timeout_keep_alive=60,
    )


if __name__ == "__main__":
    main()
