"""Linking a question's words to the model, the data and the grammar.

The question is cut into the phrases that explain most of it (a phrase of n words scores n²,
a partial or corrected word less; dynamic programming over the cuts); at one position a data
value beats a member, a member an entity, an entity a grammar word (the model's own words come
first). A
word that links to nothing is passed over when it is a function word, a verb form or an adverb
(:data:`chat_api.reader.words.FUNCTION_WORDS`, lemminflect's parts of speech); a close spelling
of a model word is corrected (rapidfuzz); any other word is *unknown* and the reader refuses,
naming it.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz, process

from chat_api.reader.index import ModelIndex, ValueHit
from chat_api.reader.text import Token, is_base_verb, is_inflected_verb, parts_of_speech
from chat_api.reader.words import (
    AGGREGATIONS,
    ARITHMETIC,
    AUXILIARIES,
    CALENDAR_MONTHS,
    CHANGES,
    COMPARATORS,
    COMPARISONS,
    CONTENT_ADVERBS,
    FOLLOW_UPS,
    FUNCTION_WORDS,
    GRAINS,
    GROUPINGS,
    HALVES,
    MONTH_SHORT,
    NEGATIONS,
    NOUN_MARKERS,
    ORDERINGS,
    SHARES,
    UNIT_OF_TITLE,
    UNITS,
    UNLINKED_FILLERS,
    VERB_MARKERS,
    WEEKDAY_MARKERS,
    WEEKDAY_SHORT,
    WEEKDAYS,
    WEEKEND,
    WHOLES,
    WORKDAYS,
    Word,
)

FUZZY_SCORE = 86
FEW_VALUES = 100
"""Most distinct values of a dimension whose English-word short forms link in lower case."""
_CONNECTORS = frozenset({"of", "the", "a", "an"})
"""Words inside a phrase that a member's name may leave out ("months of inventory")."""
_GRAMMAR: list[dict[str, Word]] = [
    COMPARATORS, ARITHMETIC, NEGATIONS, GROUPINGS, AGGREGATIONS, ORDERINGS, GRAINS, SHARES,
    COMPARISONS, FOLLOW_UPS, WHOLES, CHANGES,
]  # fmt: skip
"""Grammar tables in the order their meanings are tried: arithmetic ("less", "over") applies
only between two measures, so it is tried before ordering and comparing take the word."""
GRAMMAR_WORDS = tuple(
    sorted({w for table in _GRAMMAR for w in table if " " not in w and len(w) >= 4})
)
"""Single grammar words a misspelling may be corrected to ("wich" -> "which")."""
GRAMMAR_LONGEST = max(len(phrase.split()) for table in _GRAMMAR for phrase in table)
"""Words in the longest grammar phrase ("no less than")."""


@dataclass(frozen=True)
class Link:
    """A span of the question and what it means.

    Attributes:
        kind: ``member``, ``entity``, ``value``, ``grammar``, ``number``, ``calendar``,
            ``date``, ``unit`` or ``unknown``.
        start, end: Token positions ``[start, end)``.
        text: The words as written.
        members: For ``member``: candidate members (``view.member``).
        entities: For ``entity``: candidate ``(view, cube)`` pairs.
        values: For ``value``: candidate hits.
        words: For ``grammar``: every table row the phrase is (one phrase may be several).
        number: For ``number``/``unit``: the value or factor.
        calendar: For ``calendar``/``date``: ``{"part": values}`` or ``{"year": 2013}``.
        exact: The phrase matched a whole name (not one word of it, not a correction).
        primary: For ``member``: how many of ``members`` the phrase names whole; the others
            only have it as one word ("weight" names ``weight`` and also ``gross_weight``,
            which a view without ``revenue`` may use). 0: all of them.
    """

    kind: str
    start: int
    end: int
    text: str
    members: tuple[str, ...] = ()
    entities: tuple[tuple[str, str], ...] = ()
    values: tuple[ValueHit, ...] = ()
    words: tuple[Word, ...] = ()
    number: float | None = None
    unit: str = ""
    calendar: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    exact: bool = True
    primary: int = 0

    def means(self, kind: str, value: str | None = None) -> bool:
        """Whether this is a grammar link of ``kind`` (and ``value``)."""
        return any(w.kind == kind and (value is None or w.value == value) for w in self.words)


def link(tokens: Sequence[Token], index: ModelIndex, *, upper: frozenset[str]) -> list[Link]:
    """Links every token (module docstring).

    Args:
        tokens: The question's tokens.
        index: The model's index.
        upper: Words written in capitals or capitalised inside the question (a code such as
            ``US`` or ``AS``, or a short form such as ``Summit`` that is also an English word,
            links only when capitalised).

    Returns:
        Links in question order, passed-over words left out.
    """
    best: list[tuple[float, tuple[Link, ...]]] = [(0.0, ())] * (len(tokens) + 1)
    for i in range(len(tokens) - 1, -1, -1):
        options = []
        for item in _candidates(tokens, i, index, upper):
            end = item.end if item is not None else i + 1
            score, rest = best[end]
            options.append((_score(item) + score, (item, *rest) if item is not None else rest))
        best[i] = max(options, key=lambda option: option[0])
    return list(best[0][1])


def _score(item: Link | None) -> float:
    """How much of the question a link explains.

    A phrase of n words scores n², so "total" + "cargo weight" (1 + 4) beats "total cargo" +
    "weight" (4 + a partial 0.45). A partial or corrected phrase scores under half, so exact
    words win a tie ("daily" + "units" over the "daily units" of "average daily units").
    An unknown word costs 1.
    """
    if item is None:
        return 0.0
    if item.kind == "unknown":
        return -1.0
    size = item.end - item.start
    if not item.exact and item.kind in ("member", "entity", "value", "grammar"):
        return 0.45 * size * size
    return float(size * size)


def _candidates(
    tokens: Sequence[Token], i: int, index: ModelIndex, upper: frozenset[str]
) -> list[Link | None]:
    """The readings that start at token ``i``.

    Every phrase of the tables, longest first, then the word alone (None: passed over).
    """
    special = _special(tokens, i)
    if special is not None:
        return [special]
    unit_next = i + 1 < len(tokens) and tokens[i + 1].lemma in UNITS
    if tokens[i].text == "an" and not unit_next:
        return [None]  # "an hour" is 1 hour; "an average rate" is an article
    found: list[Link | None] = []
    for size in range(min(max(index.longest, GRAMMAR_LONGEST), len(tokens) - i), 0, -1):
        span = _span(tokens[i : i + size], i, index, upper)
        if span is not None:
            found.append(span)
    if found and found[-1] is not None and found[-1].end == i + 1:
        return found
    after_number = i > 0 and tokens[i - 1].kind == "number"
    in_unit = i > 0 and tokens[i - 1].text == "in"  # "lead time in days", "gap in dollars"
    if (after_number or in_unit) and (tokens[i].lemma in UNITS or tokens[i].text in UNITS):
        unit, factor = UNITS.get(tokens[i].lemma) or UNITS[tokens[i].text]
        return [*found, Link("unit", i, i + 1, tokens[i].text, number=factor, unit=unit)]
    after_aux = any(t.text in AUXILIARIES for t in tokens[:i])
    after_aux = after_aux and (i == 0 or tokens[i - 1].text not in NOUN_MARKERS)
    after_aux = after_aux or _verb_position(tokens, i)
    single = _single(tokens[i], i, index, after_number=after_number, after_aux=after_aux)
    if single is not None and single.kind == "unknown" and _qualifies(tokens, i, index):
        single = None
    if single is not None and single.kind == "calendar" and not _weekday_ok(tokens, i, upper):
        single = None if _passed_over(tokens[i].text, after_aux=True) else single
    return [*found, single]


def _qualifies(tokens: Sequence[Token], i: int, index: ModelIndex) -> bool:
    """Whether token ``i`` qualifies the next word as the member's description does.

    "*home* sales" when sales are "closed home sales": part of the member, passed over.
    """
    after = tokens[i + 1].lemma if i + 1 < len(tokens) else ""
    return (tokens[i].lemma, after) in index.qualifiers


def _verb_position(tokens: Sequence[Token], i: int) -> bool:
    """Whether token ``i`` stands where English puts a verb.

    After the infinitive's "to" ("scheduled to *leave*") or right after a plural noun, its
    subject ("which airlines *fly* to X"), a verb's base form is read as the verb, even when it
    can also be a noun (``fly``, ``leave``); a plural noun stays a noun ("opposed to *drinks*").
    """
    if i == 0 or not is_base_verb(tokens[i].text):
        return False
    before = tokens[i - 1]
    if before.text in VERB_MARKERS:
        return True
    plural = before.text != before.lemma and before.text.endswith("s")
    return plural and "NOUN" in parts_of_speech(before.text)


def _weekday_ok(tokens: Sequence[Token], i: int, upper: frozenset[str]) -> bool:
    """Whether a short weekday that is also an English word ("sat", "wed") is the weekday.

    Capitalised ("Sat") or after a calendar word ("on sat", "every wed", "mon-sat") it is;
    otherwise it is the word ("bookings that sat on the waiting list").
    """
    word = tokens[i].text
    plain = word[:-1] if word.endswith("s") else word
    if plain not in WEEKDAY_SHORT or not parts_of_speech(word) or word in upper:
        return True
    before = tokens[i - 1].text if i else ""
    return before in WEEKDAY_MARKERS or bool(_calendar_word(before))


def _span(span: Sequence[Token], i: int, index: ModelIndex, upper: frozenset[str]) -> Link | None:
    texts = tuple(t.text for t in span)
    lemmas = tuple(t.lemma for t in span)
    text = " ".join(texts)
    end = i + len(span)
    hits = index.values.get(texts)
    if not hits and len(span) == 1 and texts[0] in upper:  # "UK" of "United Kingdom"
        hits = index.initials.get(texts[0])
    if hits and not any(h.exact for h in hits) and len(span) == 1:
        hits = _short_forms(texts[0], upper, hits, index)
    if hits and (len(span) > 1 or _value_word_ok(texts[0], upper)):
        return Link("value", i, end, text, values=tuple(hits), exact=any(h.exact for h in hits))
    grammar = _grammar(text) if len(span) > 1 else ()
    if grammar:
        return Link("grammar", i, end, text, words=grammar)
    single_grammar = len(span) == 1 and bool(_grammar(text) or _grammar(lemmas[0]))
    if lemmas in index.entity_phrases and not single_grammar:
        return Link("entity", i, end, text, entities=tuple(index.entity_phrases[lemmas]))
    if lemmas in index.member_phrases and not single_grammar:
        named = tuple(index.member_phrases[lemmas])
        others = members_with_word(index, lemmas[0]) if len(span) == 1 else ()
        extra = tuple(m for m in others if m not in named)
        return Link("member", i, end, text, members=named + extra, primary=len(named))
    inner = tuple(w for w in lemmas[1:-1] if w not in _CONNECTORS)
    core = (lemmas[0], *inner, lemmas[-1]) if len(span) > 2 else ()
    if core != lemmas and core in index.member_phrases:  # "months of inventory"
        return Link("member", i, end, text, members=tuple(index.member_phrases[core]))
    if lemmas in index.member_parts and not grammar:  # "parcel weight" of "average parcel weight"
        parts = tuple(dict.fromkeys(index.member_parts[lemmas]))
        return Link("member", i, end, text, members=parts, exact=False)
    return None


def _short_forms(
    word: str, upper: frozenset[str], hits: Sequence[ValueHit], index: ModelIndex
) -> list[ValueHit]:
    """The values a one-word short form may name.

    "Acme" of "Acme Widgets Inc." names its values. One that is also an English word names them
    when capitalised; in lower case only those of dimensions with few values ("summit" of 16
    suppliers), where a chance hit is unlikely, not of 1,400 depot names ("Summit Hill Depot").
    """
    if word in upper or not parts_of_speech(word):
        return list(hits)
    return [h for h in hits if index.cardinality.get(h.member, 0) <= FEW_VALUES]


def _value_word_ok(word: str, upper: frozenset[str]) -> bool:
    """A one-word value that is also an English word of the grammar must be in capitals."""
    common = word in FUNCTION_WORDS or bool(_grammar(word)) or bool(_calendar_word(word))
    return not common or word in upper


@functools.lru_cache(maxsize=4096)
def _grammar(text: str) -> tuple[Word, ...]:
    return tuple(table[text] for table in _GRAMMAR if text in table)


def _single(
    token: Token, i: int, index: ModelIndex, *, after_number: bool, after_aux: bool
) -> Link | None:
    end = i + 1
    if token.kind == "number":
        return Link("number", i, end, token.text, number=token.number, exact=not token.ordinal)
    if token.kind in ("date", "clock"):
        return Link("date", i, end, token.text, calendar=_date(token))
    if token.kind == "symbol":
        words = _grammar(token.text)
        return Link("grammar", i, end, token.text, words=words) if words else None
    grammar = _grammar(token.text) or _grammar(token.lemma)
    if grammar:
        return Link("grammar", i, end, token.text, words=grammar)
    calendar = _calendar_word(token.text)
    if calendar:
        return Link("calendar", i, end, token.text, calendar=calendar)
    if (token.lemma in UNITS or token.text in UNITS) and after_number:
        unit, factor = UNITS.get(token.lemma) or UNITS[token.text]
        return Link("unit", i, end, token.text, number=factor, unit=unit)
    partial = _partial(token, i, index)
    if partial is not None:
        return partial
    if token.lemma in UNITS or token.text in UNIT_OF_TITLE:  # "in dollars", "gap in minutes"
        unit, factor = UNITS.get(token.lemma) or (UNIT_OF_TITLE[token.text], 1.0)
        return Link("unit", i, end, token.text, number=factor, unit=unit)
    if _passed_over(token.text, after_aux=after_aux):
        return None
    return _corrected(token, i, index) or Link("unknown", i, end, token.text)


def _partial(token: Token, i: int, index: ModelIndex) -> Link | None:
    """One word of a longer member or entity name ("delay" of "arrival delay").

    A plural that ends an entity's name names the entity ("areas" of "MLS areas": things to
    count or list); otherwise members come first, those whose name ends in the word before those
    that merely contain it.
    """
    if token.text in FUNCTION_WORDS or _verb_only(token.text):
        return None
    entities = tuple(
        pair for words, pairs in index.entity_phrases.items() if token.lemma in words
        for pair in pairs
    )  # fmt: skip
    plural = token.text != token.lemma and token.text.endswith("s")
    heads = [p for p in index.entity_phrases if p[-1] == token.lemma]
    if entities and plural and heads:
        return Link("entity", i, i + 1, token.text, entities=entities, exact=False)
    members = members_with_word(index, token.lemma)
    if members:
        return Link("member", i, i + 1, token.text, members=members, exact=False)
    if entities:
        return Link("entity", i, i + 1, token.text, entities=entities, exact=False)
    return None


def _verb_only(word: str) -> bool:
    kinds = parts_of_speech(word)
    return bool(kinds) and "NOUN" not in kinds and ("VERB" in kinds or "AUX" in kinds)


def members_with_word(index: ModelIndex, word: str) -> tuple[str, ...]:
    """Members whose name has ``word``, best first.

    Dimensions before measures, the word as the name's head (last word) before elsewhere, keys
    last, shorter names first.
    """
    found = [
        (name in index.measures, words[-1] != word, index.is_key(name), len(words), name)
        for words, names in index.member_phrases.items()
        if word in words
        for name in names
    ]
    found.sort()
    return tuple(dict.fromkeys(name for *_, name in found))


def _passed_over(word: str, *, after_aux: bool) -> bool:
    """A word that carries no content of its own (module docstring).

    After an auxiliary ("how many tweets did customers *post*", "does the data *cover*") a word
    that can be a verb is the question's verb, even when it can also be a noun. An adjective in
    "-wide" ("statewide", "company-wide") says "no filter". :data:`UNLINKED_FILLERS` are nouns of
    time and scope ("so far", "over the whole period") that pass over when no model word has them.
    """
    if word in CONTENT_ADVERBS:
        return False
    if word in FUNCTION_WORDS or word in UNLINKED_FILLERS or len(word) <= 1:
        return True
    kinds = parts_of_speech(word)
    if is_inflected_verb(word) or word.endswith("wide") or (after_aux and "VERB" in kinds):
        return True
    return bool(kinds) and kinds <= {"VERB", "AUX", "ADV"}


def _corrected(token: Token, i: int, index: ModelIndex) -> Link | None:
    """A misspelt model word: the closest word of the index, when close enough."""
    if len(token.text) < 4 or token.kind != "word":
        return None
    match = process.extractOne(
        token.text, index.fuzzy_words, scorer=fuzz.ratio, score_cutoff=FUZZY_SCORE
    )
    if match is None:
        grammar = process.extractOne(
            token.text, GRAMMAR_WORDS, scorer=fuzz.ratio, score_cutoff=FUZZY_SCORE
        )
        if grammar is None:
            return None
        return Link("grammar", i, i + 1, token.text, words=_grammar(grammar[0]), exact=False)
    word = match[0]
    hits = index.values.get((word,))
    if hits and not any(h.exact for h in hits):
        hits = _short_forms(word, frozenset(), hits, index)
    if hits:
        return Link("value", i, i + 1, token.text, values=tuple(hits), exact=False)
    members = index.member_phrases.get((word,))
    if members:
        return Link("member", i, i + 1, token.text, members=tuple(members), exact=False)
    return _partial(Token(word, word, "word"), i, index)


def _special(tokens: Sequence[Token], i: int) -> Link | None:
    """Calendar phrases of several words: "first half", "first 7 months"."""
    if i + 2 < len(tokens) and tokens[i].text == "first" and tokens[i + 2].lemma == "month":
        months = int(tokens[i + 1].number or 0) if tokens[i + 1].kind == "number" else 0
        if 1 <= months <= 12:
            text = " ".join(t.text for t in tokens[i : i + 3])
            return Link("calendar", i, i + 3, text, calendar={"month": list(range(1, months + 1))})
    if i + 1 < len(tokens):
        pair = f"{tokens[i].text} {tokens[i + 1].text}"
        if pair in HALVES:
            low, high = HALVES[pair]
            return Link("calendar", i, i + 2, pair, calendar={"month": list(range(low, high + 1))})
    return None


def _calendar_word(word: str) -> dict[str, Any]:
    if word in CALENDAR_MONTHS:
        return {"month": [CALENDAR_MONTHS.index(word) + 1]}
    if (word in MONTH_SHORT and word != "mar" and word != "may") or word in ("mar",):
        return {"month": [MONTH_SHORT[word]]}
    plural = word[:-1] if word.endswith("s") else word
    if plural in WEEKDAYS:
        return {"weekday": [WEEKDAYS.index(plural) + 1]}
    if plural in WEEKDAY_SHORT:
        return {"weekday": [WEEKDAY_SHORT[plural] + 1]}
    if plural in ("weekend",):
        return {"weekday": list(WEEKEND)}
    if plural in ("weekday", "workday"):
        return {"weekday": list(WORKDAYS)}
    if re.fullmatch(r"q[1-4]", word):
        return {"quarter": [int(word[1])]}
    if word in HALVES:
        low, high = HALVES[word]
        return {"month": list(range(low, high + 1))}
    return {}


def _date(token: Token) -> dict[str, Any]:
    if token.kind == "clock":
        return {"hour": int(token.number or 0)}
    text = token.text
    if "-" in text:
        day = dt.date.fromisoformat("-".join(p.zfill(2) for p in text.split("-")))
        return {"date": day.isoformat()}
    parts = [int(p) for p in text.split("/")]
    found: dict[str, Any] = {"month": [parts[0]], "day": [parts[1]]}
    if len(parts) == 3:
        year = parts[2] + (2000 if parts[2] < 100 else 0)
        found = {"date": dt.date(year, parts[0], parts[1]).isoformat()}
    return found
