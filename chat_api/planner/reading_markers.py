"""The reader's marker passes: follow-ups, comparisons, shares and implied measures.

Follow-up openings, comparisons, shares, cancellations, "on time", and the measures a question
implies without naming them.

- a follow-up opening ("and", "what about", "same thing for") or a referring word anywhere
  ("their", "those") makes the question continue the previous one;
- "vs", "compare", "which is busier, X or Y" make a comparison (one row per side);
  a comparative adjective implies its measure ("busier": flights, "warmer": temperature);
- "percentage", "share", "rate", "how often" make a share; "cancelled" is a condition (no
  actual departure time); "on time" is arriving less than 15 minutes late (the US DOT rule);
- a question about flights that names no measure counts flights.

:class:`MarkerPasses` extends :class:`~chat_api.planner.reading_conditions.ConditionPasses`; the
reader of :mod:`chat_api.planner.reading` runs them.
"""

from __future__ import annotations

from chat_api.planner.lexicon import Word
from chat_api.planner.reading_base import COUNTABLE, Ask, Condition, role_of, word_of
from chat_api.planner.reading_conditions import ConditionPasses
from chat_api.planner.vocabulary import Mention

_ANYWHERE_FOLLOWUP = frozenset({
    "instead", "same", "same thing", "same thing for", "same for", "was that", "is that",
    "were those", "are those", "was it", "of that", "for that",
})  # fmt: skip
_RATE_WORDS = ("rate", "performance", "percentage")
"""An "on time" phrase ending so is a share: "on-time rate", "on-time performance"."""
_COUNTED_NOUNS = frozenset(Word("noun", key) for key in COUNTABLE)
_REFERRING = frozenset({"their", "those", "these", "they"})
"""Words that point back at the previous question wherever they stand."""
FLIGHT_VERBS = frozenset({
    "fly", "flies", "flew", "flown", "flying", "operate", "operates", "operated", "operating",
    "serve", "serves", "served",
})  # fmt: skip


class MarkerPasses(ConditionPasses):
    """The passes that read markers and implied measures."""

    def _read_markers(self) -> None:
        for i, m in enumerate(self.ms):
            role = role_of(m)
            word = word_of(m)
            if role == "followup":
                self.r.followup = self.r.followup or i == 0 or m.word in _ANYWHERE_FOLLOWUP
            elif m.word in _REFERRING:
                self.r.followup = True
            elif role == "compare" and word is not None:
                self._compare(i, word)
            elif role == "share":
                self._share(i)
            elif role == "cancelled":
                self._cancelled(i, m)
            elif role == "ontime":
                self._on_time(i, m)
            elif role == "overall":
                self.r.overall = True
            elif m.word in FLIGHT_VERBS:
                self.r.flight_context = True
            if role in ("followup", "overall"):
                self.used.add(i)

    def _cancelled(self, i: int, m: Mention) -> None:
        """Reads "cancelled" as a condition; "cancellation rate" also makes a share."""
        self.r.conds.append(Condition("cancelled", "equals", (True,), m.text))
        self.used.add(i)
        if m.word.endswith("rate"):
            self._share(i)

    def _on_time(self, i: int, m: Mention) -> None:
        """Reads "on time" as arriving less than 15 minutes late (the US DOT rule).

        "On-time rate", "on-time performance" and "punctuality" also make a share.
        """
        self._note("On time is read as arriving less than 15 minutes late (the US DOT rule).")
        self.r.conds.append(Condition("arr_delay", "lt", (15,), m.text))
        self.used.add(i)
        if m.word.endswith(_RATE_WORDS) or m.word == "punctuality":
            self._share(i)

    def _share(self, i: int) -> None:
        self.used.add(i)
        if not self.r.share:
            self.r.share = True
            self.r.asks.append(Ask("flights", "count", self.ms[i].text))

    def _compare(self, i: int, word: Word) -> None:
        self.used.add(i)
        self.r.compare = True
        self.r.compare_explicit = self.r.compare_explicit or word.key == "compare"
        if word.hint and not self.r.compare_hint:
            self.r.compare_hint = word.hint
        if word.key in ("asc", "desc"):
            self.r.rank_phrase = self.r.rank_phrase or self.ms[i].text

    @property
    def _words(self) -> set[str]:
        return {m.word for m in self.ms}

    def _late_agg(self, word: Word | None) -> bool:
        """Applies an aggregation said after its metric.

        "How far is the *average* flight", "windiest on average": sets the metric's aggregation when
        none was said.
        """
        last = self.r.asks[-1] if self.r.asks else None
        if word is None or last is None or last.agg is not None or last.subject in COUNTABLE:
            return False
        self.r.asks[-1] = Ask(last.subject, word.key, last.phrase, last.superlative)
        return True

    def _implied_asks(self) -> None:
        """Adds the measure a question implies without naming it.

        A comparative's measure ("busier": flights, "warmer": temperature) and, for a question about
        flights that names no measure ("flights per month from LGA", "top 5 destinations"), the
        number of flights.
        """
        if self.r.asks:
            return
        counted = any(
            role_of(m) == "count" and word_of(m) == Word("count", "count") and i not in self.used
            for i, m in enumerate(self.ms)
        )
        nouns = [
            m for i, m in enumerate(self.ms)
            if role_of(m) == "noun" and i not in self.used and m.meaning in _COUNTED_NOUNS
        ]  # fmt: skip
        if counted and nouns:  # "tail numbers Southwest used - how many distinct ones?"
            noun = word_of(nouns[0])
            self.r.asks.append(Ask(noun.key if noun else "flights", "count", nouns[0].text))
        elif self.r.compare_hint == "flights" or counted:  # "how many of those were there?"
            self.r.asks.append(Ask("flights", "count", "flights"))
        elif self.r.compare_hint:
            self.r.asks.append(Ask(self.r.compare_hint, self.r.lone_agg, self.r.compare_hint))
        elif (
            not self.r.followup
            and "weather" not in self._words
            and (self.r.flight_context or self.r.dims or self.r.rank or self.r.conds)
        ):
            self._note("No measure was named; counting flights.")
            self.r.asks.append(Ask("flights", "count", "flights"))
            self.r.elliptic = not any(  # "in july?", "by carrier": no measure, not "flights"
                role_of(m) in ("metric", "count", "agg", "superlative", "top")
                or m.meaning == Word("noun", "flights")
                for m in self.ms
            )
