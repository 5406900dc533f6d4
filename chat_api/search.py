"""Metadata search: the members of the views a user may see, ranked against a search query.

The result has the hosted metadata tool's shape (``field-notes.md`` § "Tool names and
payloads")::

    {"cubes": [{"name": "flights", "type": "view", "title": ..., "description": ...,
                "members": [{"name": "flights.carrier", "title": ..., "description": ...,
                             "type": "string"},
                            {"name": "flights.count", ..., "type": "number",
                             "aggType": "count"}]}],
     "searchQuery": "..."}

Ranking is token overlap: the query and each member's name, title and description are split
into lower-case words (``avg_dep_delay`` -> ``avg dep delay``), plurals folded (``flights`` ->
``flight``), a few analytics synonyms mapped (``average`` -> ``avg``), and stop words dropped.
A shared word scores its weight (``1 + ln(members / (1 + members holding it))``, so ``delay``
outweighs ``avg``) times 3 in the name, 2 in the title, 1 in the description. Members scoring
at least ``RELATIVE_CUTOFF`` of their view's best appear best first, and views scoring at least
that share of the best view; a view whose own name or title matches but none of whose members
do lists all its visible members. An empty query lists everything visible.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from chat_api.semantic.model import Member, ResolvedView, SemanticModel
from chat_api.sql.policies import UserContext, resolve_access

NAME_WEIGHT = 3
TITLE_WEIGHT = 2
DESCRIPTION_WEIGHT = 1
RELATIVE_CUTOFF = 0.3

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "is",
        "it", "me", "of", "on", "or", "per", "show", "the", "to", "was", "were", "what", "which",
        "who", "with", "give", "list", "tell", "there", "their", "each", "all",
    }
)  # fmt: skip
_SYNONYMS = {
    "average": "avg", "mean": "avg", "sum": "total", "minimum": "min", "lowest": "min",
    "smallest": "min", "maximum": "max", "highest": "max", "largest": "max", "biggest": "max",
    "many": "count", "departure": "dep", "arrival": "arr", "airline": "carrier",
    "unique": "distinct", "different": "distinct", "destination": "dest", "late": "delay",
    "delayed": "delay",
    "aircraft": "plane", "airplane": "plane", "temperature": "temp", "humidity": "humid",
    "visibility": "visib", "precipitation": "precip", "rain": "precip",
}  # fmt: skip


def search_members(model: SemanticModel, query: str, user: UserContext) -> dict[str, Any]:
    """Search the views ``user`` may query for members matching ``query``.

    Args:
        model: The loaded semantic model.
        query: Free text (``"average departure delay by airline"``); empty lists everything.
        user: Whose access policies decide which views and members appear.

    Returns:
        ``{"cubes": [...], "searchQuery": query}`` as in the module docstring; views ordered by
        their best member score, then by name; views without a hit omitted.
    """
    words = tokens(query)
    weights = _word_weights(model, words)
    ranked: list[tuple[float, str, dict[str, Any]]] = []
    for view in model.views.values():
        access = resolve_access(model, view.name, user)
        members = [m for m in view.members if m.name in access.visible]
        entry = _rank_view(view, members, weights) if access.allowed else None
        if entry is not None:
            ranked.append((entry[0], view.name, entry[1]))
    best = max((item[0] for item in ranked), default=0.0)
    ranked = [item for item in ranked if item[0] >= best * RELATIVE_CUTOFF]
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return {"cubes": [item[2] for item in ranked], "searchQuery": query}


def tokens(text: str) -> set[str]:
    """The normalised words of ``text`` (see the module docstring)."""
    words = set()
    for word in _WORD.findall(text.lower().replace("_", " ")):
        if word in _STOP_WORDS:
            continue
        word = _SYNONYMS.get(word, word)
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = _SYNONYMS.get(word[:-1], word[:-1])
        words.add(word)
    return words


def score(weights: Mapping[str, float], *, name: str, title: str, description: str) -> float:
    """How well the query words (with their weights) match one member or view."""
    return (
        NAME_WEIGHT * _overlap(weights, name)
        + TITLE_WEIGHT * _overlap(weights, title)
        + DESCRIPTION_WEIGHT * _overlap(weights, description)
    )


def _overlap(weights: Mapping[str, float], text: str) -> float:
    return sum(weights[word] for word in tokens(text) if word in weights)


def _word_weights(model: SemanticModel, words: set[str]) -> dict[str, float]:
    """Inverse document frequency over all members: rare words weigh more than ``avg``."""
    documents = [
        tokens(f"{m.name} {m.title} {m.description}")
        for view in model.views.values()
        for m in view.members
    ]
    total = len(documents)
    frequency = {word: sum(word in doc for doc in documents) for word in words}
    return {word: 1.0 + math.log(total / (1 + frequency[word])) for word in words}


def _rank_view(
    view: ResolvedView, members: list[Member], weights: Mapping[str, float]
) -> tuple[float, dict[str, Any]] | None:
    if not members:
        return None
    if not weights:
        return 0.0, _view_entry(view, members)
    scored = [
        (score(weights, name=m.name, title=m.title, description=m.description), m) for m in members
    ]
    hits = sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: -pair[0])
    best = hits[0][0] if hits else 0.0
    hits = [pair for pair in hits if pair[0] >= best * RELATIVE_CUTOFF]
    view_score = score(weights, name=view.name, title=view.title, description="")
    if hits:
        return best + view_score, _view_entry(view, (m for _, m in hits))
    if view_score:
        return view_score, _view_entry(view, members)
    return None


def _view_entry(view: ResolvedView, members: Iterable[Member]) -> dict[str, Any]:
    return {
        "name": view.name,
        "type": "view",
        "title": view.title,
        "description": view.description,
        "members": [_member_entry(member) for member in members],
    }


def _member_entry(member: Member) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": member.qualified,
        "title": member.title,
        "description": member.description,
        "type": member.type,
    }
    if member.agg_type is not None:
        entry["aggType"] = member.agg_type
    return entry
