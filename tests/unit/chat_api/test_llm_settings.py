"""The language-model reader's settings (issue 23): endpoint required, key from a named variable.

The key is read from the environment variable ``llm_api_key_env`` names, held as a secret and
never shown in a repr (the settings', the configuration's or the client's).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chat_api.reader.llm import ChatModel
from chat_api.settings import ChatApiSettings

KEY = "sk-test-0123456789"


def test_llm_reader_without_endpoint_fails_at_start_naming_the_variables() -> None:
    with pytest.raises(ValidationError, match="CHATSCRIBE_LLM_BASE_URL and CHATSCRIBE_LLM_MODEL"):
        ChatApiSettings(reader="llm")
    with pytest.raises(ValidationError, match="needs CHATSCRIBE_LLM_MODEL"):
        ChatApiSettings(reader="hybrid", llm_base_url="http://127.0.0.1:1/v1")


def test_key_comes_from_the_named_variable_and_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_LLM_KEY", KEY)
    settings = ChatApiSettings(
        reader="llm", llm_base_url="http://127.0.0.1:1/v1", llm_model="m",
        llm_api_key_env="TEAM_LLM_KEY",
    )  # fmt: skip
    config = settings.language_model()
    assert config is not None and config.api_key is not None
    assert config.api_key.get_secret_value() == KEY
    for shown in (repr(settings), repr(config), repr(ChatModel(config))):
        assert KEY not in shown


def test_rule_readers_have_no_language_model() -> None:
    assert (
        ChatApiSettings(reader="rules", llm_base_url="http://x/v1", llm_model="m").language_model()
        is None
    )
