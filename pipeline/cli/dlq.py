"""``chatscribe dlq list|show|replay``: inspect and re-submit dead letters.

Commands::

    chatscribe dlq list [--topic T] [--limit N] [--json]   one row per dead letter
    chatscribe dlq show REF [--max-bytes N] [--json]       headers and bytes of one (REF as listed:
                                                           chat.lines.dlq:0:12)
    chatscribe dlq replay REF... | --all [--topic T]       re-submit the original records

Dead letters stay on their topics: listing and showing read with a group-less consumer, and
replaying copies the original key, value and headers to the source topic (the sink archives
idempotently, so replaying twice stores nothing twice). The logic is in
:mod:`pipeline.kafka.dead_letters`.

What ``list`` and ``show`` print is masked (:mod:`models.masking`): a dead-lettered job's
``api_key``, an ``Authorization`` value, tokens and session ids show as ``***`` in the value,
the headers and the reason (OWASP, "Logging Cheat Sheet"); ``replay`` re-submits the bytes
unchanged.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from models.masking import MASK, is_secret_name, mask_bytes, mask_text
from pipeline.errors import DeadLetterNotFoundError
from pipeline.kafka.dead_letters import (
    DLQ_TOPICS,
    DeadLetterRef,
    StoredDeadLetter,
    read_dead_letter,
    read_dead_letters,
    replay,
)
from pipeline.settings import Settings

dlq_app = typer.Typer(no_args_is_help=True, help="Dead letters of chat.requests and chat.lines.")
err = Console(stderr=True)

TopicOption = Annotated[
    list[str] | None,
    typer.Option("--topic", help=f"Dead-letter topic(s): {', '.join(DLQ_TOPICS)} (default: all)."),
]
JsonOutput = Annotated[bool, typer.Option("--json", help="JSON on stdout.")]
SHOW_BYTES = 65_536
HEX_WIDTH = 16


@dlq_app.command("list")
def list_(
    topic: TopicOption = None,
    limit: Annotated[int, typer.Option(help="Show the newest N per topic.", min=1)] = 100,
    json_output: JsonOutput = False,
) -> None:
    """List dead letters: position, key, reason, source topic/partition/offset, size."""
    letters = asyncio.run(read_dead_letters(Settings(), _topics(topic)))
    shown = _newest(letters, limit)
    if json_output:
        print("\n".join(json.dumps(_summary(s), ensure_ascii=False) for s in shown))
        return
    table = Table(title=f"{len(shown)} of {len(letters)} dead letter(s)", expand=True)
    for name in ("ref", "time (UTC)", "key", "reason", "source", "bytes"):
        table.add_column(name, overflow="fold")
    for stored in shown:
        row = _summary(stored)
        source = f"{row['source_topic']}:{row['source_partition']}:{row['source_offset']}"
        table.add_row(
            row["ref"], row["time"], row["key"], row["reason"], source, f"{row['size_bytes']:,}"
        )
    Console(width=max(Console().width, 160)).print(table)


@dlq_app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="chat.lines.dlq:PARTITION:OFFSET, as listed.")],
    max_bytes: Annotated[
        int, typer.Option(help="Bytes of the value to print.", min=0)
    ] = SHOW_BYTES,
    json_output: JsonOutput = False,
) -> None:
    """Show one dead letter: every header, then the value (text if UTF-8, else a hex dump)."""
    stored = _read_one(ref)
    if json_output:
        print(json.dumps(_detail(stored), ensure_ascii=False))
        return
    out = Console(width=max(Console().width, 120), highlight=False)
    out.print(f"[bold]{stored.ref}[/]  key={_text(stored.key)}  {stored.size_bytes:,} bytes")
    for name, value in stored.headers:
        out.print(f"  {name}: {_header(name, value)}", markup=False)
    head = mask_bytes(stored.value[:max_bytes])
    try:
        body = head.decode("utf-8")
    except UnicodeDecodeError:
        body = hexdump(head)
        out.print("value (not UTF-8, hex):")
    else:
        out.print("value (UTF-8):")
    out.print(body, markup=False, soft_wrap=True)
    if len(stored.value) > max_bytes:
        out.print(f"... {len(stored.value) - max_bytes:,} more bytes (--max-bytes)")


@dlq_app.command("replay")
def replay_(
    refs: Annotated[list[str] | None, typer.Argument(help="Dead letters to replay.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False,
    topic: TopicOption = None,
) -> None:
    """Re-submit dead letters' original records to their source topics."""
    if bool(refs) == all_:
        raise typer.BadParameter("give dead-letter refs or --all, not both and not neither")
    settings = Settings()
    if all_:
        letters = asyncio.run(read_dead_letters(settings, _topics(topic)))
    else:
        letters = [_read_one(ref, settings) for ref in refs or []]
    targets = asyncio.run(replay(settings, letters))
    for stored, target in zip(letters, targets, strict=True):
        err.print(f"replayed {stored.ref} -> {target}")
    err.print(f"[green]{len(letters)} dead letter(s) replayed[/]")


def hexdump(data: bytes, *, width: int = HEX_WIDTH) -> str:
    """Returns: ``offset  hex bytes  |printable|`` lines, ``width`` bytes per line."""
    lines = []
    for start in range(0, len(data), width):
        chunk = data[start : start + width]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<{width * 3 - 1}}  |{ascii_}|")
    return "\n".join(lines)


def _topics(topic: list[str] | None) -> tuple[str, ...]:
    names = tuple(topic or DLQ_TOPICS)
    unknown = [name for name in names if name not in DLQ_TOPICS]
    if unknown:
        raise typer.BadParameter(f"{unknown[0]} is not one of {', '.join(DLQ_TOPICS)}")
    return names


def _read_one(ref: str, settings: Settings | None = None) -> StoredDeadLetter:
    try:
        position = DeadLetterRef.parse(ref)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        return asyncio.run(read_dead_letter(settings or Settings(), position))
    except DeadLetterNotFoundError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc


def _newest(letters: list[StoredDeadLetter], limit: int) -> list[StoredDeadLetter]:
    kept: list[StoredDeadLetter] = []
    for name in DLQ_TOPICS:
        kept += [s for s in letters if s.ref.name == name][-limit:]
    return kept


def _summary(stored: StoredDeadLetter) -> dict[str, Any]:
    letter = stored.letter
    when = datetime.fromtimestamp(stored.timestamp_ms / 1000, UTC)
    return {
        "ref": str(stored.ref),
        "time": when.isoformat(timespec="seconds"),
        "key": _text(stored.key),
        "reason": mask_text(letter.reason) if letter else "(no dead-letter headers)",
        "source_topic": letter.source_topic if letter else None,
        "source_partition": letter.source_partition if letter else None,
        "source_offset": letter.source_offset if letter else None,
        "size_bytes": stored.size_bytes,
    }


def _detail(stored: StoredDeadLetter) -> dict[str, Any]:
    out = _summary(stored)
    out["headers"] = {name: _header(name, value) for name, value in stored.headers}
    value = mask_bytes(stored.value)
    try:
        out["value_utf8"] = value.decode("utf-8")
    except UnicodeDecodeError:
        out["value_hex"] = value.hex()
    return out


def _header(name: str, value: bytes | None) -> str:
    """Returns: a header's value as text, masked (a secret's name: all of it)."""
    return MASK if is_secret_name(name) else mask_text(_text(value))


def _text(value: bytes | None) -> str:
    r"""Returns: ``value`` as text, undecodable bytes as ``\xNN`` escapes."""
    if value is None:
        return "-"
    return value.decode("utf-8", errors="backslashreplace")
