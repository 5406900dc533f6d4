"""A question as tokens: words with their lemmas, numbers, dates, symbols.

Spellings analysts type are undone first (contractions, ``hrs``, ``w/``, ``#``: the tables of
:mod:`chat_api.reader.words`). Lemmas come from lemminflect (``flew`` -> ``fly``, ``flights`` ->
``flight``), so model phrases match whatever inflection a question uses.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass

from lemminflect import getAllLemmas

from chat_api.reader.words import CONTRACTIONS, MONTH_SHORT, NUMBER_WORDS, SPELLINGS, WEEK_YEAR

_TOKEN = re.compile(
    r"(?P<date>\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?)"
    r"|(?P<clock>\d{1,2}(?::\d{2})?\s?(?:am|pm)\b)"
    r"|(?P<num>[$]?\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th|k|m|%)?)"
    r"|(?P<word>w/o?|b/c|[a-z][a-z0-9_']*\.?)"
    r"|(?P<sym>>=|<=|[#%&+/<>=$])"
)
_ORDINAL = re.compile(r"(st|nd|rd|th)$")


@dataclass(frozen=True)
class Token:
    """One token of a question.

    Attributes:
        text: As written, lower case (a short form already expanded).
        lemma: The dictionary form (``flight`` for ``flights``); numbers and symbols as written.
        kind: ``word``, ``number``, ``date``, ``clock`` (an hour of the day, in ``number``)
            or ``symbol``.
        number: The value of a number token (``2k`` -> 2000), else None.
        ordinal: The number was written as an ordinal (``3rd``, ``90th``).
    """

    text: str
    lemma: str
    kind: str
    number: float | None = None
    ordinal: bool = False


def tokens(question: str) -> list[Token]:
    """Splits a question into tokens (module docstring).

    Args:
        question: Any text; case and punctuation are free.

    Returns:
        The tokens in order; punctuation other than the symbols of the grammar is dropped.
    """
    text = _expand(question.lower().replace("’", "'").replace("‘", "'"))
    found: list[Token] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "word"
        raw = match.group()
        found.extend(_token(kind, raw))
    return found


def _expand(text: str) -> str:
    for short, long in CONTRACTIONS.items():
        if short.startswith("'") or short.startswith("n'"):
            text = text.replace(short, long)
        else:
            text = re.sub(rf"\b{re.escape(short)}\b", long, text)
    text = re.sub(r"(\d)\s*-\s*(\d)", r"\1 to \2", text) if "-" in text else text
    text = _written_dates(text)
    text = re.sub(r"(?<=[a-z])[-_](?=[a-z])", " ", text)
    return text.replace("'s ", " ").replace("s' ", "s ")


_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\b"
_YEAR = r"(?:,?\s*(?P<year>\d{4})\b)?"
_NAMED_DAY = r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"
_WRITTEN_DATES = (
    re.compile(rf"\b{_NAMED_DAY}{_MONTH}\.?\s+{_DAY}{_YEAR}"),  # "Monday March 1st 2021"
    # "Mon 7 Aug 2017": a day before its month only with a year ("top 5 May flights" is not)
    re.compile(rf"\b{_NAMED_DAY}{_DAY}\s+(?:of\s+)?{_MONTH}\b\.?,?\s*(?P<year>\d{{4}})\b"),
)
_DAY_SPAN = re.compile(rf"\b{_MONTH}\.?\s+{_DAY}\s+to\s+(?P<last>\d{{1,2}})\b(?!\s*[:/])")
_WEEK_OF = re.compile(
    r"\b(?:the\s+)?week\s+(?:of|starting|beginning)\s+"
    r"(?P<m>\d{1,2})/(?P<d>\d{1,2})(?:/(?P<y>\d{4}))?"
    r"(?P<to>\s+to\s+\d{1,2}/\d{1,2}(?:/\d{4})?)?(?:\s*\([^)]*\))?"
)


def _written_dates(text: str) -> str:
    """Dates written in words as the date tokens the reader reads, ``m/d[/yyyy]``.

    "March 1st 2021", "Monday, March 1st", "7 Aug 2017" (a weekday named with a date is part of
    it); "June 10-16" is June 10 to June 16; "the week of <date>" is that date to six days
    after, a parenthesis right after it restating the week ("(Mon-Sun)") included.
    """
    text = _DAY_SPAN.sub(
        lambda m: f"{_month(m['mon'])}/{m['day']} to {_month(m['mon'])}/{m['last']}", text
    )
    for pattern in _WRITTEN_DATES:
        text = pattern.sub(_date_text, text)
    return _WEEK_OF.sub(_week_text, text)


def _month(name: str) -> int:
    return MONTH_SHORT[name[:3]]


def _date_text(match: re.Match[str]) -> str:
    day = f"{_month(match['mon'])}/{match['day']}"
    return f"{day}/{match['year']}" if match["year"] else day


def _week_text(match: re.Match[str]) -> str:
    if match["to"]:  # "the week of July 1-7": the days given
        given = f"{match['m']}/{match['d']}" + (f"/{match['y']}" if match["y"] else "")
        return given + match["to"]
    year = int(match["y"] or WEEK_YEAR)
    try:
        first = dt.date(year, int(match["m"]), int(match["d"]))
    except ValueError:
        return match.group()
    last = first + dt.timedelta(days=6)
    shown = "/{}" if match["y"] else ""
    return (
        f"{first.month}/{first.day}{shown.format(first.year)} to "
        f"{last.month}/{last.day}{shown.format(last.year)}"
    )


def _token(kind: str, raw: str) -> list[Token]:
    if kind == "num":
        return [_number(raw)]
    if kind == "clock":
        return [_clock(raw)]
    if kind == "date":
        return [Token(raw, raw, "date")]
    if kind == "sym":
        long = SPELLINGS.get(raw)
        return _words(long) if long else [Token(raw, raw, "symbol")]
    word = raw.rstrip(".") if raw not in SPELLINGS else raw
    word = word.strip("'-")
    if not word:
        return []
    long = SPELLINGS.get(word) or SPELLINGS.get(raw)
    if long:
        return _words(long)
    if word in NUMBER_WORDS:
        return [Token(word, word, "number", float(NUMBER_WORDS[word]))]
    return [Token(word, lemma(word), "word")]


def _clock(raw: str) -> Token:
    hour = int(re.match(r"\d+", raw).group())  # type: ignore[union-attr]
    hour = hour % 12 + (12 if raw.endswith("pm") else 0)
    return Token(raw, raw, "clock", float(hour))


def _words(text: str) -> list[Token]:
    return [Token(w, lemma(w), "word") for w in text.split()]


def _number(raw: str) -> Token:
    text = raw.lstrip("$")
    scale = 1.0
    if text.endswith("k"):
        text, scale = text[:-1], 1000.0
    elif text.endswith("m"):
        text, scale = text[:-1], 1_000_000.0
    text = text.rstrip("%")
    ordinal = bool(_ORDINAL.search(text))
    text = _ORDINAL.sub("", text).replace(",", "")
    return Token(raw, raw, "number", float(text) * scale, ordinal=ordinal)


@functools.lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """The dictionary form of an English word: a noun's singular, a verb's base form.

    A word lemminflect does not know is its own lemma. A plural noun wins over a verb reading
    (``orders`` -> ``order``); ``data`` stays ``data``.
    """
    found = getAllLemmas(word)
    for pos in ("NOUN", "VERB", "ADJ", "ADV", "AUX"):
        if found.get(pos):
            return str(found[pos][0])
    if word.endswith("s") and len(word) > 3 and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=65536)
def parts_of_speech(word: str) -> frozenset[str]:
    """Returns: the parts of speech lemminflect knows for ``word`` (empty when unknown)."""
    return frozenset(getAllLemmas(word))


def is_inflected_verb(word: str) -> bool:
    """Whether ``word`` is a verb form other than the base (``got``, ``ended``, ``flying``)."""
    found = getAllLemmas(word)
    verbs = found.get("VERB", ()) + found.get("AUX", ())
    return bool(verbs) and word not in verbs and "NOUN" not in found


def is_base_verb(word: str) -> bool:
    """Returns: whether ``word`` is a verb's base or "-ing" form (``fly``, ``heading``).

    A plural noun that is also a verb's third person (``drinks``) and a past form (``flew``)
    are not.
    """
    verbs = getAllLemmas(word).get("VERB", ())
    return word in verbs or (bool(verbs) and word.endswith("ing"))
