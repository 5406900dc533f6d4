"""Linking an unknown token to the data model with well-kept libraries (issue 11, point 1).

A token that is neither a lexicon phrase nor a value is tried, in order, as the singular of a
plural (``inflect``: "Mondays" -> "monday"), a number word (``word2number``: "thirty"), and a
close spelling of a one-word *value* of the data (``rapidfuzz``: "Laguadia" -> "laguardia",
score at least 88 of 100, five letters or more; the answer names the value linked). Lexicon
words are not matched loosely: "planet" must not become "plane". The one typo they tolerate is
two neighbouring letters swapped in a word of five letters or more ("flgihts" -> "flights",
"delya" -> "delay"): a swap keeps every letter, so it cannot turn one real word into another
the way a dropped or added letter can. Otherwise the token stays unrecognised and the reader
names it.
"""

from __future__ import annotations

import functools
from typing import Any

from chat_api.planner.lexicon import LEXICON, Word
from chat_api.planner.vocabulary import Mention, Number, Value, Vocabulary

_FUZZY_MIN_SCORE = 88.0
_FUZZY_MIN_LENGTH = 5


def link_unknown(token: str, word: str, vocabulary: Vocabulary) -> Mention:
    """Links an unknown token to the vocabulary, or reports it unrecognised.

    Tried in order: its singular ("Mondays" -> "monday", via ``inflect``), a number word ("thirty"
    via ``word2number``), or a close spelling of a one-word phrase ("Laguadia", via ``rapidfuzz``,
    score at least 88 of 100 and five letters or more); else unrecognised.
    """
    singular = _singular(word)
    if singular:
        meaning = LEXICON.get((singular,)) or vocabulary.phrases.get((singular,))
        if meaning is not None:
            return Mention(token, meaning)
    number = _number_word(word)
    if number is not None:
        return Mention(token, Number(number))
    swapped = swapped_letters(word)
    if swapped is not None:
        return Mention(token, swapped)
    if len(word) >= _FUZZY_MIN_LENGTH and word.isalpha():
        match = _fuzzy(word, vocabulary)
        if match is not None:
            return Mention(token, match)
    return Mention(token, None)


def swapped_letters(word: str) -> Word | None:
    """Returns the lexicon word ``word`` spells with two neighbouring letters swapped, or None.

    "flgihts" -> flights; words under five letters are never read so.
    """
    if len(word) < _FUZZY_MIN_LENGTH or not word.isalpha():
        return None
    for i in range(len(word) - 1):
        if word[i] == word[i + 1]:
            continue
        candidate = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        found = LEXICON.get((candidate,)) or LEXICON.get((_singular(candidate) or candidate,))
        if found is not None:
            return found
    return None


@functools.cache
def _inflect_engine() -> Any:
    import inflect

    return inflect.engine()


def _singular(word: str) -> str:
    found = _inflect_engine().singular_noun(word) if word.isalpha() else False
    return found if isinstance(found, str) else ""


def _number_word(word: str) -> float | None:
    from word2number import w2n  # type: ignore[import-untyped]

    if not word.isalpha() or word in ("point",):
        return None
    try:
        return float(w2n.word_to_num(word))
    except ValueError:
        return None


def _fuzzy(word: str, vocabulary: Vocabulary) -> Word | Value | None:
    from rapidfuzz import fuzz, process, utils

    choices = _single_words(vocabulary)
    best = process.extractOne(
        word, choices, scorer=fuzz.ratio, processor=utils.default_process,
        score_cutoff=_FUZZY_MIN_SCORE,
    )  # fmt: skip
    if best is None:
        return None
    key = (best[0],)
    return vocabulary.phrases.get(key)


def _single_words(vocabulary: Vocabulary) -> list[str]:
    """Returns the one-word value phrases long enough to match loosely.

    A few hundred; only computed for a token nothing else recognised.
    """
    return [k[0] for k in vocabulary.phrases if len(k) == 1 and len(k[0]) >= _FUZZY_MIN_LENGTH]
