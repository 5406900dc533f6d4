"""The reader's condition passes: thresholds, delay words and values with their context.

- thresholds: comparator + amount + unit ("more than an hour", "200 seats or more"), with the
  measure they apply to ("departure delay over 30", "delayed by ...", "longer than 5 hours");
- "delayed"/"early" without an amount (delay > 0 / < 0);
- values with their context ("from JFK", "not to ATL", "between JFK and LAX", "after June",
  "March 3", "built before 2000", "in 2013").

:class:`ConditionPasses` adds them to the :class:`~chat_api.planner.reading_base.Cursor`; the
reader of
:mod:`chat_api.planner.reading` runs them between the markers and the subjects.
"""

from __future__ import annotations

from dataclasses import dataclass

from chat_api.planner.reading_base import (
    Condition,
    Cursor,
    Operator,
    UnanswerableError,
    number_of,
    role_of,
    said_of,
    unit_of,
    word_of,
)
from chat_api.planner.vocabulary import Mention, Number, Value

_SUBJECT_GLUE = frozenset({"of", "with", "by"})
"""Words between a measure and its threshold: "a delay *of* more than 2 hours"."""
_UNIT_SLOTS = {"miles": "distance", "seats": "seats", "degrees": "temp", "mph": "wind_speed",
               "feet": "alt", "inches": "precip"}  # fmt: skip
_THRESHOLD_SLOTS = frozenset({
    "arr_delay", "dep_delay", "air_time", "distance", "seats", "temp", "humid", "wind_speed",
    "precip", "visib", "alt", "wind_gust",
})  # fmt: skip
_UNIT_SUBJECTS = frozenset({("miles", "visib"), ("mph", "wind_gust")})
"""A unit that also measures another subject than its own slot ("gusts above 40 mph")."""
_OPERATORS: dict[str, Operator] = {"gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte"}
_FLIPPED: dict[Operator, Operator] = {"gt": "lt", "gte": "lte", "lt": "gt", "lte": "gte"}


@dataclass(frozen=True)
class _Context:
    """Markers before a value: "from"/"to" role, "not", "before", "built", same-kind siblings."""

    role: str | None = None
    negated: bool = False
    temporal: Operator | None = None
    built: bool = False
    siblings: int = 0


class ConditionPasses(Cursor):
    """The passes that read conditions; each marks the mentions it consumes."""

    # -- thresholds: "more than 30 minutes", "longer than 1000 miles", "200 seats or more" -----

    def _read_thresholds(self) -> None:
        for i, m in enumerate(self.ms):
            word = word_of(m)
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
        value = number_of(m)
        span = [j]
        if value is None and m is not None and m.word in ("a", "an"):
            value = 1.0
        elif value is None and m is not None and m.word == "half":
            value, j, span = 0.5, j + 1, [j, j + 1]
        if value is None:
            raise UnanswerableError(f"I couldn't read a number after '{self.ms[i].text}'.")
        unit = unit_of(self._at(j + 1))
        return value, unit, span + ([j + 1] if unit else [])

    def _amount_before(self, i: int) -> tuple[float, str | None, list[int]]:
        unit = unit_of(self._at(i - 1))
        j = i - 2 if unit else i - 1
        value = number_of(self._at(j))
        if value is None:
            raise UnanswerableError(f"I couldn't read a number before '{self.ms[i].text}'.")
        return value, unit, [j, i - 1] if unit else [j]

    def _threshold_subject(self, i: int, span: list[int]) -> tuple[str | None, bool]:
        """Returns: the metric the threshold is on (or "delay"), and whether "early" was said."""
        subject: str | None = None
        early = False
        before = min(i, *span) - 1
        while role_of(self._at(before)) == "filler" or said_of(self._at(before)) in _SUBJECT_GLUE:
            before -= 1
        after = self._step(max(i, *span), 1)
        if said_of(self._at(after)) in _SUBJECT_GLUE and role_of(self._at(after + 1)) == "metric":
            after += 1  # "more than 0.3 inches *of* precipitation"
        if role_of(self._at(after)) == "noun":
            raise UnanswerableError(
                f"Conditions on counts such as '{self.ms[i].text} {self.ms[span[0]].text} "
                f"{self.ms[after].text}' are not supported; ask for the counts and compare."
            )
        if role_of(self._at(self._step(before, -1))) in ("agg", "superlative"):
            before = -1  # "the average arrival delay with more than ...": a measure, not a subject
        for j in (before, after):
            word = word_of(self._at(j))
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
            if subject in (None, slot) or (unit, subject) in _UNIT_SUBJECTS:
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
            word = word_of(self._at(j))
            if word is not None and word.role in ("direction", "metric"):
                if word.key in ("dep", "dep_delay"):
                    return "dep_delay"
                if word.key in ("arr", "arr_delay"):
                    return "arr_delay"
        self._note("'Delayed' is read as the arrival delay (the delay passengers see).")
        self.r.bare_delay = True
        return "arr_delay"

    def _read_delay_words(self) -> None:
        for i, m in enumerate(self.ms):
            word = word_of(m)
            if word is None or word.role != "delay" or i in self.used:
                continue
            negated = role_of(self._at(self._step(i, -1))) == "negation"
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
                self._year(i, int(number_of(m) or 0), self._context(i, "year"))

    def _context(self, i: int, kind: str) -> _Context:
        found: dict[str, Mention] = {}
        siblings = 0
        j = i - 1
        while j >= 0:
            m, role = self.ms[j], role_of(self.ms[j])
            same_kind = isinstance(m.meaning, Value) and m.meaning.kind == kind
            if role in ("place_role", "negation", "temporal", "built") and role not in found:
                found[role] = m
                self.used.add(j)
            elif same_kind and not found:
                siblings += 1
            elif not (role == "filler" or m.word in ("and", "or")):
                break
            j -= 1
        place, temporal = word_of(found.get("place_role")), word_of(found.get("temporal"))
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
        elif value.kind == "holiday":
            month, day = value.values
            self.r.conds.append(Condition("month", operator, (month,), self.ms[i].text))
            self.r.conds.append(Condition("day", operator, (day,), self.ms[i].text))
            self._note(f"'{self.ms[i].text}' → {value.label}.")
            return
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
            day = number_of(self._at(j))
            if day is not None and j not in self.used and day.is_integer() and 1 <= day <= 31:
                if operator != "equals":
                    raise UnanswerableError("Ranges of days are not supported; ask for months.")
                self.r.conds.append(Condition("day", "equals", (int(day),), self.ms[j].text))
                self.used.add(j)
                return

    def _is_year(self, i: int) -> bool:
        m = self.ms[i]
        value = number_of(m)
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
