"""The console's pure parts: bind guard, token guard, escaping helpers, views of messages."""

from __future__ import annotations

from typing import get_args

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from pipeline.archive.console_queries import SORTS, JobSort
from pipeline.archive.conversation import Turn
from pipeline.console import params
from pipeline.console.security import (
    SecurityHeaders,
    TokenGuard,
    check_bind,
    is_loopback,
    local_location,
)
from pipeline.console.views import SENTINEL_LABELS, marked, sql_html, status_bar, turn_view
from pipeline.errors import ConsoleBindError


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "console.example.com"])
def test_binding_beyond_loopback_needs_a_token(host: str) -> None:
    with pytest.raises(ConsoleBindError) as caught:
        check_bind(host, None)
    assert caught.value.host == host
    with pytest.raises(ConsoleBindError):
        check_bind(host, SecretStr(""))
    check_bind(host, SecretStr("t0ken"))


def _guarded() -> httpx.AsyncClient:
    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    app = TokenGuard(SecurityHeaders(Starlette(routes=[Route("/p", hello)])), token=SecretStr("tk"))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c")


async def test_the_token_guard_refuses_without_the_token_and_accepts_header_or_cookie() -> None:
    async with _guarded() as client:
        refused = await client.get("/p")
        assert refused.status_code == 401 and "hello" not in refused.text
        assert "default-src 'none'" in refused.headers["content-security-policy"]
        assert (await client.get("/p", headers={"Authorization": "Bearer nope"})).status_code == 401
        assert (await client.get("/p", headers={"Authorization": "Bearer tk"})).text == "hello"
        link = await client.get("/p?token=tk&x=1")
        assert link.status_code == 303 and link.headers["location"] == "/p?x=1"
        assert "chatscribe_console=tk" in link.headers["set-cookie"]
        assert "SameSite=Strict" in link.headers["set-cookie"]
        answered = await client.get("/p", headers={"Cookie": "chatscribe_console=tk"})
        assert answered.text == "hello"
        assert answered.headers["x-frame-options"] == "DENY"


def test_sql_is_highlighted_and_escaped() -> None:
    html = str(sql_html("SELECT '<script>alert(1)</script>' AS x FROM flights"))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert 'class="sql-k"' in html  # keywords carry a class
    assert str(sql_html(None)) == ""


def test_search_excerpts_are_escaped_then_marked() -> None:
    html = str(marked("<img src=x> \x02delay\x03 by carrier"))
    assert html == "&lt;img src=x&gt; <mark>delay</mark> by carrier"


def _turn(**fields: object) -> Turn:
    base: dict[str, object] = {
        "message_id": "m1", "role": "assistant", "content": None, "thinking": None,
        "is_final": False, "tool_name": None, "first_line": 1, "last_line": 1,
    }  # fmt: skip
    return Turn(**(base | fields))  # type: ignore[arg-type]


def test_turns_are_shaped_by_kind_with_markdown_answers_and_sql_results() -> None:
    cutoff = turn_view(_turn(message_id="__cutoff__"))
    assert (cutoff["kind"], cutoff["label"]) == ("marker", SENTINEL_LABELS["__cutoff__"])
    assert turn_view(_turn(role="user", content="<b>hi</b>"))["kind"] == "question"
    answer = turn_view(_turn(is_final=True, content="| a |\n|---|\n| 1 |"))
    assert answer["kind"] == "answer" and "<td>1</td>" in str(answer["content"])
    query = {
        "sql": "SELECT 1",
        "schema": [{"name": "month", "column_type": "Int64"}],
        "rows": [[2]],
        "vega_spec": {"data": {"url": "https://evil.example"}, "mark": "bar"},
        "total_rows": 1,
    }
    tool = turn_view(_turn(tool={"name": "svcSqlApi", "input": {"sqlQuery": "x"}}, query=query))
    assert tool["kind"] == "tool"
    assert tool["query"]["table"]["rows"] == [["Feb"]]
    assert "evil.example" not in tool["query"]["chart"]
    assert tool["tool"]["result"] is None  # SQL results show as a table, not JSON


def test_status_bar_shares_add_up() -> None:
    bar = status_bar({"running": 1, "completed": 3}, 4)
    assert [s["status"] for s in bar] == ["completed", "running"]
    assert [s["pct"] for s in bar] == [75.0, 25.0]


def test_the_console_command_refuses_a_public_address_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from pipeline.cli.app import app

    monkeypatch.delenv("CHATSCRIBE_CONSOLE_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["console", "--host", "0.0.0.0", "--port", "1"])
    assert result.exit_code == 2
    assert "CHATSCRIBE_CONSOLE_TOKEN" in result.output


def test_a_payload_nested_past_the_recursion_limit_is_shown_as_text() -> None:
    """A reviewer can open a conversation whatever its agent sent."""
    from pipeline.console.views import pretty_json

    deep = "[" * 100_000 + "]" * 100_000
    assert pretty_json(deep, limit=20) == deep[:20]


async def test_the_token_guard_refuses_a_bare_token_and_other_schemes() -> None:
    async with _guarded() as client:
        for value in ("tk", "Basic tk", "Token tk", "Bearertk", "Bearer"):
            answered = await client.get("/p", headers={"Authorization": value})
            assert answered.status_code == 401, value
        assert (await client.get("/p", headers={"Authorization": "bearer tk"})).text == "hello"


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("//evil.example/p", "/evil.example/p"),
        ("/\\evil.example/p", "/evil.example/p"),
        ("/%2F%2Fevil.example", "/evil.example"),
        ("/%5C%5Cevil.example", "/evil.example"),
        ("/%09/evil.example", "/evil.example"),
        ("/https:%2F%2Fevil.example", "/https://evil.example"),
    ],
)
async def test_the_token_link_redirects_only_to_a_path_of_the_console(
    path: str, location: str
) -> None:
    async with _guarded() as client:
        link = await client.get(f"http://c{path}?token=tk")
        assert link.status_code == 303
        assert link.headers["location"] == location


def test_a_redirect_target_is_a_local_path_whatever_the_decoded_path_holds() -> None:
    assert local_location("/audit", "user=x") == "/audit?user=x"
    assert local_location("/\t\\/evil.example/a b") == "/evil.example/a%20b"
    assert local_location("/\r\n//evil.example") == "/evil.example"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ({"offset": str(10**20)}, "offset"),
        ({"offset": "-1"}, "offset"),
        ({"offset": "1e3"}, "offset"),
        ({"status": "a\x00b"}, "status"),
        ({"status": "x" * (params.MAX_TEXT_CHARS + 1)}, "status"),
    ],
)
def test_console_parameters_out_of_form_or_range_are_400s(args: dict[str, str], name: str) -> None:
    def read() -> None:
        params.text(args, "status")
        params.integer(args, "offset", 0, low=0, high=params.MAX_OFFSET)

    with pytest.raises(HTTPException) as caught:
        read()
    assert caught.value.status_code == 400 and repr(name) in caught.value.detail


def test_console_parameters_absent_take_the_default_and_sort_keys_all_resolve() -> None:
    assert params.integer({}, "offset", 0, low=0, high=params.MAX_OFFSET) == 0
    assert params.integer({"offset": "50"}, "offset", 0, low=0, high=params.MAX_OFFSET) == 50
    assert params.text({"status": ""}, "status") is None
    for key in get_args(JobSort):  # every sort the run page offers has its ORDER BY
        assert params.choice({"sort": key}, "sort", SORTS, "submitted") == key
    with pytest.raises(HTTPException):
        params.choice({"sort": "nope"}, "sort", SORTS, "submitted")
    with pytest.raises(HTTPException):
        params.instant({"since": "yesterday"}, "since")


def test_a_search_of_many_words_is_refused_before_it_reaches_the_archive() -> None:
    assert params.search_words({"q": "  carrier delay "}) == "carrier delay"
    with pytest.raises(HTTPException) as caught:
        params.search_words({"q": " ".join(["delay"] * 200)})
    assert caught.value.status_code == 400
    with pytest.raises(HTTPException):
        params.search_words({"q": "x" * (params.MAX_SEARCH_CHARS + 1)})
