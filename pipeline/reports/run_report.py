"""The run report: a rich table for people, one JSON object per job for programs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table

from pipeline.archive.runs import JobResult, RunThrottling

_STATUS_STYLE = {"completed": "green", "failed": "red", "aborted": "yellow"}
_ANSWER_CHARS = 220


def render_table(
    console: Console,
    results: Sequence[JobResult],
    *,
    title: str,
    accuracy: Mapping[str, bool] | None = None,
) -> None:
    """Prints one row per job.

    Persona, question, status, final answer, SQL, total rows, and, given ``accuracy`` (job id →
    result matched the expected rows, :mod:`pipeline.runs.accuracy`), an ``EX`` column (✓, ✗, or
    - without an expectation).
    """
    table = Table(title=title, show_lines=True, expand=True)
    table.add_column("persona", no_wrap=True)
    table.add_column("question", ratio=2)
    table.add_column("status", no_wrap=True)
    table.add_column("final answer", ratio=3)
    table.add_column("SQL", ratio=3)
    table.add_column("rows", justify="right", no_wrap=True)
    if accuracy:
        table.add_column("EX", justify="center", no_wrap=True)
    for result in results:
        style = _STATUS_STYLE.get(result.status, "")
        status = f"[{style}]{result.status}[/]" if style else result.status
        if result.error:
            status += f"\n{result.error[:80]}"
        cells = [
            result.persona or "-",
            result.question,
            status,
            _answer(result),
            "\n\n".join(result.sql) or "-",
            "\n".join("-" if n is None else f"{n:,}" for n in result.total_rows) or "-",
        ]
        if accuracy:
            hit = accuracy.get(result.job_id)
            cells.append("-" if hit is None else "[green]✓[/]" if hit else "[red]✗[/]")
        table.add_row(*cells)
    console.print(table)


def _answer(result: JobResult) -> str:
    text = (result.final_answer or "").strip()
    if len(text) > _ANSWER_CHARS:
        text = text[: _ANSWER_CHARS - 1] + "…"
    if result.answer_source == "fallback":
        text = f"(no final line; best available) {text}"
    return text or "-"


def summary(results: Sequence[JobResult]) -> str:
    """Returns: ``"36 jobs: 35 completed, 1 failed; 30 with SQL"``-style one-liner."""
    counts = Counter(r.status for r in results)
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    with_sql = sum(1 for r in results if r.sql)
    return f"{len(results)} jobs: {parts}; {with_sql} with SQL"


def throttling_line(throttling: RunThrottling) -> str:
    """Returns: ``"429s absorbed: 37 throttled answers over 21 jobs"`` (or none absorbed)."""
    if not throttling.answers:
        return "429s absorbed: none"
    return (
        f"429s absorbed: {throttling.answers:,} throttled answers over {throttling.jobs:,} jobs"
        " (429, or 503 with Retry-After, waited out without counting an attempt)"
    )


def render_json(results: Sequence[JobResult]) -> str:
    """Returns: one JSON object per job and line (``chatscribe batch --json``)."""
    return "\n".join(json.dumps(r.to_json(), ensure_ascii=False) for r in results)
