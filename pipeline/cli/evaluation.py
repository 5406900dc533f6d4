"""``chatscribe eval``: the agent's execution accuracy on the evaluation set (issue 11).

Runs :func:`chat_api.evaluation.evaluate` in-process (no Kafka, no HTTP) and prints the
per-category table, the total, the score per tag (``base``; ``fresh``: phrasings written after
the agent changed), the count of invented numbers and of rows across row-level security, and
the phrasings that failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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
    typer.Option(
        help="rules (model-driven), legacy (flights planner), llm (a language model), hybrid "
        "(rules, then the language model) or auto (default; CHATSCRIBE_READER)."
    ),
]
"""Where the agent's model, data and reader come from: ``api serve`` and ``eval`` alike."""
LlmBaseUrlOption = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint of llm/hybrid (CHATSCRIBE_LLM_BASE_URL)."),
]
LlmModelOption = Annotated[
    str | None, typer.Option(help="Model name sent to the endpoint (CHATSCRIBE_LLM_MODEL).")
]
LlmApiKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        help="Name of the environment variable holding the endpoint's key (never the key "
        "itself; default CHATSCRIBE_LLM_API_KEY)."
    ),
]


def reader_settings(
    reader: str | None, base_url: str | None, model: str | None, key_env: str | None
) -> dict[str, Any]:
    """Returns: the reader options given on the command line, as ``ChatApiSettings`` fields."""
    given = {
        "reader": reader, "llm_base_url": base_url, "llm_model": model, "llm_api_key_env": key_env
    }  # fmt: skip
    return {key: value for key, value in given.items() if value is not None}


def run_eval(
    category: CategoryOption = None,
    file: FileOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    failures: Annotated[bool, typer.Option(help="List the failed phrasings.")] = True,
    model_dir: ModelDirOption = None,
    warehouse: WarehouseOption = None,
    reader: ReaderOption = None,
    llm_base_url: LlmBaseUrlOption = None,
    llm_model: LlmModelOption = None,
    llm_api_key_env: LlmApiKeyEnvOption = None,
) -> None:
    """Score the agent on the evaluation questions: per-category execution accuracy."""
    from chat_api import ChatApiSettings
    from chat_api.evaluation import evaluate, file_tag, render_text  # load on use: pandas

    settings = ChatApiSettings(**reader_settings(reader, llm_base_url, llm_model, llm_api_key_env))
    files = [(path, file_tag(path)) for path in file] if file else None
    report = evaluate(
        categories=category,
        files=files,
        model_dir=model_dir,
        warehouse=warehouse,
        reader=settings.reader,
        language_model=settings.language_model(),
    )
    if json_output:
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        typer.echo(render_text(report, failures=failures))
