"""The evaluation's report: execution accuracy per category and tag, invented numbers, RLS."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chat_api.evaluation.questions import CATEGORIES
from chat_api.evaluation.runner import TurnOutcome


@dataclass(frozen=True)
class CategoryScore:
    """One line of the report: ``correct`` of ``total`` turns."""

    name: str
    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        """Returns: the execution accuracy, 0.0 to 1.0 (0.0 without turns)."""
        return self.correct / self.total if self.total else 0.0

    def as_list(self) -> list[float]:
        """Returns: ``[correct, total, accuracy]``."""
        return [self.correct, self.total, round(self.accuracy, 4)]


@dataclass(frozen=True)
class EvalReport:
    """The whole evaluation.

    Attributes:
        categories: Per category, in :data:`CATEGORIES` order (categories without turns left out).
        total: All turns.
        by_tag: Per tag (``base``, ``fresh``).
        invented_numbers: Answers with numbers where the truth is a refusal.
        rows_across_rls: Result rows of an origin the persona may not see.
        outcomes: Every turn.
    """

    categories: tuple[CategoryScore, ...]
    total: CategoryScore
    by_tag: tuple[CategoryScore, ...]
    invented_numbers: int
    rows_across_rls: int
    outcomes: tuple[TurnOutcome, ...]

    def failures(self) -> list[TurnOutcome]:
        """Returns: the turns scored wrong, in order."""
        return [o for o in self.outcomes if not o.verdict.correct]

    def as_json(self) -> dict[str, Any]:
        """Returns: the report as a JSON-ready object (``--json``)."""
        return {
            "categories": {c.name: c.as_list() for c in self.categories},
            "tags": {c.name: c.as_list() for c in self.by_tag},
            "total": [self.total.correct, self.total.total, round(self.total.accuracy, 4)],
            "invented_numbers": self.invented_numbers,
            "rows_across_rls": self.rows_across_rls,
            "failures": [
                {"id": o.item_id, "turn": o.turn, "category": o.category, "tag": o.tag,
                 "question": o.question, "answer": o.answer[:300]}
                for o in self.failures()
            ],
        }  # fmt: skip


def _cost(outcomes: Sequence[TurnOutcome]) -> str:
    """Returns: seconds and language-model tokens per question, and the readers that read."""
    count = max(len(outcomes), 1)
    seconds = sum(o.seconds for o in outcomes) / count
    tokens = sum(o.tokens for o in outcomes) / count
    readers = Counter(o.reader for o in outcomes)
    read_by = ", ".join(f"{name} {n}" for name, n in sorted(readers.items()))
    return (
        f"seconds per question: {seconds:.2f}; tokens per question: {tokens:.0f}; "
        f"read by: {read_by or 'none'}"
    )


def _score(name: str, outcomes: Sequence[TurnOutcome]) -> CategoryScore:
    return CategoryScore(name, sum(o.verdict.correct for o in outcomes), len(outcomes))


def build_report(outcomes: Sequence[TurnOutcome]) -> EvalReport:
    """Returns: the report of the scored turns."""
    categories = tuple(
        _score(c, [o for o in outcomes if o.category == c])
        for c in CATEGORIES
        if any(o.category == c for o in outcomes)
    )
    tags = sorted({o.tag for o in outcomes})
    return EvalReport(
        categories=categories,
        total=_score("total", outcomes),
        by_tag=tuple(_score(t, [o for o in outcomes if o.tag == t]) for t in tags),
        invented_numbers=sum(o.verdict.invented for o in outcomes),
        rows_across_rls=sum(o.verdict.rows_across_rls for o in outcomes),
        outcomes=tuple(outcomes),
    )


def render_text(report: EvalReport, *, failures: bool = True) -> str:
    """Returns: the per-category table, the totals and (optionally) the failed phrasings."""
    lines = [f"{'category':<12} {'correct':>7} {'total':>5} {'accuracy':>8}"]
    for c in (*report.categories, report.total, *report.by_tag):
        name = c.name if c in report.categories or c is report.total else f"tag:{c.name}"
        lines.append(f"{name:<12} {c.correct:>7} {c.total:>5} {c.accuracy:>8.1%}")
    lines.append(f"invented numbers: {report.invented_numbers}")
    lines.append(f"rows across row-level security: {report.rows_across_rls}")
    lines.append(_cost(report.outcomes))
    if failures:
        lines.append("failed:")
        lines += [
            f"  {o.item_id}#{o.turn} [{o.category}] {o.question} -> {o.answer[:120]!r}"
            for o in report.failures()
        ]
    return "\n".join(lines)
