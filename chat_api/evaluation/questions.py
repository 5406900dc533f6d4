"""The evaluation's questions file: personas, and items of one or more turns with their truths.

Format (YAML)::

    personas:
      analyst: {}
      jfk: {attributes: {origin: JFK}, sees: {origin: JFK}}
    items:
      - {id: count-01, category: count, q: "How many flights left Newark in June?",
         truth: {value: count, where: {origin: EWR, month: 6}}}
      - id: followup-01
        category: followup
        persona: jfk
        turns:
          - {q: "...", truth: {...}}
          - {q: "...", truth: {...}}

``attributes`` are the ``sessionSettings.userAttributes`` of the persona; ``sees`` is the part of
the flights the access policy lets it see, as a truth ``where`` mapping (chat_api.evaluation.truth);
``forbidden`` maps a column-name fragment to values the persona must never get in a result row
(any model). A truth with ``sql`` (``{kind: value|rows|ranking, sql: ...}``) is computed by running
hand-written SQL on the warehouse (``docs/evaluation.md``, "Any model").
A follow-up item's turns run in order on one thread. ``tag`` marks a set (``fresh``: phrasings
written after the agent changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

CATEGORIES = (
    "count", "average", "ranking", "filter", "comparison", "ratio", "time_grain", "join",
    "followup", "rls", "refusal", "percentile", "threshold", "top_per_group", "arithmetic",
    "negation",
)  # fmt: skip
QUESTIONS_FILE = Path(__file__).resolve().parent / "questions.yaml"
FRESH_FILE = Path(__file__).resolve().parent / "questions_fresh.yaml"


class Persona(BaseModel):
    """Who asks: user attributes and the flights they can see."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    attributes: dict[str, str] = Field(default_factory=dict)
    sees: dict[str, Any] | None = None
    forbidden: dict[str, list[str]] = Field(default_factory=dict)


class EvalTurn(BaseModel):
    """One question with its truth mapping."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    q: str
    truth: dict[str, Any]


class EvalItem(BaseModel):
    """One item: a question (``q`` + ``truth``) or a thread of ``turns``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    category: str
    persona: str = "analyst"
    tag: str = "base"
    q: str | None = None
    truth: dict[str, Any] | None = None
    turns: tuple[EvalTurn, ...] = ()

    @model_validator(mode="after")
    def _one_shape(self) -> EvalItem:
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.id}: unknown category {self.category!r}")
        if (self.q is None) == (not self.turns) or (self.q is None) != (self.truth is None):
            raise ValueError(f"{self.id}: give q and truth, or turns")
        return self

    def all_turns(self) -> tuple[EvalTurn, ...]:
        """Returns: the turns, a single question being one turn."""
        if self.q is not None and self.truth is not None:
            return (EvalTurn(q=self.q, truth=self.truth),)
        return self.turns


class QuestionSet(BaseModel):
    """A questions file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    personas: dict[str, Persona]
    items: tuple[EvalItem, ...]

    @model_validator(mode="after")
    def _known_personas(self) -> QuestionSet:
        ids = [item.id for item in self.items]
        if len(ids) != len(set(ids)):
            raise ValueError("item ids must be unique")
        for item in self.items:
            if item.persona not in self.personas:
                raise ValueError(f"{item.id}: unknown persona {item.persona!r}")
        return self


def load_questions(path: Path = QUESTIONS_FILE, *, tag: str | None = None) -> QuestionSet:
    """Reads a questions file.

    Args:
        path: The YAML file (module docstring).
        tag: When given, every item gets this tag (the fresh phrasings file uses ``fresh``).

    Returns:
        The validated set.

    Raises:
        pydantic.ValidationError: A malformed file (names the item).
        OSError: The file cannot be read.
    """
    raw: Mapping[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    found = QuestionSet.model_validate(raw)
    if tag is not None:
        items = tuple(item.model_copy(update={"tag": tag}) for item in found.items)
        found = found.model_copy(update={"items": items})
    return found
