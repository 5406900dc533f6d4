"""Outbound policy: chat URLs only under the allow-list, the worker's key only to its targets."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.chat.targets import OutboundPolicy, UrlPrefix
from pipeline.errors import ChatUrlRefusedError
from pipeline.runs.runner import submit_questions_file
from pipeline.settings import Settings

PATH = "/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
OWN = "http://127.0.0.1:8400" + PATH


def _policy(**settings: object) -> OutboundPolicy:
    return OutboundPolicy.from_settings(Settings(chat_url=OWN, **settings))  # type: ignore[arg-type]


def test_default_allows_the_configured_chat_api_with_the_workers_key() -> None:
    policy = _policy()
    policy.check(OWN, own_key=True)
    policy.check("http://127.0.0.1:8400/api/v1/public/local/demo/agents/2/chat/x", own_key=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:15432" + PATH,  # the archive's PostgreSQL
        "http://127.0.0.1:19092" + PATH,  # Kafka
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "https://127.0.0.1:8400" + PATH,  # another scheme
        "http://localhost:8400" + PATH,  # another host name
        "http://attacker.example" + PATH,
    ],
)
def test_default_refuses_every_other_target(url: str) -> None:
    with pytest.raises(ChatUrlRefusedError, match="CHATSCRIBE_CHAT_URL_ALLOW") as caught:
        _policy().check(url, own_key=False)
    assert caught.value.url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8400@attacker.example" + PATH,  # user information
        "http://user:pw@127.0.0.1:8400" + PATH,
        "http://127.0.0.1:8400/api/v1/../../admin",  # dot segments
        "http://127.0.0.1:8400/api/%2e%2e/admin",  # encoded dots
        "http://127.0.0.1:8400\\@attacker.example/",  # a backslash
        "http://127.0.0.1:8400/a b",  # whitespace
        "http://127.0.0.1:99999/",  # no such port
        "ftp://127.0.0.1:8400/",
    ],
)
def test_urls_parsers_read_differently_are_refused(url: str) -> None:
    with pytest.raises(ChatUrlRefusedError):
        _policy().check(url, own_key=False)


def test_the_workers_key_goes_only_to_the_targets_it_is_bound_to() -> None:
    hosted = "https://agent.acme.example/api/v1/public/eu/acme/agents/3/chat/stream-chat-state"
    policy = _policy(chat_url_allow=("http://127.0.0.1:8400", "https://agent.acme.example"))
    policy.check(hosted, own_key=False)  # with the job's own key: allowed
    with pytest.raises(ChatUrlRefusedError, match="CHATSCRIBE_API_KEY_URLS"):
        policy.check(hosted, own_key=True)
    policy.check(OWN, own_key=True)


def test_path_prefixes_match_whole_segments_and_ports_exactly() -> None:
    policy = _policy(chat_url_allow=("https://agent.example:8443/api/v1/public/eu",))
    policy.check("https://agent.example:8443/api/v1/public/eu/acme/chat", own_key=False)
    for url in (
        "https://agent.example:8443/api/v1/public/eu-west/acme/chat",
        "https://agent.example:443/api/v1/public/eu/acme/chat",
        "https://agent.example/api/v1/public/eu/acme/chat",
    ):
        with pytest.raises(ChatUrlRefusedError):
            policy.check(url, own_key=False)


def test_any_port_entry_allows_every_port_of_that_host_only() -> None:
    policy = _policy(chat_url_allow=("http://127.0.0.1:*",), api_key_urls=("http://127.0.0.1:*",))
    policy.check("http://127.0.0.1:51234" + PATH, own_key=True)
    with pytest.raises(ChatUrlRefusedError):
        policy.check("http://127.0.0.2:51234" + PATH, own_key=True)


def test_allow_lists_read_from_the_environment_and_bad_entries_fail_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHATSCRIBE_CHAT_URL_ALLOW", "http://127.0.0.1:8400, https://a.example/x")
    assert Settings().chat_url_allow == ("http://127.0.0.1:8400", "https://a.example/x")
    assert str(UrlPrefix.parse("https://a.example/x/")) == "https://a.example:443/x"
    monkeypatch.setenv("CHATSCRIBE_CHAT_URL_ALLOW", "http://user@host/")
    with pytest.raises(ValidationError, match="chat_url_allow"):
        Settings()


async def test_batch_refuses_a_questions_file_naming_a_chat_url_outside_the_allow_list(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        "chatUrl: http://127.0.0.1:15432/api/v1/chat\n"
        "personas: [{name: a, sessionSettings: {externalId: a}}]\n"
        "questions: [{text: hi}]\n"
    )
    # Refused before anything is recorded or published: these settings reach no service.
    nowhere = "postgresql+psycopg://nobody:none@127.0.0.1:1/none"
    settings = Settings(chat_url=OWN, kafka_bootstrap="127.0.0.1:1", database_url=nowhere)
    with pytest.raises(ChatUrlRefusedError, match=r"127\.0\.0\.1:15432"):
        await submit_questions_file(settings, path)
