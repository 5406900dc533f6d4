from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from models.chat import (
    AbortRequest,
    ChatRequest,
    GenerateSessionRequest,
    SessionSettings,
    StreamMessage,
)


def test_session_settings_round_trip_uses_wire_names() -> None:
    wire = {
        "externalId": "analyst-1",
        "email": "a@example.com",
        "userAttributes": [{"name": "origin", "value": "JFK"}],
        "groups": ["ops"],
        "securityContext": {"tenant": 7},
        "ephemeralTtlSeconds": 60,
        "isEphemeral": False,
    }
    settings = SessionSettings.model_validate(wire)
    assert settings.to_wire() == wire
    assert settings.attributes() == {"origin": "JFK"}
    assert settings.user_key == "external:analyst-1"


@pytest.mark.parametrize("field", ["userAttributes", "groups", "securityContext"])
def test_internal_id_refuses_identity_overrides(field: str) -> None:
    values = {
        "userAttributes": [{"name": "x", "value": "1"}],
        "groups": ["g"],
        "securityContext": {},
    }
    with pytest.raises(ValidationError, match=f"{field} not allowed with internalId"):
        SessionSettings.model_validate({"internalId": "boss@example.com", field: values[field]})


@pytest.mark.parametrize("external_id", ["Analyst", "an alyst", "tab\there"])
def test_external_id_must_be_lowercase_without_spaces(external_id: str) -> None:
    with pytest.raises(ValidationError, match="lowercase and contain no spaces"):
        SessionSettings.model_validate({"externalId": external_id})


def test_identity_is_required() -> None:
    with pytest.raises(ValidationError, match="either externalId or internalId"):
        SessionSettings.model_validate({"email": "a@example.com"})


def test_duplicate_attribute_names_are_refused() -> None:
    attrs = [{"name": "origin", "value": "JFK"}, {"name": "origin", "value": "LGA"}]
    with pytest.raises(ValidationError, match="duplicate userAttributes names: origin"):
        SessionSettings.model_validate({"externalId": "a", "userAttributes": attrs})


def test_unknown_session_setting_is_refused() -> None:
    with pytest.raises(ValidationError, match="roles"):
        SessionSettings.model_validate({"externalId": "a", "roles": ["admin"]})


def test_chat_request_branch_default_follows_interface() -> None:
    base = {"sessionSettings": {"externalId": "a"}, "input": "hi"}
    assert ChatRequest.model_validate(base).effective_is_default_branch is True
    dev = ChatRequest.model_validate({**base, "activeBranchName": "dev"})
    assert dev.effective_is_default_branch is False
    main = ChatRequest.model_validate({**base, "activeBranchName": "main", "isDefaultBranch": True})
    assert main.effective_is_default_branch is True


def test_chat_request_requires_session_settings_and_valid_message_id() -> None:
    with pytest.raises(ValidationError, match="sessionSettings"):
        ChatRequest.model_validate({"input": "hi"})
    with pytest.raises(ValidationError, match="messageId"):
        ChatRequest.model_validate(
            {"input": "hi", "sessionSettings": {"externalId": "a"}, "messageId": "12-message"}
        )
    ok = ChatRequest.model_validate(
        {"sessionSettings": {"externalId": "a"}, "messageId": "1700000000000-message"}
    )
    assert ok.input is None


def test_abort_and_generate_session_shapes() -> None:
    assert AbortRequest.model_validate({"chatId": "c1"}).to_wire() == {"chatId": "c1"}
    with pytest.raises(ValidationError):
        AbortRequest.model_validate({})
    with pytest.raises(ValidationError, match="groups not allowed with internalId"):
        GenerateSessionRequest.model_validate({"internalId": "x@example.com", "groups": ["g"]})


def test_stream_message_keeps_unknown_fields() -> None:
    line = {
        "id": "m1",
        "role": "assistant",
        "content": "x",
        "isStructuredResponse": True,
        "sort": 3,
    }
    message = StreamMessage.model_validate(line)
    assert message.model_extra == {"isStructuredResponse": True}
    assert message.to_wire() == line


@pytest.mark.parametrize(
    ("line", "final"),
    [
        ({"role": "assistant", "graphPath": ["final"]}, True),
        ({"role": "assistant", "graphPath": ["final", "x"]}, True),
        ({"role": "assistant", "graphPath": ["final", "x", "y"]}, False),
        ({"role": "user", "graphPath": ["final"]}, False),
        ({"role": "assistant", "graphPath": ["svc_data_analyst_agent"]}, False),
        ({"role": "assistant", "graphPath": []}, False),
        ({"role": "assistant"}, False),
    ],
)
def test_final_answer_rule(line: dict[str, object], final: bool) -> None:
    assert StreamMessage.model_validate(line).is_final_answer is final


def test_sentinels_and_error_lines() -> None:
    cutoff = StreamMessage.model_validate(
        json.loads(
            '{"id":"__cutoff__","role":"assistant","sort":0,"state":{"chatId":"c9","isStreaming":true}}'
        )
    )
    assert cutoff.is_sentinel and cutoff.chat_id == "c9"
    error = StreamMessage.model_validate({"error": "boom"})
    assert error.is_error_line and not error.is_sentinel
