"""Secrets masked in text shown to people or logged (models/masking.py)."""

from __future__ import annotations

import logging

import pytest

from models.masking import AccessLogMask, is_secret_name, mask_bytes, mask_query, mask_text

SECRET = "sk-4f1c9e"


@pytest.mark.parametrize(
    "text",
    [
        f'{{"job_id": "j1", "api_key": "{SECRET}", "question": "q"}}',
        f'{{"apiKey":"{SECRET}"',  # cut: not JSON any more
        f'{{"Authorization": "Bearer {SECRET}"}}',
        f'{{"sessionId": "{SECRET}", "x-api-key": "{SECRET}"}}',
        f"refused: Authorization: Api-Key {SECRET}, retry",
        f'{{"token": "a\\"{SECRET}"}}',
    ],
)
def test_every_secret_value_is_masked_and_the_rest_kept(text: str) -> None:
    masked = mask_text(text)
    assert SECRET not in masked and "***" in masked
    assert SECRET.encode() not in mask_bytes(b"\xff" + text.encode())
    assert '"job_id": "j1"' in mask_text('{"job_id": "j1", "api_key": "k"}')


def test_secret_names_are_recognised_in_any_spelling() -> None:
    for name in ("Authorization", "api_key", "X-Api-Key", "apiKey", "token", "Set-Cookie"):
        assert is_secret_name(name), name
    for name in ("chatscribe-dlq-reason", "job_id", "question"):
        assert not is_secret_name(name), name


def test_a_query_keeps_its_names_and_loses_its_values() -> None:
    assert (
        mask_query(f"/embed/chat/c1/?session={SECRET}&x=1") == "/embed/chat/c1/?session=***&x=***"
    )
    assert mask_query(f"/p?{SECRET}") == "/p?***"
    assert mask_query("/healthz") == "/healthz"


def test_the_access_log_filter_masks_uvicorns_request_line() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/embed/chat/c1?session={SECRET}", "1.1", 404),
        None,
    )
    assert AccessLogMask().filter(record)
    assert SECRET not in record.getMessage() and "session=***" in record.getMessage()
