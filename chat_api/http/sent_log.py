r"""An opt-in log of every NDJSON line the Chat API sent, for fault-injection tests.

With ``CHATSCRIBE_SENT_LOG=<path>`` set, each line a chat response yields is appended to that
file as one JSON object::

    {"stream": "<uuid of the response>", "chat_id": "<state.chatId of the first line or null>",
     "line_no": 1, "bytes": 123, "sha256": "<hex of the line without its \n>"}

so a test can compare what the archive stored, line by line, with what the service sent,
without knowing anything about jobs. Unset (the default), responses are not touched.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import AsyncGenerator
from functools import cache
from pathlib import Path
from typing import Any, TextIO

from pydantic_settings import BaseSettings, SettingsConfigDict


class SentLogSettings(BaseSettings):
    """``CHATSCRIBE_SENT_LOG``: the file to append to; None (default) disables the log."""

    model_config = SettingsConfigDict(env_prefix="CHATSCRIBE_", frozen=True, extra="ignore")

    sent_log: Path | None = None


class SentLog:
    """Appends one JSON object per sent line to ``path`` (thread-safe, flushed per line)."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        """Appends ``entry`` as one line."""
        text = json.dumps(entry, separators=(",", ":")) + "\n"
        with self._lock:
            self._file.write(text)


@cache
def sent_log() -> SentLog | None:
    """Returns: the process's sent log when ``CHATSCRIBE_SENT_LOG`` is set, else None."""
    path = SentLogSettings().sent_log
    return SentLog(path) if path is not None else None


def tap(lines: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    """Returns: ``lines`` unchanged, logged to the sent log when one is configured."""
    log = sent_log()
    return lines if log is None else _logged(lines, log)


async def _logged(lines: AsyncGenerator[str, None], log: SentLog) -> AsyncGenerator[str, None]:
    stream = str(uuid.uuid4())
    chat_id: str | None = None
    try:
        line_no = 0
        async for text in lines:
            raw = text.encode("utf-8").removesuffix(b"\n")
            line_no += 1
            if line_no == 1:
                chat_id = _chat_id(raw)
            digest = hashlib.sha256(raw).hexdigest()
            entry = {"stream": stream, "chat_id": chat_id, "line_no": line_no}
            log.write({**entry, "bytes": len(raw), "sha256": digest})
            yield text
    finally:
        await lines.aclose()


def _chat_id(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    state = value.get("state") if isinstance(value, dict) else None
    chat_id = state.get("chatId") if isinstance(state, dict) else None
    return chat_id if isinstance(chat_id, str) else None
