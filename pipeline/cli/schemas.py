"""``chatscribe schemas``: the JSON Schemas of the records the pipeline publishes.

Commands::

    chatscribe schemas list            name, version and file of every published record's schema
    chatscribe schemas show NAME       the shipped schema of NAME's current version (JSON)
    chatscribe schemas write           write the schema files of new versions (for developers)

The schemas and their versioning rule live in :mod:`models.schemas`. ``show`` exits 2 for an
unknown name; ``write`` never rewrites a shipped file: it exits 1 when a model's schema changed
without a version bump (the message names the schema).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from models import schemas

schemas_app = typer.Typer(no_args_is_help=True, help="JSON Schemas of published records.")
err = Console(stderr=True)
EXIT_UNKNOWN_SCHEMA = 2

Name = Annotated[str, typer.Argument(help="A topic name (chat.answers) or dead-letters.")]


@schemas_app.command("list")
def list_schemas() -> None:
    """List every published record's schema: name, version, file, description."""
    for schema in schemas.SCHEMAS:
        print(f"{schema.name}\tv{schema.version}\t{schema.file_name}\t{schema.description}")


@schemas_app.command("show")
def show(name: Name) -> None:
    """Print the shipped JSON Schema of NAME's current version."""
    try:
        schema = schemas.by_name(name)
    except KeyError as exc:
        err.print(f"[red]{exc.args[0]}[/red]")
        raise typer.Exit(EXIT_UNKNOWN_SCHEMA) from None
    shipped = schema.shipped()
    if shipped is None:
        err.print(f"[red]{schema.file_name} is not shipped[/red]")
        raise typer.Exit(1)
    print(schemas.render(shipped), end="")


@schemas_app.command("write")
def write() -> None:
    """Write the file of every schema version not shipped yet; refuse a change without a bump."""
    directory = schemas.schemas_dir()
    for schema in schemas.SCHEMAS:
        if schema.shipped(directory) is None:
            (directory / schema.file_name).write_text(schemas.render(schema.generate()))
            err.print(f"wrote {schema.file_name}")
    problems = schemas.drift(directory=directory)
    for problem in problems:
        err.print(f"[red]{problem}[/red]")
    if problems:
        raise typer.Exit(1)
