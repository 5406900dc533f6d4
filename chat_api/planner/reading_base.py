"""What a reading is made of, and the cursor the reader's passes share.

A question's mentions (:func:`chat_api.planner.vocabulary.scan`) are read by
:mod:`chat_api.planner.reading`
into a :class:`Reading`: the measures asked for (:class:`Ask`), the breakdowns
(:class:`Breakdown`) and the conditions (:class:`Condition`). :class:`Cursor` holds the mentions,
the ones consumed so far and the :class:`Draft` being filled; the passes of
:mod:`chat_api.planner.reading_conditions` and :mod:`chat_api.planner.reading` extend it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Literal

from chat_api.planner.lexicon import Word
from chat_api.planner.members import METRICS
from chat_api.planner.vocabulary import Mention, Number, Value, Vocabulary

Operator = Literal["equals", "notEquals", "in", "gt", "gte", "lt", "lte"]
Direction = Literal["asc", "desc"]
Scalar = bool | str | int | float

COUNTABLE = frozenset({
    "flights", "planes", "airlines", "airports", "destinations", "origins", "manufacturers",
    "models", "observations",
})  # fmt: skip
"""Nouns that can be counted ("how many planes")."""


class UnanswerableError(Exception):
    """A question that cannot be mapped without guessing; ``reason`` says why, for the user."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class Ask:
    """A requested measure.

    Attributes:
        subject: A metric key of ``chat_api.planner.planner.METRICS`` (``"arr_delay"``), or a noun
        to
            count (``"flights"``, ``"destinations"``) when ``agg`` is ``"count"``.
        agg: ``"avg"``, ``"sum"``, ``"min"``, ``"max"``, ``"median"``, ``"count"``, or None when
            not said.
        phrase: The words that asked for it.
        superlative: A superlative right before the metric ("lowest average ..."): a ranking
            direction, or the aggregation when nothing is grouped ("longest flight").
    """

    subject: str
    agg: str | None
    phrase: str
    superlative: Direction | None = None


@dataclass(frozen=True)
class Breakdown:
    """A breakdown asked for: ``noun`` such as ``"airlines"``/``"months"``, and its words."""

    noun: str
    phrase: str


@dataclass(frozen=True)
class Condition:
    """A condition before the view is known.

    Attributes:
        slot: What it constrains: ``carrier``, ``origin``, ``dest``, ``place`` (an airport
            without a role), ``manufacturer``, ``month``, ``year``, ``day``, ``plane_year``, or
            a measured dimension (``arr_delay``, ``distance``, ``seats``, ``temp``...).
        operator: The comparison.
        values: Codes, month numbers, years or amounts (minutes, miles...).
        phrase: The words that asked for it.
    """

    slot: str
    operator: Operator
    values: tuple[Scalar, ...]
    phrase: str


@dataclass(frozen=True)
class Reading:
    """What a question says, not yet mapped onto a view.

    Attributes:
        asks: Measures asked for, in order.
        dims: Breakdowns asked for.
        conds: Conditions asked for.
        rank: ``"desc"``/``"asc"`` from "top", "most", "fewest"; None when not ranked.
        rank_phrase: The words that asked for the ranking.
        limit: Explicit row count ("top 5", "which 3 airlines").
        singular: True for "which <singular noun>", meaning one row when ranked.
        top_default: "top" without a number (ten rows).
        overall: "overall"/"in total": no breakdown.
        lone_agg: An aggregation said without a measure ("and the maximum?"): in a follow-up it
            re-aggregates the previous measure.
        followup: The question opens with a follow-up word ("and", "what about", "now").
        elliptic: Only conditions or a breakdown were said, no measure, count word or
            "flights" ("in july?", "from newark", "by carrier"): in a thread it continues the
            previous query.
        restates: Only a measure of a metric was said, no condition, value or "flights" ("avg
            arr delay", "and the max distance by month"): in a thread it asks that measure of
            the previous query's flights.
        flight_context: Words that only make sense for flights (fly, flights, "to" a place).
        origin_role: A bare "from"/"out of" without a place ("airports it flies from").
        compare: "vs", "compare", "which is busier, X or Y": one row per side.
        compare_explicit: "vs"/"compare" was said (an adjective alone compares only when two
            sides are named).
        compare_hint: What a comparative adjective measures ("busier": ``"flights"``,
            "warmer": ``"temp"``), or ``""``.
        share: "percentage", "share", "rate": a part of the flights asked about.
        bare_delay: "delay" was said without arrival or departure (read as arrival).
        notes: Reasoning gathered while reading.
    """

    asks: tuple[Ask, ...] = ()
    dims: tuple[Breakdown, ...] = ()
    conds: tuple[Condition, ...] = ()
    rank: Direction | None = None
    rank_phrase: str = ""
    limit: int | None = None
    singular: bool = False
    top_default: bool = False
    overall: bool = False
    lone_agg: str | None = None
    followup: bool = False
    elliptic: bool = False
    restates: bool = False
    flight_context: bool = False
    origin_role: bool = False
    compare: bool = False
    compare_hint: str = ""
    compare_explicit: bool = False
    share: bool = False
    bare_delay: bool = False
    notes: tuple[str, ...] = ()


@dataclass
class Draft:
    """The :class:`Reading` while the reader fills it in."""

    asks: list[Ask] = field(default_factory=list)
    dims: list[Breakdown] = field(default_factory=list)
    conds: list[Condition] = field(default_factory=list)
    rank: Direction | None = None
    rank_phrase: str = ""
    limit: int | None = None
    singular: bool = False
    top_default: bool = False
    overall: bool = False
    lone_agg: str | None = None
    followup: bool = False
    elliptic: bool = False
    restates: bool = False
    flight_context: bool = False
    origin_role: bool = False
    compare: bool = False
    compare_hint: str = ""
    compare_explicit: bool = False
    share: bool = False
    bare_delay: bool = False
    notes: list[str] = field(default_factory=list)

    def freeze(self) -> Reading:
        """Returns: the reading as an immutable :class:`Reading`."""
        return replace(
            Reading(**{f.name: getattr(self, f.name) for f in fields(Reading)}),
            asks=tuple(self.asks),
            dims=tuple(self.dims),
            conds=tuple(self.conds),
            notes=tuple(self.notes),
        )


_UNIT_WORDS = {"min": "minutes", "seats": "seats", "seat": "seats"}


def word_of(mention: Mention | None) -> Word | None:
    """Returns: the mention's vocabulary word, or None for a value, a number or nothing."""
    return mention.meaning if mention is not None and isinstance(mention.meaning, Word) else None


def role_of(mention: Mention | None) -> str:
    """Returns: the role of the mention's word (``"metric"``, ``"filler"``...), or ``""``."""
    word = word_of(mention)
    return word.role if word is not None else ""


def said_of(mention: Mention | None) -> str:
    """Returns: the mention's normalised word, or ``""``."""
    return mention.word if mention is not None else ""


def number_of(mention: Mention | None) -> float | None:
    """Returns: the mention's number, or None."""
    if mention is not None and isinstance(mention.meaning, Number):
        return mention.meaning.value
    return None


def unit_of(mention: Mention | None) -> str | None:
    """Returns: the unit the mention names (``"minutes"``, ``"seats"``), or None."""
    word = word_of(mention)
    if word is not None and word.role == "unit":
        return word.key
    return _UNIT_WORDS.get(mention.word) if mention is not None else None


def single_value(meaning: object) -> bool:
    """Returns whether a value names one thing.

    A group ("nyc", "chicago") between "by"/"each" and a noun ("by nyc airport", "each chicago
    airport") leaves it a breakdown, one row per member, with the group as a condition.
    """
    return isinstance(meaning, Value) and len(meaning.values) == 1


def restates(mentions: tuple[Mention, ...], reading: Reading) -> bool:
    """Returns whether only measures of metrics were asked (``Reading.restates``).

    That is, without a condition, a value, a count or "flights".
    """
    return (
        bool(reading.asks)
        and all(ask.subject in METRICS for ask in reading.asks)
        and not (reading.conds or reading.compare or reading.share)
        and not any(
            isinstance(m.meaning, Value) or m.meaning == Word("noun", "flights") for m in mentions
        )
    )


def signs_as_words(question: str) -> str:
    """Returns the question with signs written as words.

    "%" (not after a number) becomes "percent" and ">", "<", ">=", "<=" before a number as "more
    than", "less than", "at least", "at most".
    """
    said = _COMPARISON_SIGN.sub(lambda m: _SIGN_WORDS[m.group(1)], question)
    return _PERCENT_SIGN.sub(" percent ", said)


_PERCENT_SIGN = re.compile(r"(?<![\d.])%")
"""A "%" not after a number is the word "percent" ("% of delta flights that arrived late")."""
_COMPARISON_SIGN = re.compile(r"(?<![-=<>])(>=|<=|>|<)\s*(?=-?\d)")
"""">", "<", ">=", "<=" before a number are said as words ("arr delay > 60"); "jfk->lax" is not."""
_SIGN_WORDS = {">=": " at least ", "<=": " at most ", ">": " more than ", "<": " less than "}


class Cursor:
    """The mentions of one question, which of them are consumed, and the draft reading.

    Args:
        mentions: The question's mentions, in order.
        vocabulary: Values to recognise.
    """

    def __init__(self, mentions: tuple[Mention, ...], vocabulary: Vocabulary) -> None:
        self.ms = mentions
        self.vocabulary = vocabulary
        self.used: set[int] = set()
        self.dim_nouns: set[int] = set()
        self.r = Draft()

    def _at(self, i: int) -> Mention | None:
        return self.ms[i] if 0 <= i < len(self.ms) else None

    def _step(self, i: int, step: int, skip: tuple[str, ...] = ("filler",)) -> int:
        i += step
        while 0 <= i < len(self.ms) and role_of(self.ms[i]) in skip:
            i += step
        return i

    def _note(self, text: str) -> None:
        self.r.notes.append(text)

    def _ranking_said(self) -> bool:
        """Returns whether a ranking was read or a ranking word is said anywhere.

        "*worst* 3 carriers by avg dep delay": "by" then names the ranking's measure, not a
        breakdown.
        """
        return self.r.rank is not None or any(role_of(m) in ("superlative", "top") for m in self.ms)

    def _group_airports(self, word: Word, cue_index: int, i: int) -> Word:
        """Returns the role a group of airports plays for "airports", else ``word``.

        Applies when the group stands before "airports" or right after "in"/"at" ("by chicago
        airport", "which airport in chicago"): destinations unless every member is an origin.
        """
        after = [j for j in range(i + 1, len(self.ms)) if self._said_at(j)]
        groups = [
            m.meaning for m in [*self.ms[cue_index + 1 : i], *(self.ms[j] for j in after)]
            if isinstance(m.meaning, Value) and m.meaning.kind == "airport"
            and len(m.meaning.values) > 1
        ]  # fmt: skip
        if word.key != "airports" or not groups:
            return word
        inside = all(set(g.values) <= self.vocabulary.origins for g in groups)
        return Word("noun", "origins" if inside else "destinations")

    def _said_at(self, j: int) -> bool:
        """Returns: mention ``j`` is a value right after "in"/"at" (no from/to role)."""
        return isinstance(self.ms[j].meaning, Value) and word_of(
            self._at(self._step(j, -1))
        ) == Word("place_role", "at")
