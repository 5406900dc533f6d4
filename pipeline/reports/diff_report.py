"""``chatscribe diff`` for people: the summary counts, then every changed case in detail."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from pipeline.archive.diff import CaseDiff, RunDiff
from pipeline.runs.scores import PassRateChange

_TEXT_CHARS = 160
_ROWS_SHOWN = 5


def render_diff(console: Console, diff: RunDiff) -> None:
    """Prints ``same N, changed N, new N, missing N`` and a table of the changed cases."""
    counts = diff.counts
    line = ", ".join(f"{state} {n}" for state, n in counts.items())
    regressed = sum(case.regressed for case in diff.cases)
    verdict = f"[red]{regressed} regressed[/]" if regressed else "[green]no regression[/]"
    console.print(f"diff {diff.run_a} → {diff.run_b}: {line}; {verdict}")
    changed = [case for case in diff.cases if case.state != "same"]
    if not changed:
        return
    table = Table(show_lines=True, expand=True)
    for column in ("question / identity", "what changed", "run A", "run B"):
        table.add_column(column, ratio=1 if column != "what changed" else None)
    for case in changed:
        table.add_row(
            f"{case.question}\n[dim]{case.identity or '-'}[/]",
            _what(case),
            _side(case.a),
            _side(case.b),
        )
    console.print(table)


def _what(case: CaseDiff) -> str:
    marks: list[str] = [case.state]
    marks += [
        name
        for name, flag in (
            ("answer", case.answer_changed),
            ("SQL", case.sql_changed),
            ("result", case.result_changed),
        )
        if flag
    ]
    text = "\n".join(marks + case.reasons)
    return f"[red]{text}\nREGRESSED[/]" if case.regressed else text


def _side(side: dict[str, Any] | None) -> str:
    if side is None:
        return "-"
    answer = (side.get("answer") or "-").strip().replace("\n", " ")
    if len(answer) > _TEXT_CHARS:
        answer = answer[: _TEXT_CHARS - 1] + "…"
    rows = side.get("rows")
    shown = json.dumps(rows[:_ROWS_SHOWN], default=str) if rows else "-"
    sql = "\n".join(side.get("sql") or ()) or "-"
    return (
        f"{side.get('status')} · {answer}\n[cyan]{sql}[/]\n"
        f"rows {shown} (total {side.get('total_rows')})"
    )


def render_pass_rates(
    console: Console, run_a: str, run_b: str, changes: Sequence[PassRateChange]
) -> None:
    """Prints the repeated runs' comparison: a verdict line and each case's pass rates."""
    regressed = sum(change.regressed for change in changes)
    verdict = f"[red]{regressed} pass rate(s) fell[/]" if regressed else "[green]no regression[/]"
    console.print(f"diff {run_a} → {run_b} by pass rate over repeated runs: {verdict}")
    table = Table(expand=True)
    for column in ("question", "persona", "run A", "run B", ""):
        table.add_column(column)
    for change in changes:
        table.add_row(
            change.question,
            change.persona or "-",
            _rate(change.a),
            _rate(change.b),
            "[red]REGRESSED[/]" if change.regressed else "",
        )
    console.print(table)


def _rate(value: tuple[int, int] | None) -> str:
    if value is None:
        return "-"
    right, runs = value
    return f"{right}/{runs} ({100 * right / runs:.0f}%)"
