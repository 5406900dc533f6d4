"""The deterministic reader of questions.

Vocabulary, reading, query specs, follow-ups, plans and answer texts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.planner.answers import compose_answer, compose_cannot_answer, vega_spec
    from chat_api.planner.planner import CannotAnswer, Plan, QuerySpec, plan_question
    from chat_api.planner.specs import PlanState, plan_state, spec_from_state
    from chat_api.planner.vocabulary import Vocabulary, load_vocabulary

__all__ = [
    "CannotAnswer",
    "Plan",
    "PlanState",
    "QuerySpec",
    "Vocabulary",
    "compose_answer",
    "compose_cannot_answer",
    "load_vocabulary",
    "plan_question",
    "plan_state",
    "spec_from_state",
    "vega_spec",
]

_EXPORTS: dict[str, str] = {
    "CannotAnswer": "chat_api.planner.planner",
    "Plan": "chat_api.planner.planner",
    "PlanState": "chat_api.planner.specs",
    "QuerySpec": "chat_api.planner.planner",
    "Vocabulary": "chat_api.planner.vocabulary",
    "compose_answer": "chat_api.planner.answers",
    "compose_cannot_answer": "chat_api.planner.answers",
    "load_vocabulary": "chat_api.planner.vocabulary",
    "plan_question": "chat_api.planner.planner",
    "plan_state": "chat_api.planner.specs",
    "spec_from_state": "chat_api.planner.specs",
    "vega_spec": "chat_api.planner.answers",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
