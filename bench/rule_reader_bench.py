"""Reading time per question of the model-driven rule reader (issue 22).

Target: p95 under 20 ms on a model of 100+ members. Model: the embedded nycflights13 model
(118 members over 5 views), indexed with its warehouse's string values. Questions: every turn
of the blind and fresh flights sets (``chat_api/evaluation/questions_blind_flights*.yaml``,
``questions_fresh*.yaml``), follow-ups read with their thread's previous query, ``rounds``
times. Ours: :func:`chat_api.reader.read` (link, interpret, typed query) plus
:func:`chat_api.reader.sql.semantic_sql`, refusals included. Baseline, same run, same
questions: tokenizing and linking only (:func:`chat_api.reader.linking.link`), the least the
reader does. A second figure puts the p95 against the 20 ms budget (target ratio <= 1).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.planner_bench import budget_results
from bench.results import Result
from chat_api.errors import UnreadableQuestionError
from chat_api.evaluation.questions import QUESTIONS_FILE, load_questions
from chat_api.reader.index import ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.linking import link
from chat_api.reader.query import Query
from chat_api.reader.sql import semantic_sql
from chat_api.reader.text import tokens
from chat_api.semantic.model import load_model
from chat_api.sql.data import default_database_path, ensure_database
from chat_api.sql.warehouse import Warehouse


def _threads() -> list[list[str]]:
    folder = QUESTIONS_FILE.parent
    files = sorted(
        [*folder.glob("questions_blind_flights*.yaml"), *folder.glob("questions_fresh*.yaml")]
    )
    return [
        [turn.q for turn in item.all_turns()]
        for path in files
        for item in load_questions(path).items
    ]


def _time_thread(thread: Sequence[str], index: ModelIndex) -> tuple[list[float], list[float]]:
    reading: list[float] = []
    linking: list[float] = []
    previous: Query | None = None
    for question in thread:
        started = time.perf_counter()
        link(tokens(question), index, upper=frozenset())
        linking.append((time.perf_counter() - started) * 1000.0)
        started = time.perf_counter()
        try:
            query = read(question, index, previous=previous)
            semantic_sql(query)
            previous = query
        except UnreadableQuestionError:
            pass
        reading.append((time.perf_counter() - started) * 1000.0)
    return reading, linking


def rule_reader_results(rounds: int = 5) -> list[Result]:
    """Returns: the reading-time figures (module docstring)."""
    model = load_model()
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        index = build_index(model, warehouse.query_raw)
    threads = _threads()
    for thread in threads:  # warm lemminflect's and the linker's caches outside the measurement
        _time_thread(thread, index)
    reading: list[float] = []
    linking: list[float] = []
    for _ in range(rounds):
        for thread in threads:
            ours, base = _time_thread(thread, index)
            reading += ours
            linking += base
    members = sum(len(view.members) for view in model.views.values())
    return budget_results(
        "rule-reader", reading, linking, rounds=rounds, labels=("read_ms", "link_ms"),
        baseline_label="tokenize + link only", extra={"model_members": members},
    )  # fmt: skip
