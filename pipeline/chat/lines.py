r"""Splitting an NDJSON byte stream into lines, bytes kept exactly as received.

Pure: no I/O. The chat client feeds network chunks in; complete lines come out. A line is
everything up to (not including) a ``\n``; ``\r`` and invalid UTF-8 are kept because the
archive stores the stream byte for byte (design.md, "Flow"). Empty lines are lines too.
"""

from __future__ import annotations

from dataclasses import dataclass

NEWLINE = b"\n"


@dataclass(frozen=True, slots=True)
class RawLine:
    r"""One line of the byte stream.

    Attributes:
        raw: The line's bytes without the ``\n`` terminator (``\r`` kept).
        terminated: False only for a last line the stream ended without ``\n``.
    """

    raw: bytes
    terminated: bool = True


class NdjsonSplitter:
    r"""Incremental ``\n`` splitter for chunks of any size.

    Each byte is scanned once, so a 20 MiB line arriving in 64 KiB chunks costs linear time.

    Example::

        splitter = NdjsonSplitter()
        for chunk in chunks:
            for line in splitter.feed(chunk):
                ...
        tail = splitter.finish()  # RawLine(terminated=False) or None
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self.bytes_fed = 0
        self.lines_out = 0

    def __repr__(self) -> str:
        return (
            f"<NdjsonSplitter bytes_fed={self.bytes_fed} lines_out={self.lines_out} "
            f"pending_bytes={len(self._buffer)}>"
        )

    @property
    def pending_bytes(self) -> int:
        r"""Bytes received after the last ``\n``, not yet part of a complete line."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[RawLine]:
        """Adds a chunk and returns the lines it completes.

        Args:
            chunk: The next bytes off the network (any length, may be empty).

        Returns:
            Complete lines in stream order, each ``terminated=True``; empty when the chunk
            completes none.
        """
        if not chunk:
            return []
        self.bytes_fed += len(chunk)
        buffer = self._buffer
        buffer += chunk
        lines: list[RawLine] = []
        start = 0
        end = buffer.find(NEWLINE, self._scanned)
        while end >= 0:
            lines.append(RawLine(bytes(buffer[start:end])))
            start = end + 1
            end = buffer.find(NEWLINE, start)
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        self.lines_out += len(lines)
        return lines

    def finish(self) -> RawLine | None:
        r"""Ends the stream.

        Returns:
            The unterminated remainder as ``RawLine(terminated=False)``, or None when the stream
            ended right after a ``\n`` (or was empty). The splitter is empty afterwards.
        """
        if not self._buffer:
            return None
        tail = RawLine(bytes(self._buffer), terminated=False)
        self._buffer.clear()
        self._scanned = 0
        self.lines_out += 1
        return tail
