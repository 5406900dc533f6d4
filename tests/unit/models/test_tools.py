from __future__ import annotations

import json

import pytest

from models import tools
from models.chat import ToolCall
from models.errors import ToolPayloadError


def _sql_result() -> str:
    return json.dumps(
        {
            "sqlQuery": "SELECT 1",
            "schema": [{"name": "n", "column_type": "Int64"}],
            "data": [["245"]],
            "totalRows": 1,
            "uuid": "u1",
            "vegaSpec": "{}",
            "extraField": 1,
        }
    )


@pytest.mark.parametrize("name", ["svcSqlApi", "cubeSqlApi", "cubeSqlApiWithChart"])
def test_sql_tool_names_classify_as_sql(name: str) -> None:
    assert tools.classify(ToolCall(name=name)) == "sql"


@pytest.mark.parametrize("name", ["svcMeta", "cubeMeta"])
def test_meta_tool_names_classify_as_meta(name: str) -> None:
    assert tools.classify(ToolCall(name=name)) == "meta"


def test_unknown_tool_with_sql_payload_is_sql() -> None:
    call = ToolCall(name="runQuery", input=json.dumps({"query": "SELECT 1"}))
    assert tools.classify(call) == "sql"
    parsed = tools.sql_input(call)
    assert parsed is not None and parsed.sql == "SELECT 1"


def test_unknown_tool_with_other_payload_is_other() -> None:
    assert tools.classify(ToolCall(name="weather", input='{"city": "x"}')) == "other"
    assert tools.classify(ToolCall(name="weather", input="not json")) == "other"


def test_sql_result_is_typed_and_keeps_extra_members() -> None:
    result = tools.sql_result(ToolCall(name="svcSqlApi", result=_sql_result()))
    assert result is not None
    assert result.total_rows == 1 and result.data == [["245"]]
    assert result.columns is not None and result.columns[0].column_type == "Int64"
    assert result.model_extra == {"extraField": 1}


def test_older_sql_result_payload_parses() -> None:
    older = json.dumps({"data": [{"count": "5"}], "annotation": {"measures": {}}})
    result = tools.sql_result(ToolCall(name="cubeSqlApi", result=older))
    assert (
        result is not None
        and result.data == [{"count": "5"}]
        and result.annotation == {"measures": {}}
    )


def test_tool_error_result() -> None:
    result = tools.sql_result(ToolCall(name="svcSqlApi", result='{"error": "no such view"}'))
    assert result is not None and result.error == "no such view"


def test_meta_result_shape() -> None:
    payload = {
        "cubes": [
            {
                "name": "flights",
                "type": "view",
                "members": [{"name": "flights.count", "type": "number", "aggType": "count"}],
            }
        ],
        "searchQuery": "flights",
    }
    result = tools.meta_result(ToolCall(name="cubeMeta", result=json.dumps(payload)))
    assert result is not None and result.cubes[0].members[0].agg_type == "count"


@pytest.mark.parametrize(
    ("text", "message"), [("{", "not JSON"), ("[1]", "JSON list, not an object")]
)
def test_bad_payload_raises_tool_payload_error(text: str, message: str) -> None:
    with pytest.raises(ToolPayloadError, match=message) as caught:
        tools.sql_input(ToolCall(name="svcSqlApi", input=text))
    assert caught.value.part == "input" and caught.value.tool_name == "svcSqlApi"


def test_absent_payload_is_none() -> None:
    assert tools.sql_result(ToolCall(name="svcSqlApi", input="{}")) is None


def test_wire_names_come_from_the_typed_models() -> None:
    assert tools.wire_name(tools.SqlResult, "columns") == "schema"
    assert tools.wire_name(tools.SqlResult, "total_rows") == "totalRows"
    assert tools.wire_name(tools.SqlInput, "query") == "query"
    with pytest.raises(KeyError):
        tools.wire_name(tools.SqlResult, "no_such_member")
