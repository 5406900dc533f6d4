"""Running the Chat API under uvicorn.

``python -m chat_api.http.server --host 127.0.0.1 --port 8400`` reads :class:`ChatApiSettings` from
the ``CHATSCRIBE_*`` environment and serves until interrupted; ``ops/`` and the demo wait on
``GET /healthz``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

import uvicorn
from starlette.types import ASGIApp

from chat_api.http.app import create_app
from chat_api.settings import ChatApiSettings
from models.masking import mask_access_log

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8400
"""The port ``pipeline.settings.DEFAULT_CHAT_URL`` points at."""


def serve(
    settings: ChatApiSettings,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log_level: str = "info",
) -> None:
    """Builds the app and serves it until interrupted (blocks).

    Args:
        settings: The process settings.
        host: Interface to listen on.
        port: TCP port to listen on.
        log_level: uvicorn's log level (``"info"``, ``"warning"``, ...).

    Raises:
        ChatApiError: The data model or the warehouse failed to load (before listening).
    """
    app = create_app(settings)
    logger.info(
        "chat api listening host=%s port=%d agent=%s/%s/%s development_mode=%s",
        host,
        port,
        settings.cloud_region,
        settings.account_name,
        settings.agent_id,
        settings.development_mode,
    )
    uvicorn.Server(server_config(app, host=host, port=port, log_level=log_level)).run()


def server_config(app: ASGIApp, *, host: str, port: int, log_level: str) -> uvicorn.Config:
    """Returns uvicorn's configuration of the Chat API, its access log masked.

    uvicorn sets its loggers up when the configuration is made; then
    :func:`models.masking.mask_access_log` masks every query value of the access log's request
    lines, so an embed link's ``?session=`` id (a bearer secret while it is valid) never
    reaches the log, whatever the status (OWASP, "Logging Cheat Sheet").
    """
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off")
    mask_access_log()
    return config


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``--host``, ``--port``, ``--log-level``; settings from the environment."""
    parser = argparse.ArgumentParser(description="Serve chatscribe's Chat API.")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    serve(ChatApiSettings(), host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
