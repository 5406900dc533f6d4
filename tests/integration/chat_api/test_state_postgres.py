"""The Chat API's state on the real PostgreSQL (``CHATSCRIBE_API_DATABASE_URL`` by URL).

The stores work there as on SQLite, and a restarted server continues a thread from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest
from pydantic import SecretStr

from chat_api.errors import SessionInvalidError, UserLimitError
from chat_api.state.database import open_state
from chat_api.state.sessions import SessionStore
from chat_api.state.threads import StoredMessage, ThreadStore
from chat_api.state.users import UserDirectory
from models.chat import GenerateSessionRequest, SessionSettings
from tests.integration.chat_api.chat_support import session, stream_lines

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration.chat_api.conftest import RunningServer, ServerStarter


@pytest.fixture
def pg_state_url(database_url: str, pg_schema: str) -> str:
    """The shared PostgreSQL, with a fresh schema first on the search path."""
    return f"{database_url}?options={quote(f'-csearch_path={pg_schema}')}"


def test_the_stores_work_on_postgresql(pg_state_url: str) -> None:
    state = open_state(pg_state_url, account="demo", api_keys=["k"])
    assert state.account_of_key("k") == "demo"
    users = UserDirectory(state, declared_attributes={"origin"}, max_external_users=1)
    long_id = "x" * 2000
    alice = users.resolve(SessionSettings(external_id=long_id, is_ephemeral=False))
    with pytest.raises(UserLimitError):
        users.resolve(SessionSettings(external_id="bob"))
    threads = ThreadStore(state)
    thread = threads.create(alice)
    turn_no = threads.begin_turn(thread, question="q", message_id="1" * 40, user_message_id="u")
    answer = StoredMessage("a", "assistant", "answer", content="A")
    threads.end_turn(thread, turn_no, status="completed", messages=[answer], spec={"v": 1})
    assert threads.find(thread.chat_id, owner=alice.key).last_spec == {"v": 1}
    assert [m["content"] for m in threads.history(thread.chat_id)] == ["q", "A"]
    sessions = SessionStore(state)
    made = sessions.create(GenerateSessionRequest(external_id=long_id), user_key=alice.key)
    sessions.redeem(made.session_id)
    with pytest.raises(SessionInvalidError):
        sessions.redeem(made.session_id)
    assert users.remove("external", long_id) is True
    assert threads.get(thread.chat_id) is None


async def test_a_server_on_postgresql_continues_a_thread_after_a_restart(
    start_server: ServerStarter, client: httpx.AsyncClient, pg_state_url: str
) -> None:
    settings = {**session("pia"), "isEphemeral": False}
    with start_server(api_database_url=pg_state_url) as api:
        body = {"input": "Average arrival delay by carrier", "sessionSettings": settings}
        first = await stream_lines(client, api, body)
    chat_id = first[0]["state"]["chatId"]
    with start_server(api_database_url=pg_state_url) as restarted:
        follow_up = {"input": "and only from JFK?", "chatId": chat_id, "sessionSettings": settings}
        second = await stream_lines(client, restarted, follow_up)
    assert second[0]["state"]["chatId"] == chat_id
    assert [m["role"] for m in second[-2]["state"]["messages"]] == ["user", "assistant"] * 2


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_two_replicas_on_one_state_database_never_revoke_each_others_keys(
    start_server: ServerStarter, pg_state_url: str, tmp_path: Path, database: str
) -> None:
    """Configured keys live in each process; a replica's start stores nor deletes none."""
    url = pg_state_url if database == "postgresql" else f"sqlite:///{tmp_path}/shared.sqlite3"
    body = session("alice", origin="JFK")

    async def status(client: httpx.AsyncClient, server: RunningServer, key: str) -> int:
        headers = {"Authorization": f"Api-Key {key}"}
        return (await client.post(server.session_url, json=body, headers=headers)).status_code

    with (
        start_server(api_database_url=url, api_keys=(SecretStr("blue-key"),)) as blue,
        start_server(api_database_url=url, api_keys=(SecretStr("green-key"),)) as green,
    ):
        async with httpx.AsyncClient(timeout=30) as client:
            assert await status(client, blue, "blue-key") == 200  # green started after blue
            assert await status(client, green, "green-key") == 200
            assert await status(client, blue, "green-key") == 401
            assert await status(client, green, "blue-key") == 401
