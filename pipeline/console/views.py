"""What the console's templates show, shaped from the archive's rows (pure).

Every piece of archive text reaches a template as plain text (the template escapes it) except
three kinds of HTML made here from it, each safe by construction:

* answers and message content: :func:`models.rendering.markdown_html` (raw HTML disabled);
* SQL: Pygments' SQL lexer and HTML formatter, which escape every token;
* search excerpts: :func:`marked` escapes the text, then turns PostgreSQL's ``ts_headline``
  markers into ``<mark>``.

Charts are handed over as JSON in a ``data-spec`` attribute (escaped by the template), made by
:func:`models.rendering.chart_spec`: no URL survives, the rows are inline.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import SqlLexer

from models import json_values, wire
from models.rendering import chart_spec, markdown_html, result_table
from pipeline.archive.conversation import Conversation, Turn

TABLE_ROWS: Final = 50
JSON_CHARS: Final = 4000
_FORMATTER: Final = HtmlFormatter(nowrap=True, classprefix="sql-")
_LEXER: Final = SqlLexer()
_TABLE_RULE: Final = re.compile(r"\|?(?:\s*:?-{3,}:?\s*\|)+")


def sql_css() -> str:
    """Returns: the CSS of the SQL highlighting classes (``.sql`` blocks)."""
    css: str = _FORMATTER.get_style_defs(".sql")
    return css


def sql_html(sql: str | None) -> Markup:
    """Returns: ``sql`` highlighted as escaped HTML spans (empty for None)."""
    if not sql:
        return Markup("")
    return Markup(highlight(sql, _LEXER, _FORMATTER))


def answer_html(text: str | None) -> Markup:
    """Returns: an answer's Markdown as safe HTML (:func:`models.rendering.markdown_html`)."""
    return Markup(markdown_html(text))


def marked(text: str | None) -> Markup:
    r"""Returns a ``ts_headline`` excerpt escaped, its markers as ``<mark>``.

    The markers are ``\x02``/``\x03``; a Markdown table's pipes and rules read as `` · ``
    separators.
    """
    flat = _TABLE_RULE.sub(" ", text or "")
    flat = " · ".join(part.strip() for part in flat.split("|") if part.strip())
    escaped = html.escape(flat)
    return Markup(escaped.replace("\x02", "<mark>").replace("\x03", "</mark>"))


def pretty_json(value: Any, *, limit: int = JSON_CHARS) -> str:
    """Returns: ``value`` as indented JSON text, cut at ``limit`` characters."""
    if isinstance(value, str):
        try:
            value = json_values.loads(value)
        except ValueError:
            return str(value[:limit])
    text: str = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "\n…"


def _query_view(query: Mapping[str, Any]) -> dict[str, Any]:
    schema = query.get("schema") or []
    rows = query.get("rows")
    rows = rows if isinstance(rows, list) else []
    spec = chart_spec(query.get("vega_spec"), schema, rows) if rows else None
    return {
        "title": query.get("title"),
        "sql": sql_html(query.get("sql")),
        "table": result_table(schema, rows, limit=TABLE_ROWS) if schema else None,
        "total_rows": query.get("total_rows"),
        "error": query.get("error"),
        "views": query.get("views") or [],
        "chart": json.dumps(spec, ensure_ascii=False) if spec else None,
        "rows_deleted": query.get("rows") is None and bool(query.get("total_rows")),
    }


SENTINEL_LABELS: Final = {
    wire.ID_CUTOFF: "the stream starts here (earlier turns of the thread are not repeated)",
    wire.ID_STATE: "the thread's state",
    wire.ID_ABORTED: "aborted here",
    wire.ID_SUSPENDED: "suspended here",
    wire.ID_USAGE: "usage reported",
}
"""What each stream sentinel marks on a conversation's timeline (field notes, "Lines that the
interface does not list")."""


def turn_view(turn: Turn) -> dict[str, Any]:
    """Shapes one message for the chat.

    Returns:
        ``{"kind", "message_id", "role", "content" (HTML), "thinking", "tool", "query",
        "redaction", "label"}`` with ``kind`` one of ``question``, ``answer``, ``assistant``,
        ``tool``, ``marker`` (a sentinel line such as ``__cutoff__`` or ``__usage__``: not a
        message but a point on the timeline, ``label`` saying what it marks).
    """
    if turn.message_id.startswith("__"):
        kind = "marker"
    elif turn.tool is not None or turn.tool_name:
        kind = "tool"
    elif turn.role == "user":
        kind = "question"
    else:
        kind = "answer" if turn.is_final else "assistant"
    tool = None
    if turn.tool is not None:
        tool = {
            "name": turn.tool.get("name") or turn.tool_name,
            "input": pretty_json(turn.tool.get("input") or turn.tool.get("input_raw")),
            "result": pretty_json(turn.tool.get("result")) if turn.query is None else None,
            "error": turn.tool.get("error") or turn.tool.get("payload_error"),
        }
    return {
        "kind": kind,
        "message_id": turn.message_id,
        "role": turn.role,
        "content": answer_html(turn.content),
        "thinking": turn.thinking,
        "tool": tool,
        "query": _query_view(turn.query) if turn.query is not None else None,
        "redaction": turn.redaction,
        "label": SENTINEL_LABELS.get(turn.message_id, turn.message_id)
        if kind == "marker"
        else None,
    }


def conversation_view(conv: Conversation) -> dict[str, Any]:
    """Shapes a conversation for its page: the job, the chat, the timeline, the guarantees."""
    job = conv.job
    settings = job.get("session_settings")
    answer = conv.answer or {}
    return {
        "job": job,
        "attempt": conv.attempt,
        "turns": [turn_view(t) for t in conv.turns],
        "answer": answer_html(answer.get("content")),
        "answer_source": answer.get("source"),
        "stream_errors": answer.get("stream_errors") or [],
        "events": conv.events,
        "identity": pretty_json(settings) if settings else None,
        "redactions": conv.redactions,
        "chain": conv.chain,
        "attempt_lines": sorted(conv.attempts_lines.items()),
    }


def status_bar(by_status: Mapping[str, int], total: int) -> list[dict[str, Any]]:
    """Returns the segments of a stacked progress bar.

    ``[{"status", "count", "pct"}]``, largest share of ``total`` first (``pct`` as a CSS width,
    0-100).
    """
    total = max(total, sum(by_status.values()), 1)
    ordered = ("completed", "failed", "aborted", "running", "submitted")
    keys = [s for s in ordered if s in by_status] + sorted(set(by_status) - set(ordered))
    return [
        {"status": s, "count": by_status[s], "pct": round(100 * by_status[s] / total, 1)}
        for s in keys
    ]


def accuracy_text(scores: Mapping[str, bool]) -> str | None:
    """Returns: ``"5/6 (83.3%)"``, or None when nothing was expected."""
    if not scores:
        return None
    hits = sum(scores.values())
    return f"{hits}/{len(scores)} ({100 * hits / len(scores):.1f}%)"


def reviewed_text(counts: tuple[int, int] | None) -> str | None:
    """Returns: ``"3/4 (75.0%)"`` of (reviewed correct, reviewed correct or incorrect), or None."""
    if not counts or not counts[1]:
        return None
    return f"{counts[0]}/{counts[1]} ({100 * counts[0] / counts[1]:.1f}%)"


def short(text: str | None, chars: int = 160) -> str:
    """Returns: ``text`` on one line, cut at ``chars`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def first(values: Sequence[Any]) -> Any:
    """Returns: the first of ``values`` or None."""
    return values[0] if values else None


def diff_marks(case: Any) -> dict[str, list[bool]]:
    """Marks the result rows of a diff case that the other side lacks.

    Args:
        case: A :class:`pipeline.archive.diff.CaseDiff` (its ``a``/``b`` briefs carry up to 10
            result rows).

    Returns:
        ``{"a": [changed?, ...], "b": [changed?, ...]}``: one flag per shown row of each side,
        True when the same row (as JSON) is not among the other side's rows.
    """
    sides = {"a": case.a or {}, "b": case.b or {}}
    keyed = {
        k: [json.dumps(r, default=str) for r in (v.get("rows") or [])] for k, v in sides.items()
    }
    return {
        "a": [row not in keyed["b"] for row in keyed["a"]],
        "b": [row not in keyed["a"] for row in keyed["b"]],
    }
