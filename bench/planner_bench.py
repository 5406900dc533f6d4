"""Planning time per question (issue 11): the deterministic reader must stay under 20 ms.

Questions: every turn of the evaluation set (``chat_api/evaluation/questions*.yaml``), follow-ups
planned with their thread's previous query, ``rounds`` times. Ours: the time of
:func:`chat_api.planner.planner.plan_question` per question (p95 and max in the details).
Baseline, same run, same questions, alternating: the time to just tokenize and scan the question
against the vocabulary (:func:`chat_api.planner.vocabulary.scan`), the least a reader must do.
A second figure puts the p95 against the 20 ms budget (target ratio <= 1).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Final

from bench.results import Result, Target, percentile
from chat_api.evaluation.questions import FRESH_FILE, QUESTIONS_FILE, load_questions
from chat_api.planner.planner import Plan, plan_question
from chat_api.planner.specs import QuerySpec
from chat_api.planner.vocabulary import Vocabulary, load_vocabulary, scan
from chat_api.sql.data import default_database_path, ensure_database
from chat_api.sql.warehouse import Warehouse

BUDGET_MS: Final = 20.0


def _threads() -> list[list[str]]:
    threads: list[list[str]] = []
    for path in (QUESTIONS_FILE, FRESH_FILE):
        for item in load_questions(path).items:
            threads.append([turn.q for turn in item.all_turns()])
    return threads


def _time_thread(thread: Sequence[str], vocabulary: Vocabulary) -> tuple[list[float], list[float]]:
    planned: list[float] = []
    scanned: list[float] = []
    previous: QuerySpec | None = None
    for question in thread:
        started = time.perf_counter()
        scan(question, vocabulary)
        scanned.append((time.perf_counter() - started) * 1000.0)
        started = time.perf_counter()
        outcome = plan_question(question, vocabulary=vocabulary, previous=previous)
        planned.append((time.perf_counter() - started) * 1000.0)
        previous = outcome.spec if isinstance(outcome, Plan) else previous
    return planned, scanned


def planner_results(rounds: int = 5) -> list[Result]:
    """Returns: the planning-time figures (module docstring)."""
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        vocabulary = load_vocabulary(warehouse.query_raw)
    threads = _threads()
    for thread in threads:  # warm caches (inflect, holidays, lexicon) outside the measurement
        _time_thread(thread, vocabulary)
    planned: list[float] = []
    scanned: list[float] = []
    for _ in range(rounds):
        for thread in threads:
            ours, base = _time_thread(thread, vocabulary)
            planned += ours
            scanned += base
    return budget_results(
        "planner", planned, scanned, rounds=rounds, labels=("plan_ms", "scan_ms"),
        baseline_label="tokenize + scan only",
    )  # fmt: skip


def budget_results(
    name: str,
    ours: list[float],
    base: list[float],
    *,
    rounds: int,
    labels: tuple[str, str],
    baseline_label: str,
    extra: dict[str, object] | None = None,
) -> list[Result]:
    """The two figures of a per-question time against the 20 ms budget.

    Args:
        name: Figure prefix (``planner`` gives ``planner-p95`` and ``planner-budget``).
        ours: Milliseconds per question of ours, all rounds.
        base: Milliseconds per question of the baseline, all rounds.
        rounds: Rounds measured (the question count is ``len(ours) // rounds``).
        labels: Detail keys of ours and the baseline (``plan_ms``, ``scan_ms``).
        baseline_label: What the baseline is.
        extra: Further details (the model's size).

    Returns:
        ``<name>-p95`` (p95 against the baseline's p95) and ``<name>-budget`` (p95 against
        the budget, target ratio <= 1); details hold p50, p95 and max of both.
    """
    p95, base_p95 = percentile(ours, 95), percentile(base, 95)
    details = {
        "questions": len(ours) // rounds, "rounds": rounds, **(extra or {}),
        labels[0]: {"p50": statistics.median(ours), "p95": p95, "max": max(ours)},
        labels[1]: {"p50": statistics.median(base), "p95": base_p95, "max": max(base)},
    }  # fmt: skip
    return [
        Result(f"{name}-p95", p95, base_p95, "ms", baseline_label, details=details),
        Result(
            f"{name}-budget",
            p95,
            BUDGET_MS,
            "ms",
            "the 20 ms budget per question",
            target=Target("<=", 1.0),
            details=details,
        ),
    ]
