"""``chatscribe console``: a web application over the archive (starlette + jinja2).

Server-rendered pages (:mod:`pipeline.console.pages`) from Jinja templates with autoescape on,
one stylesheet and one small script (``static/console.js``: draws the charts with the vega
scripts vendored in ``chat_api/static``); no JavaScript build step. The archive is read through
:mod:`pipeline.archive` on an engine whose transactions are read only
(:func:`pipeline.archive.console_queries.create_read_only_engine`); the one write, a reviewer's
verdict on the Review page, goes through an engine of its own and needs a reviewer token
(:mod:`pipeline.console.review_pages`). Guards: :mod:`pipeline.console.security`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import uvicorn
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from models.masking import mask_access_log
from models.rendering import answer_preview, format_cell
from pipeline.archive.console_queries import Engine, create_read_only_engine
from pipeline.archive.engine import create_engine
from pipeline.console import views
from pipeline.console.pages import ConsolePages
from pipeline.console.review_pages import ReviewPages
from pipeline.console.security import SecurityHeaders, TokenGuard, check_bind
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

HERE: Final = Path(__file__).resolve().parent
VEGA_DIR: Final = HERE.parents[1] / "chat_api" / "static"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8500


def templates() -> Environment:
    """Returns the console's Jinja environment.

    Templates from ``templates/``, autoescape on for every file, undefined names an error, and the
    view helpers as filters.
    """
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        short=views.short,
        preview=answer_preview,
        marked=views.marked,
        sql=views.sql_html,
        markdown=views.answer_html,
        when=_when,
        cell=format_cell,
    )
    return env


def _when(value: object) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if hasattr(value, "strftime") else "-"


def create_app(
    settings: Settings, *, engine: Engine | None = None, writer: Engine | None = None
) -> Starlette:
    """Builds the console.

    Args:
        settings: Archive URL and schema; ``console_token`` turns the token guard on;
            ``chain_anchor_dir`` anchors reviewers' verdicts.
        engine: A read-only engine to use (default: one made from ``settings``, disposed on
            shutdown).
        writer: The engine the Review page's verdicts are written through, its only write
            (default: one of one connection made from ``settings``, disposed on shutdown).

    Returns:
        The ASGI application.
    """
    owned = engine is None
    engine = engine or create_read_only_engine(settings)
    owned_writer = writer is None
    writer = writer or create_engine(settings, pool_size=1)
    env = templates()
    pages = ConsolePages(engine, schema=settings.database_schema, templates=env)
    review = ReviewPages(engine, writer, templates=env, anchor_dir=settings.chain_anchor_dir)
    css = views.sql_css()

    async def sql_stylesheet(request: Request) -> Response:
        return PlainTextResponse(css, media_type="text/css")

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return pages.error_page(exc.status_code, exc.detail)

    routes = [
        Route("/", pages.runs),
        Route("/runs/{run_id}", pages.run),
        Route("/jobs/{job_id}", pages.conversation),
        Route("/jobs/{job_id}/ndjson", pages.raw_ndjson),
        Route("/diff", pages.diff),
        Route("/audit", pages.audit),
        Route("/search", pages.search),
        Route("/review", review.queues),
        Route("/review/login", review.login, methods=["POST"]),
        Route("/review/logout", review.logout, methods=["POST"]),
        Route("/review/{queue}", review.item),
        Route("/review/{queue}/verdicts", review.verdict, methods=["POST"]),
        Route("/review/{queue}/items", review.items),
        Route("/healthz", healthz),
        Route("/static/sql.css", sql_stylesheet),
        Mount("/static/vega", StaticFiles(directory=VEGA_DIR), name="vega"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if settings.console_token is not None and settings.console_token.get_secret_value():
        middleware.append(Middleware(TokenGuard, token=settings.console_token))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owned:
            engine.dispose()
        if owned_writer:
            writer.dispose()

    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )


def serve(settings: Settings, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serves the console under uvicorn until interrupted.

    Raises:
        ConsoleBindError: ``host`` is beyond loopback and no console token is set.
    """
    check_bind(host, settings.console_token)
    logger.info("console serving host=%s port=%d schema=%s", host, port, settings.database_schema)
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning")
    mask_access_log()  # a ?token= link never reaches an access log
    uvicorn.Server(config).run()
