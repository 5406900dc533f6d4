r"""JSON text to Python values: orjson's speed with the standard library's results.

orjson parses several times faster than :func:`json.loads`, but differs from it in three ways
that matter to an archive (https://github.com/ijl/orjson#deserialize):

* an integer beyond 64 bits becomes a ``float`` (precision lost) instead of an ``int``;
* ``NaN``, ``Infinity`` and numbers beyond ``float`` are refused;
* a lone UTF-16 surrogate escape (``"\ud800"``) is refused.

:func:`loads` takes orjson's result only where it is the standard library's: text with a run of
19 digits (every integer of 2**63 or more has one) and text orjson refuses go to
:func:`json.loads`, which gives the value or the error it always gave.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

NUMBER_MARKS: Final = bytes.maketrans(b"123456789E+-", b"000000000eee")
"""A ``bytes.translate`` table: every digit becomes ``0``, ``E`` and the signs ``e``, and no other
byte becomes ``0``, so a run of ``0`` in the result is a run of digits in the text. Shared with
:func:`models.archive.storable_as_parsed`, which also looks for exponents (``e000``)."""
_LONG_RUN: Final = b"0" * 19

MAX_DEPTH: Final = 100
"""Levels of arrays and objects a chat line may nest (:func:`deeper_than`); deeper lines are kept
raw with a parse error (:func:`models.records.parse_line`).

Deeper values are legal JSON but break what reads them later, by recursion: pydantic's
serializer raises past 254 levels ("Maximum serialization depth exceeded", pydantic-core's
recursion guard) and orjson refuses to write more than 254 (https://github.com/ijl/orjson,
"Serialize"), so one such line would fail the sink's every retry (a poison pill). Chat lines nest
a handful of levels (a Vega-Lite spec inside a tool result: about a dozen)."""
WRITABLE_DEPTH: Final = 254
"""The deepest value orjson writes; :func:`loads` refuses deeper text, which the archive's
``jsonb`` writers (:func:`pipeline.archive.derived.jsonb_text`) could not store."""


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Says whether a decoded JSON value nests more than ``limit`` arrays and objects.

    An iterative walk over the containers only (no recursion, so it is safe on any depth the
    parsers return: orjson stops at 1,024 levels, :func:`json.loads` at the recursion limit).
    A chat line's large payloads are strings, so a line costs a few dozen steps; a value of
    many small containers (rows as arrays) costs one step per container and per member.

    Args:
        value: What :func:`loads` or :func:`orjson.loads` returned.
        limit: The deepest nesting allowed (a scalar nests 0 levels, ``[]`` one).

    Returns:
        True when some member lies inside more than ``limit`` arrays and objects.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if not isinstance(container, dict | list):
            continue
        if depth > limit:
            return True
        members = container.values() if isinstance(container, dict) else container
        stack.extend((m, depth + 1) for m in members if isinstance(m, dict | list))
    return False


def exact_for_orjson(text: str | bytes) -> bool:
    r"""Returns: False when ``text`` has a run of 19 digits (an integer orjson may round).

    Digits become ``0`` (``bytes.translate`` with :data:`NUMBER_MARKS`), then the run is
    searched for as a substring: on an 80 KiB SQL result of numbers, 53 µs against 700 µs for
    the regular expression ``[0-9]{19}`` (which tries every position of every long number) and
    1.7 ms for ``\d{19}``; orjson itself parses it in 116 µs.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return _LONG_RUN not in data.translate(NUMBER_MARKS)


def loads(text: str | bytes) -> Any:
    """Parses JSON text exactly as :func:`json.loads` does, through orjson when that is the same.

    Args:
        text: JSON text (bytes: UTF-8, as :func:`json.loads` takes them).

    Returns:
        The decoded value.

    Raises:
        json.JSONDecodeError: The text is not JSON (the standard library's error and message),
            nests deeper than :data:`WRITABLE_DEPTH` levels (:func:`writable`), or holds an
            integer of more than 4,300 digits (https://docs.python.org/3/library/stdtypes.html#int-max-str-digits).
    """
    value = _decoded(text)
    if _may_nest_deeply(text) and not writable(value):
        raise json.JSONDecodeError(f"nested deeper than {WRITABLE_DEPTH} levels", "", 0)
    return value


def _may_nest_deeply(text: str | bytes) -> bool:
    if isinstance(text, str):
        return text.count("[") + text.count("{") > WRITABLE_DEPTH
    return text.count(b"[") + text.count(b"{") > WRITABLE_DEPTH


def writable(value: Any) -> bool:
    """Says whether a decoded value can be written back as JSON (it nests at most 254 levels).

    The probe is the write itself: orjson refuses more than :data:`WRITABLE_DEPTH` levels
    ("Recursion limit reached", https://github.com/ijl/orjson#serialize); a value orjson refuses
    for another reason (an integer beyond 64 bits) goes to :func:`json.dumps`, as the archive's
    writers do, which overflows the recursion limit instead. Cost: one write in C (about a
    sixth of :func:`loads` on a SQL result).
    """
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "ecursion" in str(exc):
            return False
        try:
            json.dumps(value)
        except RecursionError:
            return False
        except (TypeError, ValueError):
            return True
    return True


def _decoded(text: str | bytes) -> Any:
    if exact_for_orjson(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # NaN, a lone surrogate, or not JSON: the standard library says which
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # orjson refuses more than 1,024 levels; json.loads overflows
        raise json.JSONDecodeError("nested deeper than the recursion limit", "", 0) from None
    except ValueError as exc:  # an integer of more than 4,300 digits (int's conversion limit)
        raise json.JSONDecodeError(str(exc), "", 0) from None
