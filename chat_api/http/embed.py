"""The embed page: a thread with its answers and charts, opened with a session, never a key.

``GET /embed/chat/{chatId}?session=<sessionId>`` redeems the session (single use, expiring:
:class:`chat_api.state.sessions.SessionStore`) and shows the thread of the session's user: each
question, each SQL tool result drawn from its ``vegaSpec`` with its rows (the interface,
"svcSqlApi tool": "vegaSpec holds no data. A chart is drawn with the rows from
``toolCall.result.data``"), and the final answer. Charts are drawn in the browser by
vega-embed from the copies vendored under ``chat_api/static`` (see its README), as SVG.

The thread's data is embedded in the page as JSON (``<script type="application/json">``, with
``<``, ``>`` and ``&`` escaped) and put into the document with ``textContent`` only, so no
message text can become markup. The page sets ``data-status`` on ``<body>``: ``rendered`` once
every chart is drawn, ``chart-error`` when one failed, ``refused`` on an error page.

A refused session (unknown, expired, used, revoked) is a 403 page; a chatId the session's user
does not own, or a session whose user expired (an expired ephemeral user is gone everywhere),
is a 404 page, as for chat. Hosted pages exchange the session for a 24-hour token
so they can reload; this page is rendered whole by the server and needs no token.
"""

from __future__ import annotations

import html
import json
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from chat_api.errors import RequestError, SessionInvalidError, ThreadNotFoundError
from chat_api.http.service import in_thread
from chat_api.state.threads import StoredMessage
from models import rendering, wire

if TYPE_CHECKING:
    from chat_api.http.service import ChatService

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
SCRIPTS = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
_TABLE_ROWS = 20

_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>$title</title>
<style nonce="$nonce">
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2328; }
.turn { border-bottom: 1px solid #d0d7de; padding: 1rem 0; }
.question { font-weight: 600; }
.answer table { margin: .4rem 0; }
.chart { margin: .75rem 0; }
table { border-collapse: collapse; font-size: .85rem; }
td, th { border: 1px solid #d0d7de; padding: .2rem .5rem; }
</style>
$scripts
</head>
<body data-status="$status">
<main id="thread">$body</main>
<script id="thread-data" type="application/json">$data</script>
<script nonce="$nonce">
(function () {
  var data = JSON.parse(document.getElementById("thread-data").textContent || "null");
  if (!data) { return; }
  var root = document.getElementById("thread");
  function add(parent, tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = text; }
    parent.appendChild(node);
    return node;
  }
  var pending = [];
  data.turns.forEach(function (turn) {
    var section = add(root, "section", "turn");
    add(section, "p", "question", turn.question);
    turn.charts.forEach(function (chart) {
      var box = add(section, "figure", "chart");
      box.setAttribute("data-title", chart.title);
      var target = add(box, "div", "chart-view");
      pending.push(vegaEmbed(target, chart.spec, {renderer: "svg", actions: false}));
      var table = add(box, "table", "rows");
      var head = add(table, "tr");
      chart.columns.forEach(function (c) { add(head, "th", null, c); });
      chart.cells.forEach(function (row) {
        var tr = add(table, "tr");
        row.forEach(function (cell) { add(tr, "td", null, cell); });
      });
    });
    // answerHtml comes from models.rendering.markdown_html: raw HTML in the text is escaped.
    var answer = add(section, "div", "answer");
    if (turn.answerHtml) { answer.innerHTML = turn.answerHtml; }
    else { answer.textContent = "(no answer)"; }
  });
  Promise.all(pending).then(function () {
    document.body.setAttribute("data-status", "rendered");
  }, function (error) {
    document.body.setAttribute("data-status", "chart-error");
    add(root, "pre", "chart-error", String(error));
  });
})();
</script>
</body>
</html>
""")


class EmbedPages:
    """The embed page handler over the service's stores."""

    def __init__(self, service: ChatService) -> None:
        self._service = service

    async def chat_page(self, request: Request) -> Response:
        """``GET /embed/chat/{chatId}?session=<sessionId>``: the thread as an HTML page."""
        chat_id = request.path_params["chat_id"]
        session_id = request.query_params.get("session", "")
        try:
            if not session_id:
                raise SessionInvalidError("missing (add ?session=<sessionId>)")
            session = await in_thread(self._service.sessions.redeem, session_id)
            thread = await in_thread(self._service.threads.get, chat_id)
            if thread is None or thread.owner != session.user_key:
                raise ThreadNotFoundError(chat_id)
            messages = await in_thread(self._service.threads.messages, chat_id)
        except RequestError as exc:
            logger.info("embed page refused status=%d error=%r", exc.status_code, exc.message)
            return error_page(exc)
        logger.info("embed page served chat_id=%s user=%s", chat_id, session.user_key)
        return thread_page(chat_id, messages)


def thread_page(chat_id: str, messages: Sequence[StoredMessage]) -> HTMLResponse:
    """Returns: the page showing ``messages`` (200), charts drawn in the browser."""
    nonce = secrets.token_urlsafe(16)
    scripts = "\n".join(f'<script src="/static/{name}"></script>' for name in SCRIPTS)
    page = _PAGE.substitute(
        title=html.escape(f"Thread {chat_id}"),
        nonce=nonce,
        scripts=scripts,
        status="loading",
        body="",
        data=script_json({"chatId": chat_id, "turns": thread_turns(messages)}),
    )
    return HTMLResponse(page, headers=_headers(nonce))


def error_page(exc: RequestError) -> HTMLResponse:
    """Returns: a page stating why the request was refused, with the error's status."""
    nonce = secrets.token_urlsafe(16)
    body = f'<h1>{exc.status_code}</h1><p class="error">{html.escape(exc.message)}</p>'
    page = _PAGE.substitute(
        title="Embed refused", nonce=nonce, scripts="", status="refused", body=body, data="null"
    )
    return HTMLResponse(page, status_code=exc.status_code, headers=_headers(nonce))


def _headers(nonce: str) -> dict[str, str]:
    # vega compiles its expressions with Function(): 'unsafe-eval' is needed for the charts.
    policy = (
        f"default-src 'none'; script-src 'self' 'nonce-{nonce}' 'unsafe-eval'; "
        f"style-src 'self' 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    )
    return {
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
    }


def script_json(value: Any) -> str:
    """Returns: ``value`` as JSON safe inside ``<script>`` (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def thread_turns(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    """Groups a thread's stored messages by turn.

    Returns:
        ``[{"question", "answer" (None when the turn gave none), "charts": [chart, ...]}]``,
        a chart as :func:`chart_of` makes it.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.kind == "user":
            turns.append({"question": message.content or "", "answer": None, "charts": []})
            turns[-1]["answerHtml"] = ""
        elif turns and message.kind == "answer":
            turns[-1]["answer"] = message.content
            turns[-1]["answerHtml"] = rendering.markdown_html(message.content)
        elif turns and message.kind == "tool" and message.tool_call is not None:
            chart = chart_of(message.tool_call)
            if chart is not None:
                turns[-1]["charts"].append(chart)
    return turns


def chart_of(tool_call: dict[str, Any]) -> dict[str, Any] | None:
    """A SQL tool result as a chart: its ``vegaSpec`` with the rows as inline data.

    Returns:
        ``{"title", "spec", "columns", "values"}`` with ``values`` one object per row (numeric
        column types as numbers), or None for another tool, a failed query or no ``vegaSpec``.
    """
    if tool_call.get("name") not in wire.SQL_TOOL_NAMES:
        return None
    try:
        result = json.loads(tool_call.get("result") or "null")
        spec = json.loads(result["vegaSpec"])
        schema, rows = result["schema"], result["data"]
    except (TypeError, KeyError, ValueError):
        return None
    drawn = rendering.chart_spec(spec, schema, rows)
    if drawn is None:
        return None
    table = rendering.result_table(schema, rows, limit=_TABLE_ROWS)
    return {
        "title": str(drawn.get("title", "")),
        "spec": drawn,
        "columns": table["columns"],
        "values": drawn["data"]["values"],
        "cells": table["rows"],
    }
