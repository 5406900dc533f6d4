r"""Archive value rules shared by every part.

Closed value sets of the archive's columns and what PostgreSQL accepts in a column (no I/O, no
SQLAlchemy; the tables are :mod:`pipeline.archive.tables`).

:func:`storable` makes a Python value one PostgreSQL accepts: ``text`` and ``jsonb`` cannot hold
NUL (``\u0000``) or lone surrogates, ``jsonb`` no ``NaN``/``Infinity``, ``integer`` only 32 bits.
Raw lines are ``bytea`` and never need it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from models.json_values import NUMBER_MARKS

NAMING_CONVENTION: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "pk": "pk_%(table_name)s",
}
JOB_STATUSES: Final = ("submitted", "running", "completed", "failed", "aborted")
EVENT_KINDS: Final = ("accepted", "started", "first_line", "completed", "failed", "aborted")
ANSWER_SOURCES: Final = ("final", "state", "fallback", "none")
TOOL_KINDS: Final = ("meta", "sql", "other")
REDACTIONS: Final = ("redacted", "deleted")
SEAL_REASONS: Final = ("normalised", "job_changed", "redacted", "deleted", "migrated")
"""Why an attempt's seal was (last) written (``attempt_seals.reason``, migration 0007)."""
VERDICTS: Final = ("correct", "incorrect", "needs_follow_up", "not_applicable")
"""A reviewer's verdict on one answer (``review_verdicts.verdict``, migration 0008)."""
PAIRWISE_VERDICTS: Final = ("a_better", "b_better", "equal")
"""A reviewer's verdict on two runs' answers to the same question, side by side."""

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
REPLACEMENT_CHARACTER: Final = "\ufffd"


def key_refusal(job_id: str, *numbers: int) -> str | None:
    """Says why PostgreSQL could never store a record, before it is tried.

    Args:
        job_id: The record's job id (a ``text`` key).
        numbers: Its ``integer`` key columns (attempt, line number, line count).

    Returns:
        The reason, or None when the record is storable. Raw line bytes are ``bytea`` and other
        text is cleaned on the way in (:func:`models.archive.storable`), so only keys matter.
    """
    if "\x00" in job_id:
        return "job id contains NUL, which PostgreSQL text cannot hold"
    too_big = [n for n in numbers if not INT32_MIN <= n <= INT32_MAX]
    if too_big:
        return f"{too_big[0]} is outside PostgreSQL's integer range"
    return None


def storable_text(value: str) -> str:
    """Returns: ``value`` with NUL and lone surrogates (``text`` holds neither) as U+FFFD."""
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT_CHARACTER)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def storable_json(value: Any) -> Any:
    """Returns: a decoded JSON value ``jsonb`` accepts.

    Strings (keys too) cleaned as :func:`storable_text`, non-finite floats as None, keys as
    ``str(key)``, tuples as lists; nested values likewise. A value that needs none of that is
    returned as it is (checked on its JSON text, in C: :func:`_needs_cleaning`), the others are
    rebuilt by a walk.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict | list | tuple) and not _needs_cleaning(value):
        return value
    return _cleaned_json(value)


def _needs_cleaning(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    r"""True unless :func:`_cleaned_json` would return an equal value of the same types.

    Serialises ``value`` once with ``allow_nan=False`` (a non-finite float raises) and no ASCII
    escaping (NUL is still written ``\u0000``, a lone surrogate stays and fails UTF-8), then
    parses the text back: a parse equal to ``value`` has only string keys and no tuples
    (``[1] != (1,)``, ``{"1": 0} != {1: 0}``). Anything else JSON cannot write (datetimes,
    cycles) is left to the walk.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return True
    if "\\u0000" in text:
        return True
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return bool(json.loads(text) != value)


def _cleaned_json(value: Any) -> Any:
    """The walk behind :func:`storable_json`: every string, key and float of ``value``."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): _cleaned_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cleaned_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def storable(value: Any) -> Any:
    """Returns: a column value PostgreSQL accepts.

    See :func:`storable_json`; integers outside the 32-bit ``integer`` range become None;
    other scalars are unchanged.
    """
    if isinstance(value, str | dict | list | tuple):
        return storable_json(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if INT32_MIN <= value <= INT32_MAX else None
    return value


def storable_row(row: dict[str, Any], *, parsed_clean: bool = False) -> dict[str, Any]:
    """Returns: ``row`` with :func:`storable` applied to every value.

    Args:
        row: ``{column: value}``.
        parsed_clean: Every text and JSON value of the row was parsed from JSON texts that
            :func:`storable_as_parsed` accepts: only the integer rule is applied (the text and
            JSON rules could change nothing), which spares the JSON round trip of
            :func:`storable_json` for every payload.
    """
    if parsed_clean:
        return {k: _storable_int(v) for k, v in row.items()}
    return {k: storable(v) for k, v in row.items()}


def _storable_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if INT32_MIN <= value <= INT32_MAX else None
    return value


_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_EXPONENT_MARK: Final = b"e000"
"""In a line translated with :data:`models.json_values.NUMBER_MARKS`, where a three-digit exponent
may be (``e``, ``e+`` and ``E-`` before three digits all read ``e000``)."""
_LONG_DIGIT_RUN: Final = b"0" * 100
"""100 digits in a row. A number without a three-digit exponent overflows a float only with
at least 210 digits before its point (``e99`` at most), so every such number has this run;
integers of 20-99 digits (ids) do not trip it, and are stored exactly either way."""
_DIGITS: Final = frozenset(b"0123456789")
_NUMBER_BYTES: Final = frozenset(b"0123456789.+-")
_NUMBER_STARTS: Final = frozenset(b":,[ \n\r\tnrt")
"""Bytes a JSON number can follow: ``:``, ``,``, ``[``, whitespace, or the ``n``/``r``/``t`` of
an escaped whitespace in JSON nested in a string."""


def storable_as_parsed(raw: bytes) -> bool:
    """Says whether what parses from the JSON text ``raw`` can be stored without cleaning.

    ``raw`` is an NDJSON line; the values that matter are those parsed from it and from JSON
    nested in its strings (a nested escape adds backslashes before the same bytes, so the
    marks below match at any depth). PostgreSQL's ``text``/``jsonb`` refuse what these decode
    to: an escaped NUL, a surrogate escape (lone ones cannot be stored; paired ones are flagged
    too, to keep the test a search), ``NaN``/``Infinity``, and numbers that may overflow a float
    to infinity: a three-digit exponent where a number can start (an id such as ``5e123`` is no
    number), or a run of :data:`_LONG_DIGIT_RUN` (``1``, 400 zeros and ``.5`` is ``inf`` to
    :func:`json.loads`, and beside an integer beyond 64 bits
    :func:`pipeline.archive.derived.jsonb_text` writes it with :func:`json.dumps` as
    ``Infinity``, which ``jsonb`` refuses). Raw control characters cannot occur in valid JSON
    strings and valid UTF-8 holds no surrogates.

    Cost: one ``bytes.translate`` and six substring searches, in C (a regular expression took
    ~7 µs per line for the exponent alone); bench ``sink-ingest``'s mix (2.8 KB per line,
    tool results of 1-100 KiB): ~9 µs per line.

    Returns:
        True when no such mark is found. False may be a false alarm: the caller then cleans.
    """
    if b"\\u" in raw and (b"\\u0000" in raw or _surrogate_escape(raw)):
        return False
    if b"NaN" in raw or b"Infinity" in raw:
        return False
    marked = raw.translate(NUMBER_MARKS)
    if _LONG_DIGIT_RUN in marked:
        return False
    at = marked.find(_EXPONENT_MARK)
    while at >= 0:  # hex ids (``3e456``) make false marks common: each is checked
        if _exponent_of_a_number(raw, at):
            return False
        at = marked.find(_EXPONENT_MARK, at + 1)
    return True


def _surrogate_escape(raw: bytes) -> bool:
    return (b"\\ud" in raw or b"\\uD" in raw) and _SURROGATE_ESCAPE.search(raw) is not None


def _exponent_of_a_number(raw: bytes, mark_at: int) -> bool:
    """True when the ``e000`` mark at ``mark_at`` is the exponent of a number.

    The mark's ``e`` is ``e``/``E`` or a sign right after one; before the ``e``, a digit run
    (with its point and sign) that starts where a number can (:data:`_NUMBER_STARTS`).
    """
    at = mark_at
    if raw[at] in b"+-":
        at -= 1
        if at < 0 or raw[at] not in b"eE":
            return False
    elif raw[at] not in b"eE":
        return False
    at -= 1
    if at < 0 or raw[at] not in _DIGITS:
        return False
    while at >= 0 and raw[at] in _NUMBER_BYTES:
        at -= 1
    return at < 0 or raw[at] in _NUMBER_STARTS
