"""The console's query and path parameters, checked before any reaches the archive (pure).

Every parameter a page reads goes through one of these functions. A value absent or empty takes
the page's default; a value present but out of its form or range is a 400 page naming the
parameter (:class:`starlette.exceptions.HTTPException`, rendered by the app), never a 500 from
PostgreSQL (a ``NUL`` in a text value, an ``OFFSET`` beyond ``bigint``, an unknown sort key).

=====================  ===================================================================
text (ids, filters)    at most :data:`MAX_TEXT_CHARS` characters, no control character
integers               decimal digits within the parameter's range (offset
                       0 .. :data:`MAX_OFFSET`, attempt 1 .. :data:`MAX_ATTEMPT`)
choices                one of the page's closed set (sort keys, export formats)
instants               ISO 8601 (``datetime.fromisoformat``); without offset: UTC
search                 at most :data:`MAX_SEARCH_CHARS` characters and
                       :data:`MAX_SEARCH_TERMS` words (each word is a term of
                       ``websearch_to_tsquery``, whose cost grows with their number)
=====================  ===================================================================
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Final

from starlette.exceptions import HTTPException

MAX_TEXT_CHARS: Final = 200
MAX_OFFSET: Final = 1_000_000_000
"""Far beyond any archive's page count, far below PostgreSQL's ``bigint`` ``OFFSET``."""
MAX_ATTEMPT: Final = 2_147_483_647
"""``jobs.attempts`` and ``stream_lines.attempt`` are ``integer`` (PostgreSQL ``int4``)."""
MAX_SEARCH_CHARS: Final = 256
MAX_SEARCH_TERMS: Final = 16
BAD_REQUEST: Final = 400
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_DIGITS: Final = re.compile(r"[0-9]{1,12}")


def refuse(name: str, rule: str) -> HTTPException:
    """Returns: the 400 of parameter ``name`` breaking ``rule`` (to raise)."""
    return HTTPException(BAD_REQUEST, detail=f"parameter {name!r}: {rule}")


def text(args: Mapping[str, str], name: str) -> str | None:
    """Reads a text parameter (an id, a filter value).

    Returns:
        The value, or None when absent or empty.

    Raises:
        HTTPException: 400 for more than :data:`MAX_TEXT_CHARS` characters or a control
            character (PostgreSQL refuses ``NUL`` in ``text``).
    """
    value = args.get(name) or None
    if value is None:
        return None
    if len(value) > MAX_TEXT_CHARS or _CONTROL.search(value):
        raise refuse(name, f"at most {MAX_TEXT_CHARS} characters, no control characters")
    return value


def integer(
    args: Mapping[str, str], name: str, default: int | None, *, low: int, high: int
) -> int | None:
    """Reads a whole number in ``low .. high`` (both included).

    Returns:
        The number, or ``default`` when absent or empty.

    Raises:
        HTTPException: 400 for anything but decimal digits (an optional leading ``-``) or a
            number outside the range.
    """
    value = (args.get(name) or "").strip()
    if not value:
        return default
    digits = value.removeprefix("-")
    if not _DIGITS.fullmatch(digits) or not low <= int(value) <= high:
        raise refuse(name, f"a whole number from {low} to {high}")
    return int(value)


def choice(args: Mapping[str, str], name: str, allowed: Collection[str], default: str) -> str:
    """Reads one of a closed set of values.

    Returns:
        The value, or ``default`` when absent or empty.

    Raises:
        HTTPException: 400 for a value outside ``allowed``.
    """
    value = args.get(name) or default
    if value not in allowed:
        raise refuse(name, f"one of {', '.join(sorted(allowed))}")
    return value


def instant(args: Mapping[str, str], name: str) -> datetime | None:
    """Reads an ISO 8601 date or time (UTC when it gives no offset).

    Returns:
        An aware datetime, or None when absent or empty.

    Raises:
        HTTPException: 400 for text ``datetime.fromisoformat`` does not read.
    """
    value = text(args, name)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise refuse(name, "an ISO 8601 date or time, e.g. 2026-03-01T12:00") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def identifier(name: str, value: str) -> str:
    """Checks a path parameter (a job or run id) as :func:`text` checks a query parameter.

    Returns:
        ``value``.

    Raises:
        HTTPException: 400 as :func:`text`.
    """
    checked = text({name: value}, name)
    if checked is None:
        raise refuse(name, "required")
    return checked


def search_words(args: Mapping[str, str], name: str = "q") -> str:
    """Reads the words of a search (bounds: module docstring).

    Returns:
        The text, stripped; empty when absent.

    Raises:
        HTTPException: 400 for more than :data:`MAX_SEARCH_CHARS` characters, more than
            :data:`MAX_SEARCH_TERMS` words, or a control character.
    """
    value = (args.get(name) or "").strip()
    too_long = len(value) > MAX_SEARCH_CHARS or len(value.split()) > MAX_SEARCH_TERMS
    if too_long or _CONTROL.search(value):
        raise refuse(
            name,
            f"at most {MAX_SEARCH_TERMS} words and {MAX_SEARCH_CHARS} characters,"
            " no control characters",
        )
    return value
