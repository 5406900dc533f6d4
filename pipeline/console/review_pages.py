"""The console's Review pages (issue 26): queues, one conversation at a time, verdicts.

=====================================  ====================================================
``GET /review``                        The queues, and the reviewer signed in (or a form)
``POST /review/login``                 ``token=...``: signs a reviewer in (cookie)
``POST /review/logout``                Signs out
``GET /review/{queue}?pos=N``          Position N of a queue: the conversation as the
                                       Conversation page shows it (two side by side in a
                                       pairwise queue), its verdicts, the verdict form
``POST /review/{queue}/verdicts``      A verdict on a position (reviewer token required);
                                       303 to the next position
``GET /review/{queue}/items``          The queue API: ``?first=N&limit=M`` (at most
                                       :data:`MAX_ITEMS`), items and latest verdicts as JSON
=====================================  ====================================================

Reads go through the console's read-only engine, as every other page. The one write, a
verdict, goes through a second engine that may write (:func:`pipeline.archive.engine.
create_engine`) and needs a reviewer token even on 127.0.0.1: the ``chatscribe_reviewer``
cookie (``HttpOnly``, ``SameSite=Strict``: a form on another site cannot send it) set by
``/review/login``, or an ``X-Reviewer-Token`` header for scripts. A ``POST`` from another site
is refused: ``Sec-Fetch-Site`` other than ``same-origin``, or, from a browser that does not send
it, an ``Origin`` that is not this console's (OWASP "Cross-Site Request Forgery Prevention Cheat
Sheet", "Fetch Metadata headers" and "Verifying Origin With Standard Headers"; the console's
``Referrer-Policy: no-referrer`` makes a browser send ``Origin: null`` even on its own forms).
Keyboard: ``static/console.js`` (next, previous, verdict keys), every action also a plain link
or button.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs

from jinja2 import Environment
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pipeline.archive import reviews
from pipeline.archive.console_queries import Engine
from pipeline.archive.conversation import read_conversation
from pipeline.archive.verdicts import VerdictAnchor
from pipeline.console import params, views
from pipeline.console.security import SECURITY_HEADERS
from pipeline.errors import ReviewerAuthError, ReviewRefusedError

logger = logging.getLogger(__name__)

COOKIE: Final = "chatscribe_reviewer"
TOKEN_HEADER: Final = "x-reviewer-token"
MAX_ITEMS: Final = 200
MAX_FORM_BYTES: Final = 256 * 1024
KEYS: Final = {"1": "correct", "2": "incorrect", "3": "needs_follow_up", "4": "not_applicable"}
PAIR_KEYS: Final = {"a": "a_better", "b": "b_better", "e": "equal"}
"""The verdict keys of the Review page (``static/console.js`` reads them from the buttons)."""


class ReviewPages:
    """The Review handlers over the read-only engine and the verdict writer."""

    def __init__(
        self,
        engine: Engine,
        writer: Engine,
        *,
        templates: Environment,
        anchor_dir: Path | None,
    ) -> None:
        self._engine = engine
        self._writer = writer
        self._templates = templates
        self._anchor = VerdictAnchor(anchor_dir) if anchor_dir else None

    def _page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        body = self._templates.get_template(name).render(**context)
        return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)

    def _error(self, status_code: int, message: str) -> HTMLResponse:
        titles = {400: "Bad request", 401: "Reviewer token required", 403: "Forbidden"}
        title = titles.get(status_code, "Not found")
        return self._page("error.html", status_code, title=title, message=message)

    def _reviewer(self, request: Request) -> str | None:
        token = _token(request)
        if not token:
            return None
        try:
            with self._engine.connect() as conn:
                return reviews.reviewer_of(conn, token)
        except ReviewerAuthError:
            return None

    def queues(self, request: Request) -> Response:
        """``GET /review``: every queue, and who is signed in."""
        reviewer = self._reviewer(request)
        with self._engine.connect() as conn:
            queues = reviews.list_queues(conn)
        return self._page("review_queues.html", title="Review", queues=queues, reviewer=reviewer)

    async def login(self, request: Request) -> Response:
        """``POST /review/login``: ``token`` in the form; sets the reviewer cookie."""
        if not _same_origin(request):
            return self._error(403, "a form of another site cannot sign in here")
        token = (await _form(request)).get("token", "").strip()
        try:
            await run_in_threadpool(self._check_token, token)
        except ReviewerAuthError as exc:
            return self._error(401, str(exc))
        response = RedirectResponse("/review", status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, token, path="/review", httponly=True, samesite="strict")
        return response

    def _check_token(self, token: str) -> str:
        with self._engine.connect() as conn:
            return reviews.reviewer_of(conn, token)

    async def logout(self, request: Request) -> Response:
        """``POST /review/logout``: drops the reviewer cookie."""
        response = RedirectResponse("/review", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/review", httponly=True, samesite="strict")
        return response

    def item(self, request: Request) -> Response:
        """``GET /review/{queue}?pos=N``: one position of a queue (module docstring)."""
        queue_id = params.identifier("queue", request.path_params["queue"])
        pos = params.integer(request.query_params, "pos", 1, low=1, high=params.MAX_ATTEMPT) or 1
        with self._engine.connect() as conn:
            found = reviews.list_queues(conn, queue_id=queue_id)
            items = reviews.queue_items(conn, queue_id, first=pos, limit=1) if found else []
            if not items:
                return self._error(404, f"queue {queue_id} has no position {pos}")
            item = items[0]
            conv = read_conversation(conn, job_id=item.job_id)
            pair = read_conversation(conn, job_id=item.pair_job_id) if item.pair_job_id else None
            history = reviews.verdict_history(conn, queue_id, item.job_id)
        if conv is None:
            return self._error(404, f"job {item.job_id} is no longer in the archive")
        shown = [views.conversation_view(c) for c in (conv, pair) if c is not None]
        return self._page(
            "review.html",
            title=f"Review {queue_id} · {pos}",
            queue=found[0],
            item=item,
            pos=pos,
            conv=shown[0],
            pair=shown[1] if len(shown) > 1 else None,
            charts=any(t["query"] and t["query"]["chart"] for c in shown for t in c["turns"]),
            history=history,
            reviewer=self._reviewer(request),
            keys=PAIR_KEYS if item.pair_job_id else KEYS,
            done=request.query_params.get("done") == "1",
        )

    async def verdict(self, request: Request) -> Response:
        """``POST /review/{queue}/verdicts``: appends a verdict; 303 to the next position."""
        queue_id = params.identifier("queue", request.path_params["queue"])
        if not _same_origin(request):
            return self._error(403, "a form of another site cannot give verdicts here")
        fields = await _form(request)
        form = reviews.VerdictForm(
            queue_id=queue_id,
            position=params.integer(fields, "pos", 0, low=1, high=params.MAX_ATTEMPT) or 0,
            job_id=params.text(fields, "job_id") or "",
            verdict=fields.get("verdict", ""),
            labels=fields.get("labels", ""),
            comment=fields.get("comment", ""),
            expected=fields.get("expected", ""),
        )
        try:
            count = await run_in_threadpool(self._give, _token(request), form)
        except ReviewerAuthError as exc:
            return self._error(401 if exc.reviewer is None else 403, str(exc))
        except ReviewRefusedError as exc:
            return self._error(400, str(exc))
        last = form.position >= count
        target = f"/review/{queue_id}?pos={min(form.position + 1, count)}"
        return RedirectResponse(
            target + ("&done=1" if last else ""), status_code=303, headers=SECURITY_HEADERS
        )

    def _give(self, token: str | None, form: reviews.VerdictForm) -> int:
        with self._writer.begin() as conn:
            stored = reviews.give(conn, token, form, anchor=self._anchor)
            count = reviews.list_queues(conn, queue_id=form.queue_id)[0].item_count
        logger.info(
            "verdict seq=%d queue=%s job_id=%s reviewer=%s verdict=%s",
            stored.seq,
            form.queue_id,
            form.job_id,
            stored.verdict.reviewer,
            stored.verdict.verdict,
        )
        return count

    def items(self, request: Request) -> Response:
        """``GET /review/{queue}/items?first=&limit=``: the queue API (JSON)."""
        queue_id = params.identifier("queue", request.path_params["queue"])
        args = request.query_params
        first = params.integer(args, "first", 1, low=1, high=params.MAX_ATTEMPT) or 1
        limit = params.integer(args, "limit", 50, low=1, high=MAX_ITEMS) or 50
        with self._engine.connect() as conn:
            found = reviews.list_queues(conn, queue_id=queue_id)
            items = reviews.queue_items(conn, queue_id, first=first, limit=limit) if found else []
        if not found:
            return JSONResponse({"error": f"no queue {queue_id}"}, 404, headers=SECURITY_HEADERS)
        document = {"queue": found[0].to_json(), "items": [i.to_json() for i in items]}
        return JSONResponse(document, headers=SECURITY_HEADERS)


def _token(request: Request) -> str | None:
    return request.headers.get(TOKEN_HEADER) or request.cookies.get(COOKIE) or None


def _same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site is not None:  # Fetch Metadata: sent by every current browser, whatever the referrer
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser (a script with the token header)
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise params.refuse("form", f"at most {MAX_FORM_BYTES} bytes")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise params.refuse("form", "UTF-8 form fields") from None
    return {k: v[-1] for k, v in parsed.items()}
