"""Running the evaluation: every item through the agent in-process, scored, per category.

The agent runs as :class:`chat_api.agent.Turn` on the real warehouse and model, no HTTP or Kafka
in between; a follow-up item's turns share one thread (each turn's ``previous`` is the last
answered query, as the thread keeps it). The answer scored is the final answer and the rows of
the ``svcSqlApi`` result (:mod:`chat_api.evaluation.scoring`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.evaluation.questions import EvalItem, Persona, QuestionSet
from chat_api.evaluation.scoring import Answer, Verdict, score
from chat_api.evaluation.truth import compute_truth, sql_truth
from chat_api.planner.specs import PlanState
from chat_api.sql.policies import UserContext
from models import wire

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnOutcome:
    """One scored turn: where it came from, what was asked and answered, and the verdict."""

    item_id: str
    category: str
    tag: str
    turn: int
    question: str
    answer: str
    verdict: Verdict
    reader: str = ""
    tokens: int = 0
    seconds: float = 0.0


def run_items(
    questions: QuestionSet, *, toolbox: Toolbox, categories: Iterable[str] | None = None
) -> Iterator[TurnOutcome]:
    """Runs and scores the items (optionally only some categories).

    Args:
        questions: The set.
        toolbox: The agent's model, vocabulary and warehouse.
        categories: Categories to run; None for all.

    Yields:
        One outcome per turn, in file order.
    """
    wanted = set(categories) if categories is not None else None
    for item in questions.items:
        if wanted is not None and item.category not in wanted:
            continue
        yield from _run_item(item, questions.personas[item.persona], toolbox=toolbox)


def _run_item(item: EvalItem, persona: Persona, *, toolbox: Toolbox) -> Iterator[TurnOutcome]:
    user = UserContext(attributes=dict(persona.attributes))
    chat_id = f"eval-{item.id}-{uuid.uuid4().hex[:8]}"
    previous: PlanState | None = None
    for index, turn_spec in enumerate(item.all_turns()):
        if "sql" in turn_spec.truth:
            truth = sql_truth(turn_spec.truth, toolbox.warehouse.query_raw)
        else:
            truth = compute_truth(turn_spec.truth, sees=persona.sees)
        request = TurnRequest(
            chat_id=chat_id, question=turn_spec.q, user=user, memory_id=chat_id,
            previous=previous, development_mode=False,
        )  # fmt: skip
        turn = Turn(request, toolbox=toolbox)
        started = time.perf_counter()
        lines = list(turn.lines())
        seconds = time.perf_counter() - started
        answer = answer_of(turn, lines)
        previous = turn.plan_state or previous
        verdict = score(answer, truth, sees=persona.sees, forbidden=persona.forbidden)
        logger.debug("eval turn item=%s turn=%d correct=%s", item.id, index, verdict.correct)
        usage = lines[-1].get("usage") or {}
        yield TurnOutcome(
            item.id, item.category, item.tag, index, turn_spec.q, answer.text, verdict,
            reader=turn.reader, tokens=int(usage.get("totalTokens", 0)), seconds=seconds,
        )  # fmt: skip


def answer_of(turn: Turn, lines: list[dict[str, Any]]) -> Answer:
    """Returns: the final answer and the ``svcSqlApi`` result rows of a finished turn."""
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    for line in lines:
        call = line.get("toolCall")
        if not call or call.get("name") != wire.TOOL_SQL or "result" not in call:
            continue
        result = json.loads(call["result"])
        columns = tuple(str(c["name"]) for c in result.get("schema", []))
        rows = tuple(tuple(row) for row in result.get("data", []))
    return Answer(turn.answer or "", answered=turn.answered, columns=columns, rows=rows)
