"""Normalise one attempt's NDJSON lines into archive rows (pure, no I/O).

A job's attempt produces numbered lines (``chat.lines``); :func:`normalise` turns them into the rows
of the derived archive tables (``messages``, ``tool_calls``, ``sql_queries``, ``answers``; see
:mod:`pipeline.archive.tables`). The raw lines stay the source of truth, so the derived rows can be
recomputed at any time.

Rules (``field-notes.md``, "Merging lines into messages" and "Tool names and payloads";
``chat-api-interface.md``, "Chat stream message", "toolCall object", "Extracting the final
answer"):

* Lines are taken in line order (``line_no``); a duplicate line number counts once.
* Lines with the same ``id`` form one message. ``isDelta: true`` appends ``content`` and
  ``thinking``; any other line replaces them with its own (when it carries them). ``role``,
  ``graphPath``, ``sort``, ``isInProcess`` and the ``toolCall`` members take the latest value
  sent. Unknown fields (and ``state``, ``usage``, ``type``, ``code``) are kept in ``extra``.
* Sentinels (``__cutoff__``, ``__state__``, ``__usage__``, ``__aborted__``, ``__suspended__``)
  are kept as messages, so nothing they carry is lost, but never count as an answer.
* Lines without ``id`` form no message: bare ``{"error": ...}`` lines are collected in
  :attr:`Transcript.errors`, unparsable lines in :attr:`Transcript.parse_errors`.
* The answer is the last assistant message satisfying the final-answer rule
  (``source="final"``); failing that the answer the thread's state holds, from the last
  ``__state__`` line (``source="state"``: a takeover's state fetch has no ``final`` line;
  :mod:`pipeline.transcript.thread_state`); failing that the last complete assistant message with
  content, or the last assistant message with content at all (``source="fallback"``); else
  ``source="none"``.
* Tool calls are classified with :func:`models.tools.classify`; payloads are parsed to JSON,
  nested JSON strings (``vegaSpec`` ...) included; a payload that does not parse stays raw with
  ``payload_error``. SQL tool calls also give a :class:`SqlQueryRow`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from models import wire
from models.chat import StreamMessage, ToolCall
from models.records import LineEnvelope
from pipeline.transcript.thread_state import state_answer
from pipeline.transcript.tool_calls import (
    ArchiveRow,
    SqlQueryRow,
    ToolCallRow,
    error_text,
    read_sql_early,
    sql_query_row,
    tool_call_row,
)

__all__ = [
    "AnswerRow",
    "AnswerSource",
    "Fold",
    "MessageRow",
    "SqlQueryRow",
    "ToolCallRow",
    "Transcript",
    "normalise",
]

AnswerSource = Literal["final", "state", "fallback", "none"]

_MAPPED_FIELDS = frozenset(
    {"id", "role", "content", "thinking", "toolCall", "graphPath", "isDelta", "isInProcess", "sort"}
)
_TOOL_MEMBERS = frozenset({"name", "input", "result"})
_UNMAPPED_ATTRIBUTES = frozenset(
    name
    for name, info in StreamMessage.model_fields.items()
    if (info.alias or name) not in _MAPPED_FIELDS
)


@dataclass(frozen=True)
class MessageRow(ArchiveRow):
    """One merged message: a row of ``messages``."""

    job_id: str
    attempt: int
    message_id: str
    role: str | None
    graph_path: tuple[str, ...] | None
    content: str | None
    thinking: str | None
    sort: float | None
    is_final: bool
    is_in_process: bool | None
    is_delta_merged: bool
    first_line: int
    last_line: int
    tool_name: str | None
    extra: dict[str, Any]


@dataclass(frozen=True)
class AnswerRow(ArchiveRow):
    """The attempt's answer: a row of ``answers``; ``line_no`` is the message's last line."""

    job_id: str
    attempt: int
    chat_id: str | None
    content: str | None
    source: AnswerSource
    message_id: str | None
    line_no: int | None
    stream_errors: tuple[str, ...]


@dataclass(frozen=True)
class Transcript:
    """One (job, attempt) normalised.

    Attributes:
        chat_id: The thread id (``__cutoff__``'s ``state.chatId``, else any line's).
        messages, tool_calls, sql_queries: Rows in order of first appearance.
        answer: The answer row (always present, ``source="none"`` when there is none).
        errors: Messages of the bare ``{"error": ...}`` lines, in line order.
        parse_errors: ``(line_no, reason)`` of lines that are not stream messages.
        aborted, suspended: The stream carried ``__aborted__`` / ``__suspended__``.
        usage: ``__usage__``'s ``usage`` object (LLM calls, tokens), when sent.
    """

    job_id: str
    attempt: int
    chat_id: str | None
    messages: tuple[MessageRow, ...]
    tool_calls: tuple[ToolCallRow, ...]
    sql_queries: tuple[SqlQueryRow, ...]
    answer: AnswerRow
    errors: tuple[str, ...]
    parse_errors: tuple[tuple[int, str], ...]
    aborted: bool = False
    suspended: bool = False
    usage: dict[str, Any] | None = None


@dataclass
class _Draft:
    """A message being merged from its lines (mutable, internal)."""

    message_id: str
    first_line: int
    last_line: int = 0
    role: str | None = None
    graph_path: tuple[str, ...] | None = None
    content: str | None = None
    thinking: str | None = None
    sort: float | None = None
    is_in_process: bool | None = None
    is_delta_merged: bool = False
    has_tool_call: bool = False
    tool: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def apply(self, line_no: int, msg: StreamMessage) -> None:
        """Merges one line into the message (field notes, "Merging lines into messages")."""
        self.last_line = line_no
        if msg.is_delta:
            self.is_delta_merged = True
            self.content = _append(self.content, msg.content)
            self.thinking = _append(self.thinking, msg.thinking)
        else:
            self.content = msg.content if msg.content is not None else self.content
            self.thinking = msg.thinking if msg.thinking is not None else self.thinking
        self.role = msg.role if msg.role is not None else self.role
        self.graph_path = msg.graph_path if msg.graph_path is not None else self.graph_path
        self.sort = msg.sort if msg.sort is not None else self.sort
        if msg.is_in_process is not None:
            self.is_in_process = msg.is_in_process
        if msg.tool_call is not None:
            self.has_tool_call = True
            self.tool.update(msg.tool_call.model_dump(exclude_none=True))
        extra = _extra(msg)
        if extra:
            self.extra.update(extra)

    def tool_call(self) -> ToolCall:
        """Returns: the merged ``toolCall`` (latest ``name``, ``input``, ``result`` sent)."""
        return ToolCall.model_validate({k: self.tool.get(k) for k in _TOOL_MEMBERS})

    @property
    def is_final(self) -> bool:
        """The interface's final-answer rule, applied to the merged role and graph path."""
        return StreamMessage(role=self.role, graphPath=self.graph_path).is_final_answer

    @property
    def is_sentinel(self) -> bool:
        """True for ``__cutoff__``, ``__state__`` and the other sentinel ids."""
        return self.message_id in wire.SENTINEL_IDS


def normalise(
    lines: Sequence[LineEnvelope], *, job_id: str | None = None, attempt: int | None = None
) -> Transcript:
    """Normalises one attempt's lines into archive rows (rules: module docstring).

    Args:
        lines: The attempt's line envelopes in any order (parsed or not).
        job_id: The attempt's job; taken from ``lines`` when omitted (required when ``lines``
            is empty).
        attempt: The attempt's number; likewise.

    Returns:
        The :class:`Transcript`; its rows carry ``job_id`` and ``attempt``.

    Raises:
        ValueError: ``lines`` is empty and no key was given, or the lines belong to more than
            one (job, attempt).
    """
    job_id, attempt = _key(lines, job_id, attempt)
    fold = Fold(job_id, attempt, read_sql_early=False)
    for line in _in_line_order(lines):
        fold.add(line)
    return fold.transcript()


class Fold:
    """One attempt's transcript built line by line: :func:`normalise`, one line at a time.

    The sink folds each line as it is archived in line order, so an attempt's end only turns
    the merged messages into rows (:mod:`pipeline.archive.derived`). What a fold holds is the
    merged messages: the text of the deltas joined, each tool call's latest payloads.

    Args:
        job_id, attempt: The attempt folded.
        read_sql_early: Read a SQL tool call's query when its result arrives (:meth:`add`);
            :func:`normalise`, which has every line at once, does not.

    Attributes:
        last_line_no: The last line number added (0: none).
        lines_added: How many lines were added.
    """

    def __init__(self, job_id: str, attempt: int, *, read_sql_early: bool = True) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self._read_sql_early = read_sql_early
        self.last_line_no = 0
        self.lines_added = 0
        self._drafts: dict[str, _Draft] = {}
        self._errors: list[str] = []
        self._parse_errors: list[tuple[int, str]] = []
        self._cutoff_chat_id: str | None = None
        self._message_chat_id: str | None = None
        self._header_chat_id: str | None = None

    def __repr__(self) -> str:
        return (
            f"<Fold job_id={self.job_id!r} attempt={self.attempt} "
            f"last_line_no={self.last_line_no} messages={len(self._drafts)}>"
        )

    def add(self, line: LineEnvelope) -> None:
        """Merges the next line (module docstring, the rules).

        When the line brings a SQL tool call's result, its query is read now
        (:func:`~pipeline.transcript.tool_calls.read_sql_early`), so that the attempt's end finds
        it read.

        Raises:
            ValueError: The line is of another attempt, or its number is not above the last
                one added (a fold takes lines in line order, each once).
        """
        if (line.job_id, line.attempt) != (self.job_id, self.attempt):
            raise ValueError(
                f"line of {(line.job_id, line.attempt)} added to the fold of "
                f"{(self.job_id, self.attempt)}"
            )
        if line.line_no <= self.last_line_no:
            raise ValueError(f"line {line.line_no} added after line {self.last_line_no}")
        self.last_line_no = line.line_no
        self.lines_added += 1
        self._note_chat_id(line)
        msg = line.message
        if msg is None:
            self._parse_errors.append((line.line_no, line.parse_error or "not parsed"))
        elif msg.id is not None:
            draft = self._drafts.get(msg.id)
            if draft is None:
                draft = self._drafts[msg.id] = _Draft(msg.id, line.line_no)
            draft.apply(line.line_no, msg)
            if self._read_sql_early and msg.tool_call and msg.tool_call.result is not None:
                read_sql_early(draft.tool_call())
        elif msg.is_error_line:
            self._errors.append(error_text(msg.error))

    def _note_chat_id(self, line: LineEnvelope) -> None:
        """The thread id: ``__cutoff__``'s, else the first a message carries, else a header's."""
        msg = line.message
        if msg is not None and msg.chat_id:
            if msg.id == wire.ID_CUTOFF and self._cutoff_chat_id is None:
                self._cutoff_chat_id = msg.chat_id
            if self._message_chat_id is None:
                self._message_chat_id = msg.chat_id
        if line.chat_id and self._header_chat_id is None:
            self._header_chat_id = line.chat_id

    def transcript(self) -> Transcript:
        """Returns: the :class:`Transcript` of the lines added so far (as :func:`normalise`)."""
        job_id, attempt, drafts = self.job_id, self.attempt, self._drafts
        messages = tuple(_message_row(job_id, attempt, d) for d in drafts.values())
        calls = tuple(
            tool_call_row(job_id, attempt, d.message_id, d.tool_call())
            for d in drafts.values()
            if d.has_tool_call
        )
        chat_id = self._cutoff_chat_id or self._message_chat_id or self._header_chat_id
        errors = tuple(self._errors)
        return Transcript(
            job_id=job_id,
            attempt=attempt,
            chat_id=chat_id,
            messages=messages,
            tool_calls=calls,
            sql_queries=tuple(sql_query_row(call) for call in calls if call.kind == "sql"),
            answer=_answer(job_id, attempt, chat_id, list(drafts.values()), errors),
            errors=errors,
            parse_errors=tuple(self._parse_errors),
            aborted=wire.ID_ABORTED in drafts,
            suspended=wire.ID_SUSPENDED in drafts,
            usage=_usage(drafts.get(wire.ID_USAGE)),
        )


def _usage(draft: _Draft | None) -> dict[str, Any] | None:
    usage = draft.extra.get("usage") if draft is not None else None
    return usage if isinstance(usage, dict) else None


def _key(lines: Sequence[LineEnvelope], job_id: str | None, attempt: int | None) -> tuple[str, int]:
    keys = {(line.job_id, line.attempt) for line in lines}
    if job_id is not None and attempt is not None:
        keys.add((job_id, attempt))
    if len(keys) != 1:
        raise ValueError(f"normalise needs exactly one (job, attempt), got {sorted(keys)}")
    return keys.pop()


def _in_line_order(lines: Sequence[LineEnvelope]) -> list[LineEnvelope]:
    seen: dict[int, LineEnvelope] = {}
    for line in lines:
        seen.setdefault(line.line_no, line)
    return [seen[n] for n in sorted(seen)]


def _append(current: str | None, delta: str | None) -> str | None:
    if delta is None:
        return current
    return (current or "") + delta


def _extra(msg: StreamMessage) -> dict[str, Any]:
    """Returns: the line's fields without a column of their own, unknown ones included.

    Unknown ``toolCall`` members are kept under ``toolCall``.
    """
    tool_extra = msg.tool_call.model_extra if msg.tool_call is not None else None
    if not (
        msg.model_extra or tool_extra or not _UNMAPPED_ATTRIBUTES.isdisjoint(msg.model_fields_set)
    ):
        return {}  # the common line: every field has a column (and no dump is needed)
    sent = msg.to_wire()
    extra = {k: v for k, v in sent.items() if k not in _MAPPED_FIELDS}
    tool = sent.get("toolCall")
    if isinstance(tool, dict) and tool.keys() - _TOOL_MEMBERS:
        extra["toolCall"] = {k: v for k, v in tool.items() if k not in _TOOL_MEMBERS}
    return extra


def _message_row(job_id: str, attempt: int, d: _Draft) -> MessageRow:
    return MessageRow(
        job_id=job_id,
        attempt=attempt,
        message_id=d.message_id,
        role=d.role,
        graph_path=d.graph_path,
        content=d.content,
        thinking=d.thinking,
        sort=d.sort,
        is_final=d.is_final,
        is_in_process=d.is_in_process,
        is_delta_merged=d.is_delta_merged,
        first_line=d.first_line,
        last_line=d.last_line,
        tool_name=d.tool.get("name"),
        extra=d.extra,
    )


def _answer(
    job_id: str, attempt: int, chat_id: str | None, drafts: list[_Draft], errors: tuple[str, ...]
) -> AnswerRow:
    """Picks the answer.

    Interface, "Extracting the final answer"; field notes, fallback; the thread's state
    before a fallback.
    """
    chosen, source = _pick_answer(drafts)
    from_state = _answer_in_state(drafts) if source != "final" else None
    if from_state is not None:
        content, message_id, line_no = from_state
        return AnswerRow(job_id, attempt, chat_id, content, "state", message_id, line_no, errors)
    return AnswerRow(
        job_id=job_id,
        attempt=attempt,
        chat_id=chat_id,
        content=chosen.content if chosen else None,
        source=source,
        message_id=chosen.message_id if chosen else None,
        line_no=chosen.last_line if chosen else None,
        stream_errors=errors,
    )


def _answer_in_state(drafts: list[_Draft]) -> tuple[str, str, int] | None:
    """Returns: ``(content, message id, line)`` of the answer in the ``__state__`` state.

    The message id is the state's, else ``__state__``; None when the state has no answer.
    """
    draft = next((d for d in drafts if d.message_id == wire.ID_STATE), None)
    state = draft.extra.get("state") if draft is not None else None
    found = state_answer(state) if isinstance(state, dict) else None
    if draft is None or found is None:
        return None
    return found.content, found.message_id or wire.ID_STATE, draft.last_line


def _pick_answer(drafts: list[_Draft]) -> tuple[_Draft | None, AnswerSource]:
    by_last_line = sorted(
        (d for d in drafts if d.role == "assistant" and not d.is_sentinel),
        key=lambda d: d.last_line,
    )
    finals = [d for d in by_last_line if d.is_final]
    if finals:
        return finals[-1], "final"
    with_content = [d for d in by_last_line if d.content]
    complete = [d for d in with_content if not d.is_in_process]
    best = complete or with_content
    if best:
        return best[-1], "fallback"
    return None, "none"
