"""``chatscribe eval``: the agent's execution accuracy on the evaluation set (issue 11).

Runs :func:`chat_api.evaluation.evaluate` in-process (no Kafka, no HTTP) and prints the
per-category table, the total, the score per tag (``base``; ``fresh``: phrasings written after
the agent changed), the count of invented numbers and of rows across row-level security, and
the phrasings that failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

CategoryOption = Annotated[
    list[str] | None, typer.Option("--category", help="Only this category (repeatable).")
]
FileOption = Annotated[
    list[Path] | None,
    typer.Option("--file", help="Only this questions file (repeatable); default all of them."),
]
ModelDirOption = Annotated[Path | None, typer.Option("--model-dir", help="Cube YAML model folder.")]
WarehouseOption = Annotated[
    Path | None, typer.Option(help="DuckDB file (read-only) or folder of Parquet/CSV files.")
]
ReaderOption = Annotated[
    str | None,
    typer.Option(help="rules (model-driven), legacy (flights planner) or auto (default)."),
]
"""Where the agent's model, data and reader come from: ``api serve`` and ``eval`` alike."""


def run_eval(
    category: CategoryOption = None,
    file: FileOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    failures: Annotated[bool, typer.Option(help="List the failed phrasings.")] = True,
    model_dir: ModelDirOption = None,
    warehouse: WarehouseOption = None,
    reader: ReaderOption = None,
) -> None:
    """Score the agent on the evaluation questions: per-category execution accuracy."""
    from chat_api.evaluation import evaluate, file_tag, render_text  # load on use: pandas

    files = [(path, file_tag(path)) for path in file] if file else None
    report = evaluate(
        categories=category,
        files=files,
        model_dir=model_dir,
        warehouse=warehouse,
        reader=reader or "auto",
    )
    if json_output:
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        typer.echo(render_text(report, failures=failures))
