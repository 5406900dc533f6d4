"""``chatscribe db partitions``: the monthly partitions of ``stream_lines`` (migration 0006).

Commands (registered in :mod:`pipeline.cli.app`)::

    chatscribe db partitions ensure [--ahead N]   create this month's and the next N months'
    chatscribe db partitions list                 the attached months and the default's rows

Sinks create this and next month's partitions themselves (at start and hourly); ``ensure``
with a larger ``--ahead`` suits a cron job or a deployment step. Exit codes: 0 fine, 2 the
archive is not migrated (``chatscribe db upgrade``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from pipeline.errors import ArchiveSchemaError
from pipeline.settings import Settings

partitions_app = typer.Typer(no_args_is_help=True, help="Monthly partitions of stream_lines.")
out = Console()
err = Console(stderr=True)


@partitions_app.command("ensure")
def ensure(
    ahead: Annotated[int, typer.Option(min=0, help="Months after the current one.")] = 3,
) -> None:
    """Create the partitions of this month and the next AHEAD months when missing."""
    from pipeline.archive.engine import create_engine, translate_errors
    from pipeline.archive.partitions import ensure_ahead

    settings = Settings()
    engine = create_engine(settings)
    try:
        with translate_errors("partitions ensure"), engine.begin() as conn:
            created = ensure_ahead(conn, now=datetime.now(UTC), ahead=ahead)
    except ArchiveSchemaError as exc:
        err.print(f"[red]{exc}[/] (run chatscribe db upgrade)")
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
    err.print(f"created {len(created)} partitions: {', '.join(created) or '-'}")


@partitions_app.command("list")
def list_() -> None:
    """Print each attached month (name, start, end, rows estimated) and the default's rows."""
    from pipeline.archive.engine import create_engine, translate_errors
    from pipeline.archive.partitions import DEFAULT, estimated_rows, list_partitions, stray_count

    settings = Settings()
    engine = create_engine(settings)
    try:
        with translate_errors("partitions list"), engine.connect() as conn:
            for p in list_partitions(conn):
                rows = estimated_rows(conn, name=p.name)
                out.print(f"{p.name}\t{p.start.date()}\t{p.end.date()}\t~{rows}")
            out.print(f"{DEFAULT}\t-\t-\t{stray_count(conn)}")
    except ArchiveSchemaError as exc:
        err.print(f"[red]{exc}[/] (run chatscribe db upgrade)")
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
