"""Answers for comparisons and shares (issue 11, points 2 and 3).

- :func:`comparison_sentence`: both sides' values and which is larger ("JFK: 12.11 minutes,
  LGA: 10.35 minutes; JFK is higher by 1.76 minutes.");
- :func:`share_answer`: a share in percent with its rule and denominator ("2.45% of the 336,776
  flights ... (8,255 flights)");
- :func:`cancellation_note`: the rule behind the model's cancellation rate.

Pure functions over plans and result records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_api.planner.answers import format_value, row_label
from chat_api.planner.members import COUNT_LABELS, MEASURES, column_name
from chat_api.planner.plans import Plan
from chat_api.planner.specs import QuerySpec

CANCELLED_RULE = (
    "A flight counts as cancelled when it has no actual departure time; the rate is cancelled "
    "flights out of all flights asked about, cancelled ones included"
)


def comparison_sentence(plan: Plan, records: Sequence[dict[str, Any]]) -> str:
    """Describes a comparison's sides.

    Returns:
        The sides with their values and which is larger, or ``""`` with fewer than two valued
        sides.
    """
    member = plan.spec.measures[0]
    name = column_name(member)
    valued = [
        (row_label(plan, r), r[name]) for r in records if isinstance(r.get(name), int | float)
    ]
    if len(valued) < 2:
        return ""
    label = MEASURES[member].label
    sides = "; ".join(f"{side}: {format_value(member, v, unit=True)}" for side, v in valued)
    ordered = sorted(valued, key=lambda item: item[1], reverse=True)
    (top, top_value), (second, second_value) = ordered[0], ordered[1]
    where = "".join(f" {c}" for c in plan.conditions if not c.startswith(_SIDE_PREFIXES))
    text = f"Comparing the {label}{where}: {sides}."
    if top_value == second_value:
        return text + f" {top} and {second} are equal."
    word = "more" if member in COUNT_LABELS else "higher"
    gap = format_value(member, top_value - second_value, unit=True)
    verb = "has more" if word == "more" else "is higher"
    return text + f" **{top}** {verb} ({gap} {word} than {second})."


_SIDE_PREFIXES = ("for ", "from ", "to ", "in ", "at ", "with ")


def cancellation_note(spec: QuerySpec, record: dict[str, Any] | None) -> str:
    """Returns: the cancellation rule with the denominator of a one-row answer."""
    if record is None or "count" not in record or "cancelled_count" not in record:
        return CANCELLED_RULE + "."
    total, cancelled = record.get("count"), record.get("cancelled_count")
    if isinstance(total, int) and isinstance(cancelled, int):
        return f"{CANCELLED_RULE}: {cancelled:,} cancelled of {total:,} flights."
    return CANCELLED_RULE + "."


def share_answer(
    plan: Plan,
    part: Sequence[dict[str, Any]],
    whole: Sequence[dict[str, Any]],
    part_words: Sequence[str],
) -> str:
    """Writes a share's answer from the part's and the whole's counts.

    Args:
        plan: The share's plan (its conditions describe the whole).
        part: Records of the part query (``count`` per group).
        whole: Records of the whole query.
        part_words: The part's conditions in words (``"with arrival delay over 15 minutes"``).

    Returns:
        One sentence for a single share, or a sentence and a table per group.
    """
    where = "".join(f" {c}" for c in plan.conditions)
    said = " and ".join(part_words)
    dims = [column_name(d) for d in plan.spec.dimensions]
    keyed = {tuple(r.get(d) for d in dims): r.get("count") or 0 for r in part}
    rule = f"Share = flights {said} ÷ all flights{where or ''} (cancelled flights included)."
    if not dims:
        total = int((whole[0] if whole else {}).get("count") or 0)
        count = int(keyed.get((), 0))
        if total == 0:
            return f"No flights{where} matched, so there is no share."
        return (
            f"{100.0 * count / total:.2f}% of the {total:,} flights{where} were flights {said}: "
            f"{count:,} flights. {rule}"
        )
    lines = [
        "| " + " | ".join([*dims, "part", "all", "share (%)"]) + " |",
        "|---" * (len(dims) + 3) + "|",
    ]
    groups = []
    for record in whole:
        key = tuple(record.get(d) for d in dims)
        total = int(record.get("count") or 0)
        count = int(keyed.get(key, 0))
        groups.append((key, count, total, 100.0 * count / total if total else -1.0))
    lowest_first = bool(plan.spec.order) and plan.spec.order[0][1] == "asc"
    groups.sort(key=lambda g: g[3], reverse=not lowest_first)
    for key, count, total, share in groups[: plan.spec.limit]:
        shown = f"{share:.2f}" if share >= 0 else "n/a"
        cells = [*(str(k) for k in key), f"{count:,}", f"{total:,}", shown]
        lines.append("| " + " | ".join(cells) + " |")
    return (
        f"Share of flights {said}{where}, per {', '.join(dims)}:\n\n"
        + "\n".join(lines)
        + f"\n\n{rule}"
    )
