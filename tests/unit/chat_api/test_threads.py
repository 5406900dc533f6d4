"""The in-memory thread store and embed sessions: ownership, one turn at a time, abort, expiry."""

from __future__ import annotations

import itertools

import pytest

from chat_api.errors import ThreadBusyError, ThreadNotFoundError, ThreadOwnerError
from chat_api.sessions import SessionStore
from chat_api.threads import ThreadStore
from models.chat import GenerateSessionRequest


def _store(max_threads: int = 10) -> ThreadStore:
    counter = itertools.count()
    return ThreadStore(max_threads=max_threads, token=lambda: f"t{next(counter)}")


def test_a_thread_is_found_only_by_its_owner() -> None:
    store = _store()
    thread = store.create("external:alice")
    assert store.find(thread.chat_id, owner="external:alice") is thread
    with pytest.raises(ThreadNotFoundError):
        store.find(thread.chat_id, owner="external:mallory")
    with pytest.raises(ThreadNotFoundError):
        store.find("nope", owner="external:alice")


def test_a_second_turn_while_one_runs_is_refused() -> None:
    store = _store()
    thread = store.create("external:alice")
    store.start_turn(thread)
    with pytest.raises(ThreadBusyError, match="Streaming for thread is in progress"):
        store.start_turn(thread)
    store.finish_turn(thread, messages=[{"id": "u", "role": "user", "content": "q"}], spec=None)
    assert thread.state == "done"
    store.start_turn(thread)
    assert thread.turns == 2
    assert thread.messages == [{"id": "u", "role": "user", "content": "q"}]


def test_abort_signals_only_a_running_turn_of_its_owner() -> None:
    store = _store()
    thread = store.create("external:alice")
    assert store.abort(thread.chat_id, requester="external:alice") is False
    event = store.start_turn(thread)
    with pytest.raises(ThreadOwnerError):
        store.abort(thread.chat_id, requester="external:mallory")
    assert not event.is_set()
    assert store.abort(thread.chat_id, requester=None) is True
    assert event.is_set()
    assert store.abort(thread.chat_id, requester="external:alice") is False
    with pytest.raises(ThreadNotFoundError):
        store.abort("nope", requester=None)
    assert "aborts=1" in repr(store)


def test_idle_threads_are_evicted_oldest_first() -> None:
    store = _store(max_threads=2)
    first = store.create("a")
    running = store.create("a")
    store.start_turn(running)
    third = store.create("a")
    assert len(store) == 2
    with pytest.raises(ThreadNotFoundError):
        store.find(first.chat_id, owner="a")
    assert store.find(running.chat_id, owner="a") is running
    assert store.find(third.chat_id, owner="a") is third


def test_embed_sessions_expire() -> None:
    now = [100.0]
    sessions = SessionStore(ttl_s=300.0, clock=lambda: now[0])
    made = sessions.create(GenerateSessionRequest(external_id="alice"))
    assert sessions.get(made.session_id) is made
    now[0] += 300.0
    assert sessions.get(made.session_id) is None
