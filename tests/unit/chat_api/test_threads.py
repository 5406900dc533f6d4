"""The state database: threads and turns, users (TTL, limit, internal), embed sessions.

Each test opens its own SQLite file; a fake clock drives expiry.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from chat_api.errors import (
    SessionInvalidError,
    SessionNotFoundError,
    ThreadNotFoundError,
    UndeclaredAttributeError,
    UnknownInternalUserError,
    UserLimitError,
)
from chat_api.state.database import (
    StateDatabase,
    add_key,
    count_keys,
    key_digest,
    open_state,
    revoke_key,
)
from chat_api.state.sessions import SessionStore
from chat_api.state.threads import StoredMessage, ThreadStore
from chat_api.state.users import DEFAULT_MAX_EXTERNAL_USERS, UserDirectory
from models.chat import GenerateSessionRequest, SessionSettings


class Clock:
    """Epoch seconds that tests move by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(tmp_path: Path, clock: Clock) -> StateDatabase:
    return open_state(
        f"sqlite:///{tmp_path}/state.sqlite3", account="demo", api_keys=["k1"], clock=clock
    )


def _users(
    state: StateDatabase, *, max_external_users: int = DEFAULT_MAX_EXTERNAL_USERS
) -> UserDirectory:
    return UserDirectory(
        state,
        declared_attributes={"origin"},
        default_ttl_s=100,
        max_external_users=max_external_users,
    )


def _threads(state: StateDatabase) -> ThreadStore:
    counter = itertools.count()
    return ThreadStore(state, token=lambda: f"t{next(counter)}")


def test_keys_are_stored_hashed_and_cli_keys_stay_until_revoked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.sqlite3"
    state = open_state(url, account="demo", api_keys=["old", "kept"])
    assert state.account_of_key("old") == "demo"
    assert key_digest("old") != "old"
    assert add_key(state, "old") is True  # stored: it outlives the variable
    reopened = open_state(url, account="demo", api_keys=["kept"])
    assert reopened.account_of_key("old") == "demo"
    assert revoke_key(reopened, "old") is True
    assert revoke_key(reopened, "old") is False
    assert reopened.account_of_key("old") is None
    assert add_key(reopened, "new") is True
    assert reopened.account_of_key("new") == "demo"
    assert count_keys(reopened) == 2


def test_a_thread_is_found_only_by_its_owner(state: StateDatabase) -> None:
    alice = _users(state).resolve(SessionSettings(external_id="alice"))
    threads = _threads(state)
    thread = threads.create(alice)
    assert threads.find(thread.chat_id, owner="external:alice").memory_id == thread.memory_id
    with pytest.raises(ThreadNotFoundError):
        threads.find(thread.chat_id, owner="external:mallory")
    with pytest.raises(ThreadNotFoundError):
        threads.find("nope", owner="external:alice")


def test_a_turn_keeps_its_question_complete_messages_and_follow_up(state: StateDatabase) -> None:
    alice = _users(state).resolve(SessionSettings(external_id="alice"))
    threads = _threads(state)
    thread = threads.create(alice)
    turn_no = threads.begin_turn(thread, question="q1", message_id=None, user_message_id="u1")
    tool = StoredMessage("c1", "assistant", "tool", tool_call={"name": "svcMeta", "result": "{}"})
    answer = StoredMessage("a1", "assistant", "answer", content="A1")
    spec = {"version": 1, "spec": {"view": "flights"}}
    threads.end_turn(thread, turn_no, status="completed", messages=[tool, answer], spec=spec)
    second = threads.begin_turn(
        thread, question="q2", message_id="1700000000000-message", user_message_id="u2"
    )
    threads.end_turn(thread, second, status="aborted", messages=[], spec=None)
    assert threads.history(thread.chat_id) == [
        {"id": "u1", "role": "user", "content": "q1"},
        {"id": "a1", "role": "assistant", "content": "A1"},
        {"id": "u2", "role": "user", "content": "q2"},
    ]
    found = threads.find(thread.chat_id, owner=alice.key)
    assert found.last_spec == spec
    assert found.turns == 2
    assert threads.turn_statuses(thread.chat_id) == ["completed", "aborted"]
    assert threads.find_turn(alice.key, "1700000000000-message") == (thread.chat_id, "aborted")
    assert threads.find_turn("external:bob", "1700000000000-message") is None


def test_a_running_turn_of_a_dead_process_is_marked_interrupted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/crash.sqlite3"
    state = open_state(url, account="demo", api_keys=["k"])
    alice = _users(state).resolve(SessionSettings(external_id="alice"))
    threads = _threads(state)
    thread = threads.create(alice)
    threads.begin_turn(thread, question="q", message_id=None, user_message_id="u")
    reopened = open_state(url, account="demo", api_keys=["k"])
    assert ThreadStore(reopened).turn_statuses(thread.chat_id) == ["interrupted"]


def test_an_ephemeral_user_and_its_threads_are_removed_after_its_ttl(
    state: StateDatabase, clock: Clock
) -> None:
    users = _users(state)
    alice = users.resolve(SessionSettings(external_id="alice", ephemeral_ttl_seconds=10))
    assert alice.expires_at_s == clock.now + 10
    kept = users.resolve(SessionSettings(external_id="kept", is_ephemeral=False))
    assert kept.expires_at_s is None
    threads = _threads(state)
    chat_id = threads.create(alice).chat_id
    clock.now += 9
    users.resolve(SessionSettings(external_id="alice"))  # a later request does not extend it
    clock.now += 1
    assert users.purge_expired() == 1
    assert threads.get(chat_id) is None
    assert [u["user_id"] for u in users.list_users("external")] == ["kept"]
    again = users.resolve(SessionSettings(external_id="alice"))
    assert again.row_id != alice.row_id
    assert again.expires_at_s == clock.now + 100


def test_the_external_user_limit_refuses_the_next_user_only(state: StateDatabase) -> None:
    users = _users(state, max_external_users=2)
    users.resolve(SessionSettings(external_id="a"))
    users.resolve(SessionSettings(external_id="b"))
    with pytest.raises(UserLimitError, match="external user limit reached"):
        users.resolve(SessionSettings(external_id="c"))
    users.resolve(SessionSettings(external_id="a"))
    assert users.count_external() == 2


def test_attributes_must_be_declared(state: StateDatabase) -> None:
    users = _users(state)
    settings = SessionSettings.model_validate(
        {"externalId": "a", "userAttributes": [{"name": "dest", "value": "ORD"}]}
    )
    with pytest.raises(UndeclaredAttributeError, match="dest") as caught:
        users.resolve(settings)
    assert caught.value.status_code == 400
    with pytest.raises(UndeclaredAttributeError):
        users.add_internal("ann@example.com", attributes={"dest": "ORD"})


def test_an_internal_user_must_exist_and_brings_its_own_identity(state: StateDatabase) -> None:
    users = UserDirectory(state, declared_attributes={"origin"}, declared_groups={"ops"})
    with pytest.raises(UnknownInternalUserError, match="chatscribe api users add"):
        users.resolve(SessionSettings(internal_id="ann@example.com"))
    users.add_internal("ann@example.com", groups=["ops"], attributes={"origin": "JFK"})
    ann = users.resolve(SessionSettings(internal_id="ann@example.com"))
    assert ann.key == "internal:ann@example.com"
    assert ann.context.groups == ("ops",)
    assert dict(ann.context.attributes) == {"origin": "JFK"}
    assert ann.expires_at_s is None
    assert users.remove("internal", "ann@example.com") is True
    assert users.remove("internal", "ann@example.com") is False


def test_embed_sessions_are_single_use_expire_and_revoke(
    state: StateDatabase, clock: Clock
) -> None:
    sessions = SessionStore(state, ttl_s=300.0)
    identity = GenerateSessionRequest(external_id="alice")
    _users(state).resolve(SessionSettings(external_id="alice", is_ephemeral=False))
    first = sessions.create(identity, user_key="external:alice")
    assert sessions.redeem(first.session_id).user_key == "external:alice"
    with pytest.raises(SessionInvalidError, match="already used"):
        sessions.redeem(first.session_id)
    late = sessions.create(identity, user_key="external:alice")
    clock.now += 300.0
    with pytest.raises(SessionInvalidError, match="expired"):
        sessions.redeem(late.session_id)
    revoked = sessions.create(identity, user_key="external:alice")
    sessions.revoke(revoked.session_id)
    with pytest.raises(SessionInvalidError, match="revoked"):
        sessions.redeem(revoked.session_id)
    with pytest.raises(SessionInvalidError, match="unknown"):
        sessions.redeem("never-issued")
    with pytest.raises(SessionNotFoundError):
        sessions.revoke("never-issued")
