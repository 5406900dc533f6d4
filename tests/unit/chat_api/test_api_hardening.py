"""Issue 12, the parts that need no server.

Keys, reply size, empty attributes, scoped views, metadata totals, expired users, foreign keys and
stream fidelity.

The HTTP-level points (bodies, identities, probing, the embed page) are in
``tests/integration/chat_api/test_http_hardening.py``; the SQL guard in ``test_hostile_sql.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.errors import InvalidRequestError, SessionUserGoneError, ThreadNotFoundError
from chat_api.http.streaming import encode_line
from chat_api.planner.vocabulary import load_vocabulary
from chat_api.search import search_members
from chat_api.semantic.model import SemanticModel, load_model
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.policies import UserContext, resolve_access
from chat_api.sql.warehouse import Warehouse
from chat_api.state import tables
from chat_api.state.database import StateDatabase, add_key, open_state
from chat_api.state.sessions import SessionStore
from chat_api.state.threads import StoredMessage, ThreadStore
from chat_api.state.users import UserDirectory
from models.chat import GenerateSessionRequest, SessionSettings, StreamMessage

ROOT = Path(__file__).resolve().parents[3]
MODEL_DIRS = sorted(p for p in (ROOT / "chat_api" / "data_model").iterdir() if p.is_dir())
JFK = UserContext(attributes={"origin": "JFK"})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


# -- 1. keys ---------------------------------------------------------------------------------


def test_the_variable_is_the_exact_set_of_keys_at_each_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.sqlite3"
    first = open_state(url, account="demo", api_keys=["demo-key", "kept"])
    assert add_key(first, "from-cli") is True
    assert add_key(first, "kept") is True  # stored now: it outlives the variable
    assert add_key(first, "kept") is False
    rotated = open_state(url, account="demo", api_keys=["rotated"])
    assert rotated.account_of_key("demo-key") is None
    assert rotated.account_of_key("rotated") == "demo"
    assert rotated.account_of_key("from-cli") == "demo"
    assert rotated.account_of_key("kept") == "demo"


def test_a_state_opened_without_keys_leaves_the_stored_keys_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.sqlite3"
    served = open_state(url, account="demo", api_keys=["served"])
    add_key(served, "from-cli")
    reopened = open_state(url, account="demo")  # the admin commands open it so
    assert reopened.account_of_key("from-cli") == "demo"
    assert reopened.account_of_key("served") is None  # the process's own, never stored
    assert served.account_of_key("served") == "demo"


def test_a_replica_started_with_other_keys_revokes_none_of_the_first_ones(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.sqlite3"
    blue = open_state(url, account="demo", api_keys=["blue"])
    green = open_state(url, account="demo", api_keys=["green"])
    assert (blue.account_of_key("blue"), green.account_of_key("green")) == ("demo", "demo")
    assert (blue.account_of_key("green"), green.account_of_key("blue")) == (None, None)


def test_configuration_keys_an_earlier_version_stored_are_deleted_at_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keys.sqlite3"
    state = open_state(url, account="demo")
    add_key(state, "old-config", source="config")  # how earlier versions stored the variable
    assert state.account_of_key("old-config") == "demo"
    restarted = open_state(url, account="demo", api_keys=["new"])
    assert restarted.account_of_key("old-config") is None


def test_compose_runs_with_no_well_known_key() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    env = compose["x-chatscribe-env"]
    for name in ("CHATSCRIBE_API_KEYS", "CHATSCRIBE_API_KEY"):
        value = str(env[name])
        assert re.fullmatch(r"\$\{CHATSCRIBE_API_KEYS?:\?[^}]+\}", value), value
    assert "demo-key" not in (ROOT / "docker-compose.yml").read_text(encoding="utf-8")


# -- 2. amplification ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toolbox(model: SemanticModel, warehouse: Warehouse) -> Toolbox:
    return Toolbox(
        model=model, vocabulary=load_vocabulary(warehouse.query_raw), warehouse=warehouse
    )


def _turn_lines(toolbox: Toolbox, question: str, user: UserContext = JFK) -> list[dict[str, Any]]:
    request = TurnRequest(chat_id="c", question=question, user=user, memory_id="m")
    return list(Turn(request, toolbox=toolbox).lines())


@pytest.mark.parametrize("words", [10, 300, 1500])
def test_a_reply_is_linear_in_the_question_with_a_small_constant(
    toolbox: Toolbox, words: int
) -> None:
    question = " ".join(f"zq{i}x" for i in range(words))
    size = sum(len(encode_line(line)) for line in _turn_lines(toolbox, question))
    assert size <= 8 * len(question) + 12_000, (size, len(question))


def test_unknown_words_are_named_once_each_in_a_bounded_list(toolbox: Toolbox) -> None:
    question = " ".join(["blorp"] * 200 + [f"zq{i}x" for i in range(50)])
    lines = _turn_lines(toolbox, question)
    answer = next(line["content"] for line in lines if line.get("graphPath") == ["final"])
    assert answer.count("blorp") == 1
    assert len(re.findall(r"zq\d+x", answer)) <= 10
    assert "and 47 more" in answer  # 51 distinct unknown words, 4 named


# -- 5. empty attributes ---------------------------------------------------------------------


@pytest.mark.parametrize("view", ["flights", "weather"])
def test_an_empty_attribute_value_never_widens_access(model: SemanticModel, view: str) -> None:
    access = resolve_access(model, view, UserContext(attributes={"origin": ""}))
    assert not access.allowed
    assert "origin" in (access.denied_reason or "")


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_attribute_value_is_refused_when_the_user_is_resolved(
    tmp_path: Path, value: str
) -> None:
    users = UserDirectory(open_state(f"sqlite:///{tmp_path}/s.sqlite3", account="demo"),
                          declared_attributes={"origin"})  # fmt: skip
    identity = SessionSettings.model_validate(
        {"externalId": "eve", "userAttributes": [{"name": "origin", "value": value}]}
    )
    with pytest.raises(InvalidRequestError, match=r"userAttributes\.origin"):
        users.resolve(identity)
    with pytest.raises(InvalidRequestError, match="origin"):
        users.add_internal("ann@example.com", attributes={"origin": value})


# -- 6. views scoped by origin ---------------------------------------------------------------


def _origin_views(model: SemanticModel) -> list[str]:
    """Views with an ``origin`` dimension: their rows belong to one NYC airport."""
    return [
        name
        for name, view in model.views.items()
        if any(m.name == "origin" and m.kind == "dimension" for m in view.members)
    ]


@pytest.mark.parametrize("folder", MODEL_DIRS, ids=[p.name for p in MODEL_DIRS])
def test_every_view_whose_rows_belong_to_an_origin_is_scoped_like_flights(
    folder: Path, warehouse: Warehouse
) -> None:
    model = load_model(folder)
    views = _origin_views(model)
    assert {"flights", "weather"} <= set(views)
    for view in views:
        for user, seen in ((JFK, {"JFK"}), (UserContext(), {"JFK", "LGA", "EWR"})):
            compiled = compile_semantic_sql(
                f"SELECT DISTINCT origin FROM {view}", model=model, user=user
            )
            rows = warehouse.run(compiled, row_limit=10).rows
            assert {row[0] for row in rows} == seen, (folder.name, view)


def _table_totals(warehouse: Warehouse) -> set[int]:
    tables_ = [row[0] for row in warehouse.query_raw("SELECT table_name FROM duckdb_tables()")]
    totals = set()
    for table in tables_:
        ((count,),) = warehouse.query_raw(f'SELECT count(*) FROM "{table}"')
        totals.add(int(count))
    return totals


@pytest.mark.parametrize("folder", MODEL_DIRS, ids=[p.name for p in MODEL_DIRS])
def test_metadata_states_no_totals_of_rows_a_user_cannot_see(
    folder: Path, warehouse: Warehouse
) -> None:
    model = load_model(folder)
    found = json.dumps(search_members(model, "", JFK))
    numbers = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", found)}
    leaked = {n for n in numbers & _table_totals(warehouse) if n > 1000}
    assert not leaked, leaked


# -- 8. expired users, foreign keys ----------------------------------------------------------


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(tmp_path: Path, clock: Clock) -> StateDatabase:
    return open_state(f"sqlite:///{tmp_path}/state.sqlite3", account="demo", clock=clock)


def test_sqlite_enforces_foreign_keys_on_every_connection(state: StateDatabase) -> None:
    for _ in range(3):
        with state.engine.connect() as conn:
            assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
    with pytest.raises(IntegrityError), state.engine.begin() as conn:
        conn.execute(
            insert(tables.messages).values(
                chat_id="nope", position=1, turn_no=1, message_id="m", role="user", kind="user"
            )
        )


def test_a_purge_during_a_turn_leaves_no_orphan_rows(state: StateDatabase, clock: Clock) -> None:
    users = UserDirectory(state, declared_attributes={"origin"}, default_ttl_s=10)
    threads = ThreadStore(state)
    user = users.resolve(SessionSettings(external_id="brief"))
    thread = threads.create(user)
    turn_no = threads.begin_turn(thread, question="q", message_id=None, user_message_id="u")
    clock.now += 11
    assert users.purge_expired() == 1
    answer = StoredMessage("a", "assistant", "answer", content="42")
    with pytest.raises(ThreadNotFoundError):
        threads.end_turn(thread, turn_no, status="completed", messages=[answer], spec=None)
    with state.engine.connect() as conn:
        for table in (tables.threads, tables.turns, tables.messages, tables.embed_sessions):
            assert conn.execute(select(table)).first() is None, table.name


def test_an_expired_users_session_no_longer_opens_anything(
    state: StateDatabase, clock: Clock
) -> None:
    users = UserDirectory(state, declared_attributes={"origin"}, default_ttl_s=10)
    sessions = SessionStore(state, ttl_s=300)
    threads = ThreadStore(state)
    identity = GenerateSessionRequest(external_id="brief")
    user = users.resolve(identity)
    thread = threads.create(user)
    session = sessions.create(identity, user_key=user.key)
    clock.now += 11  # the user expired; its session has not
    with pytest.raises(SessionUserGoneError) as gone:
        sessions.redeem(session.session_id)
    assert gone.value.status_code == 404
    assert threads.get(thread.chat_id) is None


# -- 9. stream fidelity ----------------------------------------------------------------------


def test_content_deltas_are_closed_by_a_complete_line_of_the_same_id(toolbox: Toolbox) -> None:
    lines = [
        StreamMessage.model_validate(line)
        for line in _turn_lines(toolbox, "How many flights were there in March?")
    ]
    for field in ("thinking", "content"):
        deltas = [m for m in lines if m.is_delta and getattr(m, field) is not None]
        assert deltas, field
        ids = {m.id for m in deltas}
        assert len(ids) == 1
        closing = [m for m in lines if m.id in ids and m.is_delta is False]
        assert len(closing) == 1, field
        (close,) = closing
        assert close.is_in_process is False
        assert getattr(close, field) == "".join(getattr(m, field) for m in deltas)
        assert lines.index(close) > max(lines.index(m) for m in deltas)
    final = [m for m in lines if m.is_final_answer]
    assert len(final) == 1 and final[0].content == close.content


def test_line_separators_inside_content_are_escaped_in_the_serialised_line() -> None:
    line = {"id": "x", "content": "a\u2028b\u2029c\n", "thinking": "\u2028"}
    encoded = encode_line(line)
    assert "\u2028" not in encoded and "\u2029" not in encoded
    assert encoded.count("\n") == 1 and encoded.endswith("\n")
    assert encoded.splitlines() == [encoded[:-1]]
    assert json.loads(encoded) == line
