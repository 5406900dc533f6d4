from __future__ import annotations

import json

import pytest

from pipeline.archive.redaction import WHOLE_LINE, Redactor
from pipeline.errors import RedactionRuleError


def test_email_detector_redacts_inside_json_and_keeps_it_json() -> None:
    raw = json.dumps({"id": "u1", "content": "mail bob@example.com or call"}).encode()
    redacted = Redactor.build(detectors=["email"]).redact_line(raw)
    assert json.loads(redacted)["content"] == "mail [REDACTED:email] or call"


def test_nested_tool_payload_is_redacted_too() -> None:
    payload = json.dumps({"sqlQuery": "SELECT * FROM users WHERE email = 'ann@corp.io'"})
    raw = json.dumps({"id": "t1", "toolCall": {"input": payload}}).encode()
    redacted = json.loads(Redactor.build(detectors=["email"]).redact_line(raw))
    assert "ann@corp.io" not in redacted["toolCall"]["input"]
    assert json.loads(redacted["toolCall"]["input"])["sqlQuery"].endswith("'[REDACTED:email]'")


def test_unchanged_line_is_returned_as_is_and_invalid_utf8_survives() -> None:
    redactor = Redactor.build(patterns=[r"ACME-\d+"])
    raw = b'{"content":"caf\xe9 ACME-42"}'
    assert redactor.redact_line(b'{"content":"nothing"}') == b'{"content":"nothing"}'
    assert redactor.redact_line(raw) == b'{"content":"caf\xe9 [REDACTED:pattern1]"}'


def test_pattern_that_would_break_json_redacts_the_whole_line() -> None:
    raw = json.dumps({"content": "secret"}).encode()
    assert Redactor.build(patterns=[r'"content"']).redact_line(raw) == WHOLE_LINE


def test_unknown_detector_and_bad_pattern_are_refused() -> None:
    with pytest.raises(RedactionRuleError, match="unknown redaction detector"):
        Redactor.build(detectors=["ssn"])
    with pytest.raises(RedactionRuleError, match="invalid redaction pattern"):
        Redactor.build(patterns=["("])
    assert not Redactor.build()
