"""Asking the agent a question in-process and reading its answer, for the issue 11 tests.

Expected values in those tests come from hand-written DuckDB SQL on the warehouse tables
(``hand``), never from the agent's own SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.planner.specs import PlanState
from chat_api.sql.policies import UserContext
from models import wire


@dataclass(frozen=True)
class Asked:
    """One answered turn: the final answer, the Semantic SQL and rows of each svcSqlApi call."""

    turn: Turn
    answer: str
    sql: list[str]
    results: list[dict[str, Any]]

    @property
    def rows(self) -> list[list[Any]]:
        """Rows of the last svcSqlApi result."""
        return [list(r) for r in self.results[-1]["data"]] if self.results else []

    @property
    def columns(self) -> list[str]:
        return [c["name"] for c in self.results[-1]["schema"]] if self.results else []

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    @property
    def state(self) -> PlanState | None:
        return self.turn.plan_state


def ask(
    toolbox: Toolbox,
    question: str,
    *,
    user: UserContext | None = None,
    previous: PlanState | None = None,
) -> Asked:
    request = TurnRequest(
        chat_id="chat-analyst", question=question, user=user or UserContext(),
        memory_id="mem", previous=previous, development_mode=False,
    )  # fmt: skip
    turn = Turn(request, toolbox=toolbox)
    lines = list(turn.lines())
    sql: list[str] = []
    results: list[dict[str, Any]] = []
    for line in lines:
        call = line.get("toolCall")
        if call and call.get("name") == wire.TOOL_SQL and "result" in call:
            sql.append(json.loads(call["input"])["sqlQuery"])
            result = json.loads(call["result"])
            if "data" in result:
                results.append(result)
    return Asked(turn, turn.answer or "", sql, results)


def hand(toolbox: Toolbox, sql: str) -> list[tuple[Any, ...]]:
    """Runs hand-written DuckDB SQL on the warehouse tables."""
    return list(toolbox.warehouse.query_raw(sql))


def one(toolbox: Toolbox, sql: str) -> Any:
    ((value,),) = hand(toolbox, sql)
    return value
