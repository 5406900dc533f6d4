"""Which view a question is read in, and its links fitted to that view.

The view is the one that holds the most of the question's links (a dated question scores a view
with a time dimension one link more); a link the view lacks is read as the view's members that
share its words, or refuses, naming it (:mod:`chat_api.reader.interpret` reads the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from chat_api.errors import UnreadableQuestionError
from chat_api.reader.index import ModelIndex, ViewIndex, phrase
from chat_api.reader.linking import Link, members_with_word
from chat_api.reader.query import Query

CONTENT = frozenset({"member", "entity", "value"})
"""Link kinds that carry the model's own words."""


def choose_view(links: Sequence[Link], index: ModelIndex, previous: Query | None) -> str:
    """The view holding most of the question's links (module docstring).

    A question with a date or a year can only be answered by a view with a time dimension, so
    such a view scores one link more; one without is never chosen over one with.
    """
    dated = any(lk.kind in ("calendar", "date") or is_year(lk) for lk in links)
    scores: dict[str, float] = {}
    for name, view in index.views.items():
        scores[name] = sum(weight(lk, view) for lk in links if lk.kind in CONTENT)
        if dated and view.time_dimension and scores[name] > 0:
            scores[name] += 1.0
    if previous is not None:
        scores[previous.view] = scores.get(previous.view, 0) + 0.5
    best = max(scores, key=lambda n: scores[n]) if scores else None
    if best is None or scores[best] <= 0:
        if previous is not None:
            return previous.view
        asks = any(lk.means("order") or lk.means("grain") for lk in links)
        if asks and index.views:
            return next(iter(index.views))
        raise UnreadableQuestionError(
            "I couldn't find anything in the question that the data model has: name a measure "
            "or something to count."
        )
    return best


def fitted(links: Sequence[Link], index: ModelIndex, view: ViewIndex) -> list[Link]:
    """The links read in the chosen view.

    A member phrase the view lacks is read as the view's members that share one of its words
    (the view's "weight" for "parcels weighed"). Any other word the view cannot read refuses,
    naming it: leaving it out would answer another question.

    Raises:
        UnreadableQuestionError: words of the question are in another view only.
    """
    fitted: list[Link] = []
    missing: list[str] = []
    for item in links:
        if item.kind not in CONTENT or weight(item, view) > 0:
            fitted.append(item)
            continue
        words = reversed(phrase(item.text)) if item.kind == "member" else ()
        shared = [m for w in words for m in members_with_word(index, w) if m in view.members]
        if shared:
            fitted.append(replace(item, members=tuple(dict.fromkeys(shared)), exact=False))
        else:
            missing.append(item.text)
    if missing:
        words_ = ", ".join(f"'{w}'" for w in missing)
        raise UnreadableQuestionError(
            f"{words_} and the rest of the question are in different parts of the data model "
            f"({view.name} has no {words_}); ask about one at a time.",
            words=tuple(dict.fromkeys(missing)),
        )
    return fitted


def is_year(item: Link) -> bool:
    """Whether a link is a number that reads as a year (1900-2100, written as digits)."""
    return item.kind == "number" and item.exact and 1900 <= (item.number or 0) <= 2100


def weight(item: Link, view: ViewIndex) -> float:
    """How much a link says for ``view``.

    0 when the view lacks it; whole names count more than guessed ones, a value by how many rows
    hold it, an entity most where it is the view's root.
    """
    exact = 1.0 if item.exact else 0.6
    if item.kind == "member":
        named = item.members[: item.primary or len(item.members)]
        if any(m in view.members for m in named):
            return exact * 1.2
        return 0.6 * (1.2 if any(m in view.members for m in item.members) else 0)
    if item.kind == "entity":
        cubes = [c for v, c in item.entities if v == view.name]
        root = 0.3 if view.view.root in cubes else 0.0
        return exact * (1.5 + root if cubes else 0)
    hits = [h for h in item.values if h.member in view.members]
    return exact * (1.0 + min(1.0, max((h.rows for h in hits), default=0) / 1000)) if hits else 0
