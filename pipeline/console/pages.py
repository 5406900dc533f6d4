"""The console's pages: each reads the archive through :mod:`pipeline.archive`, read only.

=================================  =========================================================
``GET /``                          Runs: every run, jobs by status, reviewed accuracy, rerun
``GET /runs/{run_id}``             A run: its jobs (filter, sort, pages of 50)
``GET /jobs/{job_id}``             A conversation: the thread as a chat, timeline, chain
``GET /jobs/{job_id}/ndjson``      The raw NDJSON (the bytes of ``chatscribe replay``)
``GET /diff?a=RUN&b=RUN``          Two runs compared as ``chatscribe diff`` does
``GET /audit[?format=csv|json]``   The rows of ``chatscribe audit``, filtered, exportable
``GET /search?q=words``            Full-text search over questions and answers
=================================  =========================================================

The handlers are plain functions: starlette runs each in its thread pool
(``run_in_threadpool``), so the archive's queries and the templates never hold the event loop
and one slow page does not stall the others. Parameters are read through
:mod:`pipeline.console.params` (a bad one is a 400 page).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, cast

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from pipeline.archive import console_queries as queries
from pipeline.archive.audit import AuditFilter, count_entries, read_entries
from pipeline.archive.console_queries import Connection, Engine
from pipeline.archive.conversation import read_conversation
from pipeline.archive.diff import diff_runs, load_run
from pipeline.archive.replay import ndjson, read_attempt
from pipeline.archive.reviewed import reviewed_by_run
from pipeline.archive.verdicts import head_seq
from pipeline.console import params, views
from pipeline.console.security import SECURITY_HEADERS
from pipeline.errors import QuestionsFileError, ReplayError, RunNotFoundError
from pipeline.reports.audit_formats import to_csv, to_json
from pipeline.runs.accuracy import (
    accuracy_scores,
    expectations_of,
    job_scores,
    questions_expectations,
    score_run,
)
from pipeline.runs.batch import load_questions
from pipeline.runs.scores import RunScores

logger = logging.getLogger(__name__)

PAGE_SIZE: Final = 50
AUDIT_PAGE_SIZE: Final = 200
_STATE_ORDER: Final = {"changed": 1, "missing": 2, "new": 3, "same": 4}


class ConsolePages:
    """The page handlers over one read-only engine and the templates."""

    def __init__(self, engine: Engine, *, schema: str, templates: Environment) -> None:
        self._engine = engine
        self._schema = schema
        self._templates = templates
        self._scores: dict[str, RunScores | None] = {}
        """Scores of finished runs (execution accuracy first), computed once per run and process."""
        self._reviewed: dict[tuple[str, int], list[str] | None] = {}
        """Automatic and reviewed accuracy per (run, newest verdict): new verdicts recompute."""

    @contextmanager
    def _conn(self) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            yield conn

    def _page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        body = self._templates.get_template(name).render(**context)
        return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)

    def error_page(self, status_code: int, message: str) -> HTMLResponse:
        """Returns: the error page of an HTTP error (a refused parameter is a 400)."""
        title = {params.BAD_REQUEST: "Bad request", 404: "Not found"}.get(status_code, "Error")
        return self._page("error.html", status_code, title=title, message=message)

    def _not_found(self, what: str) -> HTMLResponse:
        return self._page("error.html", 404, title="Not found", message=what)

    def runs(self, request: Request) -> Response:
        """``GET /``: every run, newest first.

        Shows what the archive holds (names, counts by status), never a parse of a run's
        questions file: a file's expected rows are scored on the run's own page only.
        """
        with self._conn() as conn:
            runs = queries.list_runs(conn)
            reviewed = reviewed_by_run(conn)
        rows = [
            {
                "run": r,
                "bar": views.status_bar(r.by_status, r.job_count),
                "reviewed": views.reviewed_text(reviewed.get(r.run_id)),
            }
            for r in runs
        ]
        running = any(r.running for r in runs)
        return self._page("runs.html", title="Runs", rows=rows, running=running)

    def _accuracy(self, conn: Connection, run_id: str, source: str | None) -> RunScores | None:
        if run_id not in self._scores:
            self._scores[run_id] = self._score(conn, run_id, source)
        return self._scores[run_id]

    def _score(self, conn: Connection, run_id: str, source: str | None) -> RunScores | None:
        if not source or not Path(source).is_file():
            return None
        try:
            expectations = expectations_of(load_questions(Path(source)))
            if not expectations:
                return None
            return score_run(load_run(conn, run_id=run_id), expectations)
        except (QuestionsFileError, RunNotFoundError, OSError) as exc:
            logger.info("no accuracy run_id=%s source=%s error=%s", run_id, source, exc)
            return None

    def _reviewed_lines(
        self, conn: Connection, run_id: str, source: str | None
    ) -> list[str] | None:
        head = head_seq(conn)
        if not head:
            return None  # no verdict in the archive: nothing reviewed to show
        if (run_id, head) not in self._reviewed:
            try:
                expectations = questions_expectations(source)
            except QuestionsFileError:
                expectations = {}
            lines = accuracy_scores(conn, run_id, expectations=expectations).lines()
            self._reviewed[(run_id, head)] = lines
        return self._reviewed[(run_id, head)]

    def run(self, request: Request) -> Response:
        """``GET /runs/{run_id}?status=&persona=&view=&sort=&desc=1&offset=``: a run's jobs."""
        run_id = params.identifier("run_id", request.path_params["run_id"])
        args = request.query_params
        flt = queries.JobFilter(
            status=params.text(args, "status"),
            persona=params.text(args, "persona"),
            view=params.text(args, "view"),
        )
        sort = params.choice(args, "sort", queries.SORTS, "submitted")
        offset = params.integer(args, "offset", 0, low=0, high=params.MAX_OFFSET) or 0
        with self._conn() as conn:
            found = queries.list_runs(conn, run_id=run_id)
            if not found:
                return self._not_found(f"run {run_id} is not in the archive")
            page = queries.run_jobs(
                conn,
                run_id=run_id,
                flt=flt,
                sort=cast(queries.JobSort, sort),
                descending=args.get("desc") == "1",
                offset=offset,
                limit=PAGE_SIZE,
            )
            facets = queries.run_facets(conn, run_id=run_id)
            scores = (
                None if found[0].running else self._accuracy(conn, run_id, found[0].source_file)
            )
            reviewed = (
                None
                if found[0].running
                else self._reviewed_lines(conn, run_id, found[0].source_file)
            )
        return self._page(
            "run.html",
            title=f"Run {found[0].name or run_id}",
            run=found[0],
            bar=views.status_bar(found[0].by_status, found[0].job_count),
            page=page,
            flt=flt,
            sort=sort,
            desc=args.get("desc") == "1",
            facets=facets,
            accuracy=views.accuracy_text(scores.exact) if scores is not None else None,
            score_lines=scores.lines()[1:] if scores is not None else [],
            reviewed=reviewed,
            query=dict(args),
        )

    def conversation(self, request: Request) -> Response:
        """``GET /jobs/{job_id}``: one conversation."""
        job_id = params.identifier("job_id", request.path_params["job_id"])
        with self._conn() as conn:
            conv = read_conversation(conn, job_id=job_id)
        if conv is None:
            return self._not_found(f"job {job_id} is not in the archive")
        view = views.conversation_view(conv)
        return self._page("conversation.html", title=f"Job {job_id}", **view)

    def raw_ndjson(self, request: Request) -> Response:
        """``GET /jobs/{job_id}/ndjson[?attempt=N]``: the attempt's bytes as received."""
        job_id = params.identifier("job_id", request.path_params["job_id"])
        args = request.query_params
        attempt = params.integer(args, "attempt", None, low=1, high=params.MAX_ATTEMPT)
        try:
            with self._conn() as conn:
                number, lines = read_attempt(conn, job_id=job_id, attempt=attempt)
        except ReplayError as exc:
            return self._not_found(str(exc))
        headers = {
            **SECURITY_HEADERS,
            "Content-Disposition": f'attachment; filename="{_safe(job_id)}-{number}.ndjson"',
        }
        return Response(b"".join(ndjson(lines)), media_type="application/x-ndjson", headers=headers)

    def diff(self, request: Request) -> Response:
        """``GET /diff?a=RUN_A&b=RUN_B``: the comparison of ``chatscribe diff``."""
        args = request.query_params
        run_a, run_b = params.text(args, "a") or "", params.text(args, "b") or ""
        if not run_a or not run_b:
            with self._conn() as conn:
                runs = queries.list_runs(conn)
            return self._page("diff.html", title="Diff", runs=runs, result=None, a=run_a, b=run_b)
        try:
            with self._conn() as conn:
                jobs_a = load_run(conn, run_id=run_a)
                jobs_b = load_run(conn, run_id=run_b)
        except RunNotFoundError as exc:
            return self._not_found(str(exc))
        result = diff_runs(run_a, jobs_a, run_b, jobs_b)
        cases = sorted(result.cases, key=lambda c: (not c.regressed, _STATE_ORDER[c.state]))
        rows = [{"case": c, "marks": views.diff_marks(c)} for c in cases]
        return self._page(
            "diff.html", title="Diff", runs=[], result=result, rows=rows, a=run_a, b=run_b
        )

    def audit(self, request: Request) -> Response:
        """``GET /audit?user=&view=&since=&until=[&format=csv|json]``: ``chatscribe audit``."""
        args = request.query_params
        flt = AuditFilter(
            since=params.instant(args, "since"),
            until=params.instant(args, "until"),
            user=params.text(args, "user"),
            view=params.text(args, "view"),
        )
        fmt = params.choice(args, "format", ("page", "csv", "json"), "page")
        if fmt == "page":
            offset = params.integer(args, "offset", 0, low=0, high=params.MAX_OFFSET) or 0
            return self._audit_page(flt, dict(args), offset=offset)
        with self._conn() as conn:
            entries = read_entries(conn, flt=flt)
            scores = job_scores(conn, [e.run_id for e in entries])
        text = to_csv(entries, scores) if fmt == "csv" else to_json(entries, flt, scores)
        headers = {**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="audit.{fmt}"'}
        media = "text/csv" if fmt == "csv" else "application/json"
        return Response(text, media_type=f"{media}; charset=utf-8", headers=headers)

    def _audit_page(self, flt: AuditFilter, query: dict[str, str], *, offset: int) -> Response:
        with self._conn() as conn:
            total = count_entries(conn, flt=flt)
            entries = read_entries(conn, flt=flt, limit=AUDIT_PAGE_SIZE, offset=offset)
        page = {"total": total, "offset": max(offset, 0), "limit": AUDIT_PAGE_SIZE}
        return self._page("audit.html", title="Audit", entries=entries, query=query, page=page)

    def search(self, request: Request) -> Response:
        """``GET /search?q=words``: full-text search (bounded: :func:`params.search_words`)."""
        text = params.search_words(request.query_params)
        hits = []
        if text:
            with self._conn() as conn:
                hits = queries.search(conn, text=text)
        return self._page("search.html", title="Search", q=text, hits=hits)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
