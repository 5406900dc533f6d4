"""``chatscribe export otel``: archived conversations as OpenTelemetry traces.

Commands::

    chatscribe export otel --endpoint URL [--run RUN | --since T] [--timeout S]

Sends each normalised job attempt as a trace (:mod:`pipeline.otel`) over OTLP/HTTP with
protobuf. ``--endpoint`` is a collector's base URL (``http://127.0.0.1:4318``, ``/v1/traces``
appended) or its full traces URL (Phoenix: ``http://127.0.0.1:6006/v1/traces``). Without
``--run`` or ``--since`` every archived turn is exported. Re-exporting sends the same trace and
span ids. Exit status: 0 sent, 1 the endpoint refused (spans sent before stay), 2 bad input or a
run with no finished job.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from pipeline.settings import Settings

export_app = typer.Typer(no_args_is_help=True, help="Export the archive in other tools' formats.")
err = Console(stderr=True)
EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"not an ISO-8601 time: {value!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@export_app.command("otel")
def otel(
    endpoint: Annotated[str, typer.Option(help="OTLP/HTTP base URL or traces URL.")],
    run: Annotated[str | None, typer.Option("--run", help="Only this run's jobs.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only jobs finished at or after this ISO time (UTC).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per request, retries included.")] = 10.0,
) -> None:
    """Send archived conversations as traces to an OTLP/HTTP endpoint (protobuf)."""
    from pipeline.archive.engine import create_engine
    from pipeline.errors import RunNotFoundError, TraceExportError
    from pipeline.otel.export import export_archive, traces_url

    if run is not None and since is not None:
        raise typer.BadParameter("give --run or --since, not both")
    try:
        traces_url(endpoint)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--endpoint") from None
    since_at = _since(since)
    engine = create_engine(Settings())
    try:
        summary = export_archive(
            engine, endpoint=endpoint, run_id=run, since=since_at, timeout_s=timeout
        )
    except RunNotFoundError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except TraceExportError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(EXIT_REFUSED) from None
    finally:
        engine.dispose()
    print(f"exported {summary.traces} traces, {summary.spans} spans to {summary.endpoint}")
