"""A scripted OpenAI-compatible chat-completions server, for the language-model reader's tests.

Real HTTP under uvicorn on a free loopback port (``tests.stack_support.free_port``), because
streaming behaviour (server-sent events, a stalled stream) needs a real server. Each request
to ``POST /v1/chat/completions`` takes the next :class:`Reply` of the script (the last one is
repeated) and is recorded in :attr:`ScriptedModel.requests`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.stack_support import free_port

START_TIMEOUT_S = 10.0
MODEL = "scripted-model"


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    SSE ``chunks`` (stalling ``stall_s`` before chunk ``stall_after``), or an HTTP error
    ``status`` with ``headers``.
    """

    chunks: tuple[dict[str, Any], ...] = ()
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    stall_after: int | None = None
    stall_s: float = 0.0


@dataclass
class ScriptedModel:
    """The script, the requests received and the server's base URL."""

    base_url: str = ""
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)

    def play(self, *replies: Reply) -> None:
        """Replaces the script and forgets earlier requests."""
        self.script = list(replies)
        self.requests.clear()
        self.authorizations.clear()

    def next_reply(self) -> Reply:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _chunk(delta: dict[str, Any], *, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }  # fmt: skip


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }  # fmt: skip


def tool_call(
    name: str, arguments: Any, *, reasoning: str = "I look for the members.", pieces: int = 4
) -> Reply:
    """A tool call whose arguments (JSON text, or an object dumped) arrive in ``pieces``."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    size = max(1, -(-len(text) // pieces))
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    chunks = [_chunk({"role": "assistant", "content": None})]
    chunks += [_chunk({"reasoning_content": word}) for word in reasoning.split(" ")[:1]]
    chunks += [_chunk({"reasoning_content": " " + w}) for w in reasoning.split(" ")[1:]]
    first = {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": name, "arguments": parts[0]}}  # fmt: skip
    chunks.append(_chunk({"tool_calls": [first]}))
    for part in parts[1:]:
        chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
    chunks += [_chunk({}, finish="tool_calls"), _usage(900, 40)]
    return Reply(tuple(chunks))


def content(text: str) -> Reply:
    """Plain text content, no tool call, in a few chunks."""
    words = text.split(" ")
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    return Reply((*chunks, _chunk({}, finish="stop"), _usage(900, 20)))


def status(code: int, **headers: str) -> Reply:
    """An HTTP error reply (``retry_after="1"`` becomes ``Retry-After: 1``)."""
    pairs = tuple((k.replace("_", "-"), v) for k, v in headers.items())
    return Reply(status=code, headers=pairs)


def stalled(reply: Reply, *, after: int, seconds: float) -> Reply:
    """``reply`` that stops sending after ``after`` chunks for ``seconds``."""
    return Reply(reply.chunks, stall_after=after, stall_s=seconds)


def _app(state: ScriptedModel) -> Starlette:
    async def completions(request: Request) -> Response:
        state.requests.append(await request.json())
        state.authorizations.append(request.headers.get("authorization", ""))
        reply = state.next_reply()
        if reply.status != 200:
            body = {"error": {"message": f"scripted {reply.status}", "type": "server_error"}}
            return JSONResponse(body, status_code=reply.status, headers=dict(reply.headers))

        async def events() -> AsyncIterator[bytes]:
            for number, chunk in enumerate(reply.chunks):
                if number == reply.stall_after:
                    await asyncio.sleep(reply.stall_s)
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@contextmanager
def serve_scripted_model() -> Iterator[ScriptedModel]:
    """Runs the scripted server in a background thread while open."""
    state = ScriptedModel()
    port = free_port()
    config = uvicorn.Config(
        _app(state), host="127.0.0.1", port=port, lifespan="off", log_level="warning",
        timeout_graceful_shutdown=1,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="scripted-model", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "scripted model did not start"
        time.sleep(0.02)
    state.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
