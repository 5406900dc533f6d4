"""Reading a question: its mentions -> what it asks (measures, breakdowns, conditions, ranking).

The reader is the planner's grammar. It works on the mentions of
:func:`chat_api.vocabulary.scan` in passes, each consuming what it understands:

1. refusals: unknown words, subjects outside the data model ("revenue"), ambiguous places;
2. markers: a follow-up opening ("and", "what about"), "overall", flight verbs;
3. thresholds: comparator + amount + unit ("more than an hour", "200 seats or more"), with the
   measure they apply to ("departure delay over 30", "delayed by ...", "longer than 5 hours");
4. "delayed"/"early" without an amount (delay > 0 / < 0);
5. values with their context ("from JFK", "not to ATL", "between JFK and LAX", "after June",
   "March 3", "built before 2000", "in 2013");
6. subjects: metrics with their aggregation ("average arrival delay"), nouns counted ("how many
   flights", "flight counts", "most flights") or grouped by ("by carrier", "which 3 airlines",
   "top 5 destinations"), breakdown adjectives ("monthly");
7. superlatives left over ("longest flight", "busiest", "highest" + a count);
8. leftovers: an unplaced number, comparator, unit or "not" stops the reading.

No view is chosen here; :mod:`chat_api.planner` maps a :class:`Reading` onto the data model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Literal

from chat_api.vocabulary import Mention, Number, Value, Vocabulary, Word, scan

Operator = Literal["equals", "notEquals", "in", "gt", "gte", "lt", "lte"]
Direction = Literal["asc", "desc"]
Scalar = str | int | float

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
        subject: A metric key of ``chat_api.planner.METRICS`` (``"arr_delay"``), or a noun to
            count (``"flights"``, ``"destinations"``) when ``agg`` is ``"count"``.
        agg: ``"avg"``, ``"sum"``, ``"min"``, ``"max"``, ``"count"``, or None when not said.
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
        followup: The question opens with a follow-up word ("and", "what about", "now").
        flight_context: Words that only make sense for flights (fly, flights, "to" a place).
        origin_role: A bare "from"/"out of" without a place ("airports it flies from").
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
    followup: bool = False
    flight_context: bool = False
    origin_role: bool = False
    notes: tuple[str, ...] = ()


@dataclass
class _Draft:
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
    followup: bool = False
    flight_context: bool = False
    origin_role: bool = False
    notes: list[str] = field(default_factory=list)

    def freeze(self) -> Reading:
        return replace(
            Reading(**{f.name: getattr(self, f.name) for f in fields(Reading)}),
            asks=tuple(self.asks),
            dims=tuple(self.dims),
            conds=tuple(self.conds),
            notes=tuple(self.notes),
        )


_UNSUPPORTED = {
    "money": "The data model has no prices, fares or revenue: it holds flights (counts, delays, "
    "distance, air time), hourly weather, planes, airlines and airports.",
    "people": "The data model has no passenger or crew numbers: it counts flights, planes, "
    "airlines, airports and weather observations.",
    "status": "The data model has no cancellation, diversion or on-time status; it has arrival "
    "and departure delays in minutes (ask, for example, how many flights arrived more than 15 "
    "minutes late).",
    "derived": "'{word}' needs a calculation the data model does not define; I can give counts, "
    "totals, averages, minimums and maximums of its measures.",
    "time": "The data covers the year 2013 by month, day and hour, without weeks or relative "
    "dates such as '{word}'; ask about a month instead.",
    "daily": "A day-by-day breakdown is not offered; ask by month or by hour, or for one day "
    "such as 'on March 3'.",
    "cause": "The data has delays but not their causes.",
}
_FLIGHT_VERBS = frozenset({
    "fly", "flies", "flew", "flown", "flying", "operate", "operates", "operated", "operating",
    "serve", "serves", "served",
})  # fmt: skip
_UNIT_WORDS = {"min": "minutes", "seats": "seats", "seat": "seats"}
_SUBJECT_GLUE = frozenset({"of", "with", "by"})
"""Words between a measure and its threshold: "a delay *of* more than 2 hours"."""
_UNIT_SLOTS = {"miles": "distance", "seats": "seats", "degrees": "temp", "mph": "wind_speed",
               "feet": "alt"}  # fmt: skip
_THRESHOLD_SLOTS = frozenset({
    "arr_delay", "dep_delay", "air_time", "distance", "seats", "temp", "humid", "wind_speed",
    "precip", "visib", "alt",
})  # fmt: skip
_OPERATORS: dict[str, Operator] = {"gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte"}
_FLIPPED: dict[Operator, Operator] = {"gt": "lt", "gte": "lte", "lt": "gt", "lte": "gte"}


def _word(mention: Mention | None) -> Word | None:
    return mention.meaning if mention is not None and isinstance(mention.meaning, Word) else None


def _role(mention: Mention | None) -> str:
    word = _word(mention)
    return word.role if word is not None else ""


def _said(mention: Mention | None) -> str:
    return mention.word if mention is not None else ""


def _number(mention: Mention | None) -> float | None:
    if mention is not None and isinstance(mention.meaning, Number):
        return mention.meaning.value
    return None


def _unit(mention: Mention | None) -> str | None:
    word = _word(mention)
    if word is not None and word.role == "unit":
        return word.key
    return _UNIT_WORDS.get(mention.word) if mention is not None else None


@dataclass(frozen=True)
class _Context:
    """Markers before a value: "from"/"to" role, "not", "before", "built", same-kind siblings."""

    role: str | None = None
    negated: bool = False
    temporal: Operator | None = None
    built: bool = False
    siblings: int = 0


class _Reader:
    """Reads a question's mentions into a :class:`Reading`, left to right, pass by pass.

    Each pass marks the mentions it consumes; whatever matters and is left over at the end (a
    number, a comparator, "not") stops the reading with a reason instead of being ignored.
    """

    def __init__(self, mentions: tuple[Mention, ...], vocabulary: Vocabulary) -> None:
        self.ms = mentions
        self.vocabulary = vocabulary
        self.used: set[int] = set()
        self.dim_nouns: set[int] = set()
        self.r = _Draft()

    def read(self) -> Reading:
        self._refuse_unknown()
        self._read_markers()
        self._read_thresholds()
        self._read_delay_words()
        self._read_values()
        self._read_subjects()
        self._read_superlatives()
        self._read_top()
        self._check_leftovers()
        return self.r.freeze()

    def _at(self, i: int) -> Mention | None:
        return self.ms[i] if 0 <= i < len(self.ms) else None

    def _step(self, i: int, step: int, skip: tuple[str, ...] = ("filler",)) -> int:
        i += step
        while 0 <= i < len(self.ms) and _role(self.ms[i]) in skip:
            i += step
        return i

    def _note(self, text: str) -> None:
        self.r.notes.append(text)

    def _refuse_unknown(self) -> None:
        for m in self.ms:
            word = _word(m)
            if word is not None and word.role == "unsupported":
                raise UnanswerableError(_UNSUPPORTED[word.key].format(word=m.text))
            if isinstance(m.meaning, Value) and m.meaning.ambiguous:
                raise UnanswerableError(
                    f"'{m.text}' could mean {m.meaning.label}; please name the airport code."
                )
        unknown = [m.text for m in self.ms if m.meaning is None]
        if unknown:
            raise UnanswerableError(
                f"I don't recognise {', '.join(repr(w) for w in unknown)} in the data model "
                "(nycflights13: flights, weather, planes, airlines and airports of New York "
                "City in 2013), so I can't answer this without guessing."
            )

    def _read_markers(self) -> None:
        for i, m in enumerate(self.ms):
            role = _role(m)
            if role == "followup":
                self.r.followup = self.r.followup or i == 0
            elif role == "overall":
                self.r.overall = True
            elif m.word in _FLIGHT_VERBS:
                self.r.flight_context = True
            if role in ("followup", "overall"):
                self.used.add(i)

    # -- thresholds: "more than 30 minutes", "longer than 1000 miles", "200 seats or more" -----

    def _read_thresholds(self) -> None:
        for i, m in enumerate(self.ms):
            word = _word(m)
            if word is None or word.role != "comparator":
                continue
            postfix = m.word in ("or more", "or less")
            value, unit, span = self._amount_before(i) if postfix else self._amount_after(i)
            subject, early = self._threshold_subject(i, span)
            slot, factor = self._threshold_slot(subject, unit, m.word, i, span)
            operator = _OPERATORS[word.key]
            if early:
                operator, value = _FLIPPED[operator], -value
            phrase = " ".join(self.ms[j].text for j in sorted({i, *span}))
            self.r.conds.append(Condition(slot, operator, (value * factor,), phrase))
            self.used.update({i, *span})

    def _amount_after(self, i: int) -> tuple[float, str | None, list[int]]:
        j = i + 1
        m = self._at(j)
        value = _number(m)
        span = [j]
        if value is None and m is not None and m.word in ("a", "an"):
            value = 1.0
        elif value is None and m is not None and m.word == "half":
            value, j, span = 0.5, j + 1, [j, j + 1]
        if value is None:
            raise UnanswerableError(f"I couldn't read a number after '{self.ms[i].text}'.")
        unit = _unit(self._at(j + 1))
        return value, unit, span + ([j + 1] if unit else [])

    def _amount_before(self, i: int) -> tuple[float, str | None, list[int]]:
        unit = _unit(self._at(i - 1))
        j = i - 2 if unit else i - 1
        value = _number(self._at(j))
        if value is None:
            raise UnanswerableError(f"I couldn't read a number before '{self.ms[i].text}'.")
        return value, unit, [j, i - 1] if unit else [j]

    def _threshold_subject(self, i: int, span: list[int]) -> tuple[str | None, bool]:
        """Returns: the metric the threshold is on (or "delay"), and whether "early" was said."""
        subject: str | None = None
        early = False
        before = min(i, *span) - 1
        while _role(self._at(before)) == "filler" or _said(self._at(before)) in _SUBJECT_GLUE:
            before -= 1
        after = self._step(max(i, *span), 1)
        if _role(self._at(after)) == "noun":
            raise UnanswerableError(
                f"Conditions on counts such as '{self.ms[i].text} {self.ms[span[0]].text} "
                f"{self.ms[after].text}' are not supported; ask for the counts and compare."
            )
        if _role(self._at(self._step(before, -1))) in ("agg", "superlative"):
            before = -1  # "the average arrival delay with more than ...": a measure, not a subject
        for j in (before, after):
            word = _word(self._at(j))
            if word is not None and word.role in ("metric", "delay") and j not in self.used:
                subject = subject or (word.key if word.role == "metric" else "delay")
                early = early or word.key == "early"
                self.used.add(j)
        return subject, early

    def _threshold_slot(
        self, subject: str | None, unit: str | None, comparator: str, i: int, span: list[int]
    ) -> tuple[str, float]:
        if unit in ("minutes", "hours"):
            factor = 60.0 if unit == "hours" else 1.0
            if subject in ("arr_delay", "dep_delay", "air_time"):
                return subject, factor
            if subject is None and comparator in ("longer than", "shorter than"):
                return "air_time", factor
            if subject in (None, "delay"):
                return self._delay_direction(i, span), factor
        elif unit is not None:
            slot = _UNIT_SLOTS[unit]
            if subject in (None, slot) or (unit == "miles" and subject == "visib"):
                return subject or slot, 1.0
        elif subject in _THRESHOLD_SLOTS:
            return subject, 1.0
        amount = " ".join(self.ms[j].text for j in span)
        raise UnanswerableError(
            f"I can't tell which measure '{self.ms[i].text} {amount}' applies to; name it, "
            "for example 'arrival delay of more than 30 minutes' or 'longer than 1000 miles'."
        )

    def _delay_direction(self, i: int, span: list[int]) -> str:
        window = range(min(i, *span) - 4, max(i, *span) + 4)
        for j in sorted(window, key=lambda k: abs(k - i)):
            word = _word(self._at(j))
            if word is not None and word.role in ("direction", "metric"):
                if word.key in ("dep", "dep_delay"):
                    return "dep_delay"
                if word.key in ("arr", "arr_delay"):
                    return "arr_delay"
        self._note("'Delayed' is read as the arrival delay (the delay passengers see).")
        return "arr_delay"

    def _read_delay_words(self) -> None:
        for i, m in enumerate(self.ms):
            word = _word(m)
            if word is None or word.role != "delay" or i in self.used:
                continue
            negated = _role(self._at(self._step(i, -1))) == "negation"
            operator: Operator = "lt" if word.key == "early" else "gt"
            if negated:
                operator = "gte" if operator == "lt" else "lte"
                self.used.add(self._step(i, -1))
            self.r.conds.append(Condition(self._delay_direction(i, [i]), operator, (0,), m.text))
            self.used.add(i)

    # -- values: carriers, airports with their role, manufacturers, months, days, years -------

    def _read_values(self) -> None:
        for i, m in enumerate(self.ms):
            if i in self.used:
                continue
            if isinstance(m.meaning, Value):
                self.used.add(i)
                self._value(i, m.meaning, self._context(i, m.meaning.kind))
            elif self._is_year(i):
                self.used.add(i)
                self._year(i, int(_number(m) or 0), self._context(i, "year"))

    def _context(self, i: int, kind: str) -> _Context:
        found: dict[str, Mention] = {}
        siblings = 0
        j = i - 1
        while j >= 0:
            m, role = self.ms[j], _role(self.ms[j])
            same_kind = isinstance(m.meaning, Value) and m.meaning.kind == kind
            if role in ("place_role", "negation", "temporal", "built") and role not in found:
                found[role] = m
                self.used.add(j)
            elif same_kind and not found:
                siblings += 1
            elif not (role == "filler" or m.word in ("and", "or")):
                break
            j -= 1
        place, temporal = _word(found.get("place_role")), _word(found.get("temporal"))
        return _Context(
            role=place.key if place else None,
            negated="negation" in found,
            temporal=_OPERATORS[temporal.key] if temporal else None,
            built="built" in found,
            siblings=siblings,
        )

    def _value(self, i: int, value: Value, context: _Context) -> None:
        operator: Operator = "notEquals" if context.negated else "equals"
        slot: str = value.kind
        if value.kind == "airport":
            slot = {"origin": "origin", "dest": "dest"}.get(context.role or "", "place")
            if context.role == "between":
                slot = "dest" if context.siblings else "origin"
        elif value.kind == "month":
            operator = self._month_operator(context, operator)
            self._read_day(i, operator)
        self.r.conds.append(Condition(slot, operator, value.values, self.ms[i].text))

    @staticmethod
    def _month_operator(context: _Context, operator: Operator) -> Operator:
        if context.temporal is not None:
            return context.temporal
        if context.role == "between":
            return "lte" if context.siblings else "gte"
        return {"origin": "gte", "dest": "lte"}.get(context.role or "", operator)  # type: ignore[return-value]

    def _read_day(self, i: int, operator: Operator) -> None:
        """Reads "March 3", "3rd of March", "on the 3rd March" next to a month."""
        for j in (self._step(i, 1), self._step(i, -1, ("filler", "place_role"))):
            day = _number(self._at(j))
            if day is not None and j not in self.used and day.is_integer() and 1 <= day <= 31:
                if operator != "equals":
                    raise UnanswerableError("Ranges of days are not supported; ask for months.")
                self.r.conds.append(Condition("day", "equals", (int(day),), self.ms[j].text))
                self.used.add(j)
                return

    def _is_year(self, i: int) -> bool:
        m = self.ms[i]
        value = _number(m)
        ordinal = isinstance(m.meaning, Number) and m.meaning.ordinal
        return value is not None and value.is_integer() and 1900 <= value <= 2100 and not ordinal

    def _year(self, i: int, year: int, context: _Context) -> None:
        operator: Operator = context.temporal or ("notEquals" if context.negated else "equals")
        if context.built:
            self.r.conds.append(Condition("plane_year", operator, (year,), self.ms[i].text))
            return
        if operator == "equals" and year not in self.vocabulary.years:
            covered = ", ".join(str(y) for y in sorted(self.vocabulary.years))
            raise UnanswerableError(
                f"The flights and weather data cover {covered} only; there is nothing for {year}."
            )
        self.r.conds.append(Condition("year", operator, (year,), self.ms[i].text))

    # -- measures and breakdowns -----------------------------------------------------------------

    def _read_subjects(self) -> None:
        for i, m in enumerate(self.ms):
            word = _word(m)
            if word is None or i in self.used:
                continue
            if word.role == "metric":
                self._metric(i, word)
            elif word.role == "noun":
                self._noun(i, word)
            elif word.role == "breakdown" and word.key:
                self.r.dims.append(Breakdown(word.key, m.text))
                self.used.add(i)

    def _metric(self, i: int, word: Word) -> None:
        """Reads a metric with the aggregation and superlative right before it."""
        self.used.add(i)
        said = [i]
        p = self._step(i, -1)
        before = _word(self._at(p))
        agg: str | None = None
        superlative: Direction | None = None
        if before is not None and before.role == "agg":
            agg = before.key
            said.append(p)
            p = self._mark(p)
            before = _word(self._at(p))
        if before is not None and before.role == "superlative" and before.hint != "flights":
            superlative = "desc" if before.key == "max" else "asc"
            said.append(p)
            self.r.rank_phrase = self.ms[p].text
            self._mark(p)
        elif before is not None and before.role == "count":
            agg = self._counted_metric(word, before, p)
            said.append(p)
        elif before is not None and before == Word("breakdown", ""):
            raise UnanswerableError(
                f"Grouping by '{self.ms[i].text}' values is not supported; group by carrier, "
                "origin, destination, month, hour or manufacturer."
            )
        elif agg is None and _said(self._at(p)) in ("and", "or") and self.r.asks:
            agg = self.r.asks[-1].agg
        key = self._delay_direction(i, [i]) if word.key == "delay" else word.key
        self.r.asks.append(Ask(key, agg, self._phrase(said), superlative))

    def _phrase(self, indexes: list[int]) -> str:
        return " ".join(self.ms[j].text for j in sorted(indexes))

    def _mark(self, i: int) -> int:
        """Marks mention ``i`` used; returns the index of the meaningful mention before it."""
        self.used.add(i)
        return self._step(i, -1)

    def _counted_metric(self, word: Word, before: Word, p: int) -> str:
        self.used.add(p)
        if before.key == "much" or word.key == "seats":
            return "sum"
        raise UnanswerableError(
            f"Counting '{word.key}' is not meaningful; ask for its average, total, minimum or "
            "maximum, or count flights with a condition ('delayed by more than 30 minutes')."
        )

    def _noun(self, i: int, word: Word) -> None:
        p = self._before_noun(i)
        number = _number(self._at(p)) if p not in self.used else None
        cue_index = self._before_noun(p) if number is not None else p
        cue = _word(self._at(cue_index))
        cue_role = cue.role if cue is not None else ""
        after = _word(self._at(self._step(i, 1)))
        named = any(isinstance(m.meaning, Value) for m in self.ms[cue_index + 1 : i])
        if cue_role in ("which", "top") or (cue == Word("breakdown", "") and not named):
            self._dimension(i, word, cue_index, number)
        elif self._continues_breakdown(cue_index):
            self._dimension(i, word, -1, None)
        elif number is not None:
            self._dimension(i, word, -1, number)
        elif cue is not None and cue_role == "count":
            self._count(i, word, cue_index)
        elif cue is not None and cue_role == "superlative" and cue.hint in ("", "flights"):
            self._ranked_noun(i, word, cue, cue_index)
        elif after is not None and after.role == "count":
            self._count(i, word, self._step(i, 1))
        elif word.key == "flights":
            self.r.flight_context = True

    def _continues_breakdown(self, cue_index: int) -> bool:
        """Returns: True for the second noun of "by origin and month" / "by origin, month"."""
        before = cue_index
        if _said(self._at(cue_index)) == "and":
            before = self._before_noun(cue_index)
        return before in self.dim_nouns

    def _before_noun(self, i: int) -> int:
        """Returns: the index of the cue before a noun, skipping fillers, "distinct" and the
        values and delay words already read ("how many *United* flights", "*delayed* flights")."""
        j = i - 1
        while j >= 0:
            m = self.ms[j]
            consumed = j in self.used and (isinstance(m.meaning, Value) or _role(m) == "delay")
            if not (consumed or _role(m) in ("filler", "distinct")):
                break
            j -= 1
        return j

    def _dimension(self, i: int, word: Word, cue_index: int, number: float | None) -> None:
        cue = _word(self._at(cue_index))
        self.used.update({i, cue_index} - {-1})
        self.dim_nouns.add(i)
        if number is not None:
            self.used.add(self._before_noun(i))
            self.r.limit = int(number)
        if word.key == "flights":
            if cue is not None and cue.role == "breakdown":
                self._note(f"'{self.ms[cue_index].text} flight' needs no grouping.")
                return
            raise UnanswerableError(
                "I can't list individual flights; ask for counts, totals, averages, minimums or "
                "maximums, by carrier, origin, destination, month or hour."
            )
        said = [
            j for j in (cue_index, self._before_noun(i) if number is not None else -1) if j >= 0
        ]
        self.r.dims.append(Breakdown(word.key, self._phrase([*said, i])))
        if cue is not None and cue.role == "top":
            self.r.rank = "desc" if cue.key == "desc" else "asc"
            self.r.rank_phrase = self.ms[cue_index].text
            self.r.top_default = number is None
        if cue is not None and cue.role == "which" and not self.ms[i].word.endswith("s"):
            self.r.singular = True

    def _count(self, i: int, word: Word, cue_index: int) -> None:
        self.used.update({i, cue_index})
        if word.key not in COUNTABLE:
            raise UnanswerableError(f"Counting {self.ms[i].text} is not supported.")
        self.r.asks.append(Ask(word.key, "count", self._phrase([cue_index, i])))

    def _ranked_noun(self, i: int, word: Word, cue: Word, cue_index: int) -> None:
        """Reads "the busiest airport" (count flights, group by it) and "most flights"."""
        self.r.rank = "desc" if cue.key == "max" else "asc"
        self.r.rank_phrase = self.ms[cue_index].text
        if cue.hint == "flights":
            self.used.update({i, cue_index})
            self.r.asks.append(Ask("flights", "count", self.ms[cue_index].text))
            self.r.dims.append(Breakdown(word.key, self.ms[i].text))
            self.r.singular = not self.ms[i].word.endswith("s")
        else:
            self._count(i, word, cue_index)

    def _read_superlatives(self) -> None:
        for i, m in enumerate(self.ms):
            word = _word(m)
            if word is None or word.role != "superlative" or i in self.used:
                continue
            self.used.add(i)
            direction: Direction = "desc" if word.key == "max" else "asc"
            if word.hint == "flights":
                self.r.asks.append(Ask("flights", "count", m.text))
            elif word.hint and not self.r.asks:
                self.r.asks.append(Ask(word.hint, None, m.text, direction))
                continue
            elif not self.r.asks or self.r.rank is not None:
                raise UnanswerableError(f"I can't tell what '{m.text}' ranks by.")
            self.r.rank, self.r.rank_phrase = direction, m.text

    def _read_top(self) -> None:
        """Reads "top 3"/"bottom 5" without a noun after it (a follow-up: "now the top 3")."""
        for i, m in enumerate(self.ms):
            word = _word(m)
            if word is None or word.role != "top" or i in self.used:
                continue
            self.used.add(i)
            self.r.rank, self.r.rank_phrase = ("desc" if word.key == "desc" else "asc"), m.text
            number = _number(self._at(i + 1))
            if number is not None and i + 1 not in self.used:
                self.used.add(i + 1)
                self.r.limit = int(number)
            else:
                self.r.top_default = True

    def _check_leftovers(self) -> None:
        for i, m in enumerate(self.ms):
            word = _word(m)
            if i in self.used:
                continue
            role = word.role if word is not None else ""
            before = _word(self._at(self._step(i, -1)))
            if role == "unit" and m.word == "miles" and before and before.role == "count":
                self.r.asks.append(Ask("distance", "sum", f"how many {m.text}"))
            elif isinstance(m.meaning, Number) or role in ("comparator", "negation", "temporal"):
                raise UnanswerableError(f"I can't tell what '{m.text}' refers to here.")
            elif role == "unit":
                raise UnanswerableError(f"I can't tell what '{m.text}' measures here.")
            elif role == "breakdown" and m.word != "by":
                raise UnanswerableError(f"I can't tell what '{m.text}' groups by here.")
            elif role == "agg" and self.r.asks:
                raise UnanswerableError(
                    f"'{m.text}' of a count (per month, per day...) needs a second aggregation "
                    "the data model does not define; ask for the counts by month instead."
                )
            elif role == "place_role" and word is not None and word.key in ("origin", "dest"):
                self.r.flight_context = True
                self.r.origin_role = self.r.origin_role or word.key == "origin"


def read_question(question: str, vocabulary: Vocabulary) -> Reading:
    """Reads a question.

    Args:
        question: English, as asked.
        vocabulary: Values to recognise.

    Returns:
        What the question asks, not yet mapped onto a view.

    Raises:
        UnanswerableError: A word is unknown, a subject is outside the data model, or a number,
            comparator or unit can't be placed.
    """
    return _Reader(scan(question, vocabulary), vocabulary).read()
