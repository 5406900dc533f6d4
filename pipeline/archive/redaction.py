"""Redaction rules: regular expressions and named detectors applied to content (pure).

A :class:`Redactor` replaces every match of its rules in a text with ``[REDACTED:<rule>]``.
Applied to a raw NDJSON line it works on the line's text (invalid UTF-8 kept through
``surrogateescape``), so the line stays the same JSON: the detectors match no quote, backslash
or control character, and a custom pattern should not either (:meth:`Redactor.redact_line`
checks that a line that parsed still parses, and otherwise falls back to a whole-line marker).

Named detectors (:data:`DETECTORS`): ``email``, ``phone`` (international or North American
forms), ``credit_card`` (13–19 digits in groups), ``ipv4``, ``iban``. They are deliberately
simple patterns, not a PII classifier.

Configured with ``CHATSCRIBE_REDACT_DETECTORS`` (comma-separated names) and
``CHATSCRIBE_REDACT_PATTERNS`` (a JSON list of regular expressions) in
:class:`pipeline.settings.Settings`; applied by the sink before storage, and by
``chatscribe retention apply`` to content older than a policy's age.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pipeline.errors import RedactionRuleError

DETECTORS: Final[dict[str, str]] = {
    "email": r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
    "phone": r"(?<![\w.])\+?\d{1,3}[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w.])",
    "credit_card": r"(?<!\d)(?:\d{4}[ -]?){3}\d{1,7}(?!\d)",
    "ipv4": r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])",
    "iban": r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b",
}
WHOLE_LINE: Final = b'{"redacted":true}'
"""What a line becomes when a custom pattern would have broken its JSON."""


@dataclass(frozen=True)
class Redactor:
    """Compiled redaction rules.

    Args:
        rules: ``(name, compiled pattern)`` pairs, applied in order.
    """

    rules: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def build(cls, *, detectors: Sequence[str] = (), patterns: Sequence[str] = ()) -> Redactor:
        """Compiles named detectors and custom patterns (custom ones named ``pattern<N>``).

        Raises:
            RedactionRuleError: An unknown detector name or an invalid pattern.
        """
        rules: list[tuple[str, re.Pattern[str]]] = []
        for name in detectors:
            if name not in DETECTORS:
                raise RedactionRuleError(
                    f"unknown redaction detector {name!r}; known: {', '.join(sorted(DETECTORS))}",
                    rule=name,
                )
            rules.append((name, re.compile(DETECTORS[name])))
        for n, pattern in enumerate(patterns, start=1):
            try:
                rules.append((f"pattern{n}", re.compile(pattern)))
            except re.error as exc:
                raise RedactionRuleError(
                    f"invalid redaction pattern {pattern!r}: {exc}", rule=pattern
                ) from exc
        return cls(tuple(rules))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def redact(self, text: str) -> str:
        """Returns: ``text`` with every match replaced by ``[REDACTED:<rule>]``."""
        for name, pattern in self.rules:
            text = pattern.sub(f"[REDACTED:{name}]", text)
        return text

    def redact_line(self, raw: bytes) -> bytes:
        """Redacts one raw NDJSON line.

        Returns:
            The line unchanged (same object) when nothing matched; else the redacted bytes,
            still valid JSON when the original was, or :data:`WHOLE_LINE`.
        """
        text = raw.decode("utf-8", "surrogateescape")
        redacted = self.redact(text)
        if redacted == text:
            return raw
        if _is_json(text) and not _is_json(redacted):
            return WHOLE_LINE
        return redacted.encode("utf-8", "surrogateescape")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
