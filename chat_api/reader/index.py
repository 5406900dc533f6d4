"""What a model and its data give the reader: phrases for members, entities and values.

Built once per model at start (:func:`build_index`), from:

- each view member's name (``unit_price`` -> unit price), title without its unit, and
  ``meta.synonyms``; its unit from ``meta.unit`` or the title's parentheses;
- each cube of a view as an *entity*: its name, title and ``meta.synonyms`` name the things
  counted ("shipments", "suppliers"), with the measure that counts them and the dimension that
  labels them;
- each string dimension's values, read from the warehouse (at most ``MAX_VALUES`` distinct
  values per dimension, with their row counts), with the spellings people use: any case, no
  punctuation, a legal suffix dropped ("Inc."), a first word shared by at most a few values
  (a city of two airports), and ``meta.value_synonyms`` (``{code: [name, ...]}``).

Every phrase is a tuple of lemmas (:func:`chat_api.reader.text.lemma`), so inflections match.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from chat_api.reader.text import lemma
from chat_api.reader.words import (
    AGGREGATIONS,
    CALENDAR_MONTHS,
    FUNCTION_WORDS,
    ORDERINGS,
    UNIT_OF_TITLE,
    WEEKDAYS,
)
from chat_api.semantic.checks import cube_select
from chat_api.semantic.model import Member, ResolvedView, SemanticModel

logger = logging.getLogger(__name__)

MAX_VALUES = 5000
"""Distinct values indexed per string dimension; a dimension with more is not indexed."""
SHORT_FORM_SHARED = 4
"""A value's first word stands for it when at most this many values of the member share it."""
FEW_INITIALS = 100
"""Most distinct values of a dimension whose values are indexed by their initials."""
_LEGAL = frozenset({"inc", "co", "corp", "corporation", "company", "llc", "ltd", "plc", "the"})
_UNIT_IN_TITLE = re.compile(r"\(([^)]*)\)\s*$")
_PUNCT = re.compile(r"[^a-z0-9]+")
_GLOSS = re.compile(r"([\w-]+)\s*\(([^()]+)\)")
"""A value and its gloss in a description: ``breakfast_lunch_and_dinner (full board)``."""

Phrase = tuple[str, ...]
ValueRows = Callable[[str], Sequence[tuple[Any, ...]]]
"""Runs trusted SQL on the warehouse and returns its rows (``Warehouse.query_raw``)."""
Values = list[tuple[str, int]]
"""A string dimension's distinct values with their row counts, most rows first."""
ValueSource = Callable[[ResolvedView, Member, Values], Values]
"""The values of a view's member that the index keeps, given every row's values: one user's
visible values under row-level security (``chat_api.reader.access.visible_values``)."""


@dataclass(frozen=True)
class MemberInfo:
    """A view member as the reader sees it.

    Attributes:
        member: The model's member.
        phrases: Lemma tuples that name it.
        unit: Its unit (``minute``, ``mile``, ``dollar``, ``percent``) or "".
        column: The SQL of its row-level column (a dimension's expression, a measure's input),
            to pair ``avg`` of a dimension with the model's measure over the same column.
    """

    member: Member
    phrases: tuple[Phrase, ...]
    unit: str = ""
    column: str = ""

    @property
    def name(self) -> str:
        """``view.member``."""
        return self.member.qualified


@dataclass(frozen=True)
class Entity:
    """A cube of a view as a thing people count: "shipments", "suppliers".

    Attributes:
        cube: The cube.
        phrases: Lemma tuples that name it.
        count: The measure counting it (``view.count``), or None.
        key: Its primary-key dimension in the view (counted distinct without a measure).
        label: The dimension that names one of it ("supplier name"), for breakdowns.
    """

    cube: str
    phrases: tuple[Phrase, ...]
    count: str | None
    key: str | None
    label: str | None


@dataclass(frozen=True)
class ValueHit:
    """A value of a string dimension named by a phrase of a question."""

    member: str
    value: str
    rows: int
    exact: bool = True


@dataclass
class ViewIndex:
    """One view's members, entities and time dimension.

    ``years`` is the number of calendar years the time dimension's data spans (0: unknown);
    ``span`` its first and last dates (ISO), or None.
    """

    view: ResolvedView
    members: dict[str, MemberInfo] = field(default_factory=dict)
    entities: list[Entity] = field(default_factory=list)
    time_dimension: str | None = None
    years: int = 0
    span: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        """The view's name."""
        return self.view.name

    def root_entity(self) -> Entity | None:
        """The entity of the view's root cube (what one row of the view is)."""
        return next((e for e in self.entities if e.cube == self.view.root), None)

    def measure_over(self, column: str, agg: str) -> MemberInfo | None:
        """The view's measure aggregating ``column`` with ``agg`` (``avg``), or None."""
        for info in self.members.values():
            member = info.member
            if member.kind == "measure" and info.column == column and member.agg_type == agg:
                return info
        return None


@dataclass
class ModelIndex:
    """Every view's index and the phrase tables the linker searches.

    Attributes:
        views: View name -> its index.
        member_phrases: Lemma phrase -> member names (``view.member``) it names.
        entity_phrases: Lemma phrase -> ``(view, cube)`` pairs.
        values: Value phrase (lower-case words) -> hits.
        longest: Words in the longest phrase of any table.
        measures: Every measure's name (``view.member``).
        fuzzy_words: The words of every phrase (4 letters or more, sorted) that a misspelt
            word may be corrected to.
        cardinality: Member name -> how many distinct values were indexed for it.
        domain: Member name -> its indexed values as stored (a typed query's filter values
            are checked against them, ``chat_api.reader.checks``).
        member_parts: Two or more consecutive words inside a longer member phrase -> members
            ("parcel weight" of "average parcel weight").
        initials: The initials of a value of two to four words, lower case, -> hits ("uk" of
            "United Kingdom"), when no other value of the member has them; linked only when
            written in capitals.
        qualifiers: ``(word, head)`` lemma pairs of member descriptions in which ``head`` is a
            word of the member's own name ("home sale" of "Number of closed home sales" for
            ``sales``): the qualifier is part of what the member is, so a question's "home
            sales" names ``sales``.
    """

    views: dict[str, ViewIndex]
    member_phrases: dict[Phrase, list[str]] = field(default_factory=dict)
    entity_phrases: dict[Phrase, list[tuple[str, str]]] = field(default_factory=dict)
    values: dict[Phrase, list[ValueHit]] = field(default_factory=dict)
    longest: int = 1
    measures: frozenset[str] = frozenset()
    fuzzy_words: tuple[str, ...] = ()
    cardinality: dict[str, int] = field(default_factory=dict)
    domain: dict[str, frozenset[str]] = field(default_factory=dict)
    member_parts: dict[Phrase, list[str]] = field(default_factory=dict)
    initials: dict[str, list[ValueHit]] = field(default_factory=dict)
    qualifiers: set[tuple[str, str]] = field(default_factory=set)

    def is_key(self, qualified: str) -> bool:
        """Whether the member called ``view.member`` is a primary key."""
        view = self.views.get(qualified.partition(".")[0])
        info = view.members.get(qualified) if view else None
        return info is not None and info.member.primary_key

    def info(self, qualified: str) -> MemberInfo:
        """The member called ``view.member``.

        Raises:
            KeyError: no such member.
        """
        return self.views[qualified.partition(".")[0]].members[qualified]


def phrase(text: str) -> Phrase:
    """Returns: ``text`` as a lemma tuple ("Unit weights" -> ("unit", "weight"))."""
    words = _PUNCT.sub(" ", text.lower()).split()
    return tuple(lemma(w) for w in words)


def value_phrase(text: str) -> Phrase:
    """Returns: a data value as lower-case words without punctuation ("O'Hare" -> ("ohare",))."""
    return tuple(_PUNCT.sub(" ", text.lower().replace("'", "")).split())


def build_index(
    model: SemanticModel, rows: ValueRows | None, *, values: ValueSource | None = None
) -> ModelIndex:
    """Indexes a model and, when ``rows`` is given, the values of its string dimensions.

    Args:
        model: The loaded model.
        rows: Runs trusted SQL on the warehouse; None indexes no values (tests of pure logic).
        values: Narrows each view member's values (every row's, read once per cube member) to
            those indexed; None keeps every row's.

    Returns:
        The index.
    """
    index = ModelIndex(views={})
    for view in model.views.values():
        if view.public:
            index.views[view.name] = _view_index(model, view)
    for view_index in index.views.values():
        _add_member_phrases(index, view_index)
        for entity in view_index.entities:
            for words in entity.phrases:
                index.entity_phrases.setdefault(words, []).append((view_index.name, entity.cube))
    if rows is not None:
        _index_values(model, index, rows, values)
        for view_index in index.views.values():
            _time_span(model, view_index, rows)
    tables: list[Phrase] = [*index.member_phrases, *index.entity_phrases, *index.values]
    index.longest = max((len(p) for p in tables), default=1)
    spelled = {w for p in tables for w in p if len(w) >= 4 and not w.isdigit()}
    index.fuzzy_words = tuple(sorted(spelled))
    index.measures = frozenset(
        name
        for view in index.views.values()
        for name, info in view.members.items()
        if info.member.kind == "measure"
    )
    return index


def _add_member_phrases(index: ModelIndex, view: ViewIndex) -> None:
    for info in view.members.values():
        for words in info.phrases:
            index.member_phrases.setdefault(words, []).append(info.name)
            for part in _inner_phrases(words):
                index.member_parts.setdefault(part, []).append(info.name)
        index.qualifiers |= _qualifiers(info)


def _qualifiers(info: MemberInfo) -> set[tuple[str, str]]:
    """The words a member's description puts before the head (last word) of its name.

    Only before the head: "early bookings" in the description of "previous bookings not
    cancelled" does not make every booking an early one.
    """
    own = {w for p in info.phrases for w in p}
    heads = {p[-1] for p in info.phrases}
    described = phrase(info.member.description or "")
    return {
        (word, head)
        for word, head in itertools.pairwise(described)
        if head in heads and word not in own and _content(word) and word not in FUNCTION_WORDS
    }


def _inner_phrases(words: Phrase) -> list[Phrase]:
    """Runs of two or more consecutive words inside ``words``.

    Each starts and ends with a content word (not a joining, aggregation or ordering word)
    and holds no number: "parcel weight", not "units in", "in 2014" or "average parcel".
    """
    size = len(words)
    runs = [words[i:j] for i in range(size) for j in range(i + 2, size + 1) if j - i < size]
    return [r for r in runs if _content(r[0]) and _content(r[-1]) and not any(_digit(w) for w in r)]


_JOINING = frozenset({"of", "in", "on", "at", "for", "to", "from", "with", "by", "per", "and",
                      "or", "the", "a", "an"})  # fmt: skip


def _content(word: str) -> bool:
    return word not in _JOINING and word not in AGGREGATIONS and word not in ORDERINGS


def _digit(word: str) -> bool:
    return any(c.isdigit() for c in word)


def _view_index(model: SemanticModel, view: ResolvedView) -> ViewIndex:
    found = ViewIndex(view)
    for member in view.members:
        if member.public:
            found.members[member.qualified] = _member_info(model, member)
    times = [m for m in view.members if m.type == "time" and m.kind == "dimension"]
    preferred = view.meta.get("time_dimension") if view.meta else None
    chosen = next((m for m in times if m.name == preferred), None)
    chosen = chosen or next((m for m in times if m.cube == view.root), None)
    chosen = chosen or (times[0] if times else None)
    found.time_dimension = chosen.qualified if chosen else None
    for cube in view.join_paths:
        found.entities.append(_entity(model, view, cube, found))
    return found


def _member_info(model: SemanticModel, member: Member) -> MemberInfo:
    title = member.title or member.name
    bare = _UNIT_IN_TITLE.sub("", title).strip()
    aside = _UNIT_IN_TITLE.search(title)
    short = aside.group(1) if aside and not _unit(member, title) else ""  # "Order Value (AOV)"
    texts = [member.name, bare, short, *_synonyms(member.meta)]
    phrases = tuple(dict.fromkeys(p for p in (phrase(t) for t in texts) if p))
    return MemberInfo(member, phrases, _unit(member, title), _column(model, member))


def _synonyms(meta: Mapping[str, Any] | None) -> list[str]:
    found = (meta or {}).get("synonyms") or []
    return [str(s) for s in found] if isinstance(found, list | tuple) else []


def _unit(member: Member, title: str) -> str:
    declared = (member.meta or {}).get("unit")
    unit_match = _UNIT_IN_TITLE.search(title)
    text = str(declared) if declared else unit_match.group(1) if unit_match else ""
    for word in _PUNCT.sub(" ", text.lower()).split() or [text]:
        if word in UNIT_OF_TITLE:
            return UNIT_OF_TITLE[word]
    return ""


def _column(model: SemanticModel, member: Member) -> str:
    key = (member.cube, member.cube_member)
    if member.kind == "dimension":
        rendered = model.rendered.dimensions.get(key)
        return rendered.expression.sql() if rendered else ""
    measure = model.rendered.measures.get(key)
    if measure is None or measure.input is None:
        return ""
    return measure.input.expression.sql()


def _entity(model: SemanticModel, view: ResolvedView, cube: str, found: ViewIndex) -> Entity:
    """A cube of ``view`` as a countable thing.

    A joined cube that the view shows no member of is still countable through the join: the
    root side's column that its primary key equals in the join condition (``orders.customer_id
    = customers.id``) is its key, and a ``count_distinct`` measure over that column counts it.
    """
    definition = model.cubes[cube]
    texts = [cube, definition.title, *_synonyms(definition.meta)]
    if cube == view.root:
        texts += [view.name, view.title, *_synonyms(view.meta)]
    phrases = tuple(dict.fromkeys(p for p in (phrase(t) for t in texts if t) if p))
    own = [info.member for info in found.members.values() if info.member.cube == cube]
    count = next((m for m in own if m.kind == "measure" and m.agg_type == "count"), None)
    key = next((m for m in own if m.primary_key), None)
    strings = [m for m in own if m.kind == "dimension" and m.type == "string"]
    label = next((m for m in strings if "name" in m.name.split("_")), None) or key
    if key is None and cube != view.root:
        key = _key_through_join(model, view, cube, found)
        label = label or key
        column = found.members[key.qualified].column if key else ""
        count = count or next(
            (
                info.member
                for info in found.members.values()
                if info.member.agg_type == "countDistinct" and column and info.column == column
            ),
            None,
        )
    return Entity(
        cube,
        phrases,
        count.qualified if count else None,
        key.qualified if key else None,
        label.qualified if label else None,
    )


def _key_through_join(
    model: SemanticModel, view: ResolvedView, cube: str, found: ViewIndex
) -> Member | None:
    """The view dimension that the join to ``cube`` equates with ``cube``'s primary key."""
    path = view.join_paths[cube]
    keys = [d.name for d in model.cubes[cube].dimensions if d.primary_key]
    join = model.rendered.joins.get((path[-2], cube))
    if join is None or len(keys) != 1:
        return None
    key_sql = model.rendered.dimensions[cube, keys[0]].expression.sql()
    columns = {
        info.column: info.member
        for info in found.members.values()
        if info.member.kind == "dimension"
    }
    for equality in join.expression.find_all(exp.EQ):
        sides = [equality.this.sql(), equality.expression.sql()]
        if key_sql in sides and sides[1 - sides.index(key_sql)] in columns:
            return columns[sides[1 - sides.index(key_sql)]]
    return None


def _index_values(
    model: SemanticModel, index: ModelIndex, rows: ValueRows, values: ValueSource | None
) -> None:
    """Reads each string dimension's values once per cube member, shared by the views."""
    cache: dict[tuple[str, str], Values] = {}
    for view_index in index.views.values():
        for info in view_index.members.values():
            member = info.member
            if member.kind != "dimension" or member.type != "string":
                continue
            key = (member.cube, member.cube_member)
            if key not in cache:
                cache[key] = _distinct_values(model, key, rows)
            found = cache[key] if values is None else values(view_index.view, member, cache[key])
            _add_values(index, info, found)


def _time_span(model: SemanticModel, view: ViewIndex, rows: ValueRows) -> None:
    """Sets ``years`` and ``span`` of the view's time dimension.

    Both stay unset when the dimension is unknown or not one cube's own column.
    """
    if view.time_dimension is None:
        return
    member = view.members[view.time_dimension].member
    rendered = model.rendered.dimensions.get((member.cube, member.cube_member))
    if rendered is None or rendered.cubes - {member.cube}:
        return
    value = rendered.expression
    year = exp.Extract(this=exp.var("year"), expression=value.copy())
    figures: list[exp.Expr] = [
        exp.Count(this=exp.Distinct(expressions=[year])),
        exp.cast(exp.Min(this=value.copy()), "date"),
        exp.cast(exp.Max(this=value.copy()), "date"),
    ]
    try:
        found = rows(cube_select(model, member.cube, figures).sql(dialect="duckdb"))
    except Exception:  # a member whose SQL fails is reported by the start-up check
        return
    if found and found[0][1] is not None:
        years, low, high = found[0]
        view.years, view.span = int(years or 0), (str(low), str(high))


def _distinct_values(
    model: SemanticModel, key: tuple[str, str], rows: ValueRows
) -> list[tuple[str, int]]:
    rendered = model.rendered.dimensions.get(key)
    if rendered is None or rendered.cubes - {key[0]}:
        return []
    value = exp.alias_(rendered.expression, "v")
    select = (
        cube_select(model, key[0], [value])
        .select("COUNT(*) AS n")
        .group_by("1")
        .order_by("n DESC")
        .limit(MAX_VALUES + 1)
    )
    try:
        found = rows(select.sql(dialect="duckdb"))
    except Exception:  # a member whose SQL fails is reported by the start-up check
        logger.warning("values not indexed cube=%s member=%s", *key)
        return []
    if len(found) > MAX_VALUES:
        logger.info("values not indexed (too many) cube=%s member=%s", *key)
        return []
    return [(str(v), int(n)) for v, n in found if v is not None and str(v).strip()]


def _add_values(index: ModelIndex, info: MemberInfo, values: list[tuple[str, int]]) -> None:
    """Index a string dimension's values: whole, without legal suffixes, by a short form.

    A short form is one word of a longer value ("Bay" of "Bay Area") shared by few values and
    not a word of any member or entity name: "area" of "Bay Area" stays the model's word.
    """
    model_words = {w for p in (*index.member_phrases, *index.entity_phrases) for w in p}
    index.cardinality[info.name] = len(values)
    index.domain[info.name] = frozenset(value for value, _ in values)
    firsts: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for value, count in values:
        words = value_phrase(value)
        if not words:
            continue
        _hit(index, words, ValueHit(info.name, value, count))
        trimmed = tuple(w for w in words if w not in _LEGAL)
        if trimmed and trimmed != words:
            _hit(index, trimmed, ValueHit(info.name, value, count))
        for word in dict.fromkeys(words) if len(words) > 1 else ():
            if _can_stand_alone(word) and lemma(word) not in model_words:
                firsts[word].append((value, count))
    _add_short_forms(index, info, firsts)
    _add_initials(index, info, values)
    _add_value_synonyms(index, info, dict(values))


def _add_initials(index: ModelIndex, info: MemberInfo, values: list[tuple[str, int]]) -> None:
    """Indexes "UK" for "United Kingdom", "SF" for "San Francisco" (``ModelIndex.initials``).

    Only of a dimension with few values (places, plans, segments: not the names of hundreds of
    people) whose value is words written apart ("United Kingdom", not "skye_fernandez").
    """
    if len(values) > FEW_INITIALS:
        return
    found: dict[str, list[ValueHit]] = defaultdict(list)
    for value, count in values:
        words = tuple(w for w in value_phrase(value) if w not in _LEGAL)
        spaced = len(value.split()) == len(value_phrase(value))
        if 2 <= len(words) <= 4 and spaced and all(w.isalpha() for w in words):
            found["".join(w[0] for w in words)].append(ValueHit(info.name, value, count, False))
    for initials, hits in found.items():
        if len(hits) == 1 and (initials,) not in index.values:
            index.initials.setdefault(initials, []).extend(hits)


def _add_short_forms(
    index: ModelIndex, info: MemberInfo, firsts: Mapping[str, list[tuple[str, int]]]
) -> None:
    for first, shared in firsts.items():
        taken = any(h.exact for h in index.values.get((first,), ()))
        if len(shared) <= SHORT_FORM_SHARED and not taken:
            for value, count in shared:
                _hit(index, (first,), ValueHit(info.name, value, count, exact=False))


def _add_value_synonyms(index: ModelIndex, info: MemberInfo, known: Mapping[str, int]) -> None:
    """Indexes a string dimension's ``meta.value_synonyms: {CODE: [name, ...]}``.

    Also the glosses its description gives a value in parentheses
    ("breakfast_lunch_and_dinner (full board)"), when the model names none for that value.
    """
    synonyms = dict((info.member.meta or {}).get("value_synonyms") or {})
    for value, gloss in _GLOSS.findall(info.member.description or ""):
        if value in known and value not in synonyms:
            synonyms[value] = [gloss]
    for value, names in synonyms.items():
        for name in names if isinstance(names, list | tuple) else [names]:
            hit = ValueHit(info.name, str(value), known.get(str(value), 1))
            _hit(index, value_phrase(str(name)), hit)


def _hit(index: ModelIndex, words: Phrase, hit: ValueHit) -> None:
    hits = index.values.setdefault(words, [])
    if hit not in hits:
        hits.append(hit)


def _can_stand_alone(word: str) -> bool:
    common = word in FUNCTION_WORDS or word in AGGREGATIONS or word in _LEGAL or word.isdigit()
    calendar = word in CALENDAR_MONTHS or word in WEEKDAYS
    return len(word) >= 4 and not common and not calendar
