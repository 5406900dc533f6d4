"""The ``svcSqlApi`` tool: Semantic SQL in, the tool result out, every failure a tool error.

Interface, "svcSqlApi tool": the result carries ``sqlQuery``, ``queryTitle``, ``description``,
``userRequest``, ``schema`` (``{name, column_type}``), ``data`` (rows as arrays), ``totalRows``,
``uuid`` and ``vegaSpec`` when a chart is drawn; interface, "Errors": "when a tool fails, the
toolCall ``result`` (a JSON string) contains an ``error`` property". A failed call's result here
is ``{"error": "<message for the agent>", "code": "<reason>"}`` where ``code`` is a
``SemanticSqlError`` code (``not_select``, ``forbidden_function``, ``unknown_view``,
``hidden_member``, ``access_denied``, ...), ``query_failed``, ``query_timeout`` or
``internal_error``. Whatever SQL arrives, the caller gets a result object, never an exception:
that is what lets a hostile query end as a tool error instead of a broken stream.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from chat_api.errors import QueryExecutionError, SemanticSqlError
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import CompiledQuery, compile_semantic_sql
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import QueryResult, Warehouse

logger = logging.getLogger(__name__)

ToolError = dict[str, str]
"""A failed tool call's result: ``{"error": message, "code": reason}``."""
ECHOED_FIELDS = ("sqlQuery", "queryTitle", "description", "userRequest")
"""Input fields the result repeats (interface, "svcSqlApi tool", result fields)."""


def compile_tool_query(
    sql: str, *, model: SemanticModel, user: UserContext
) -> CompiledQuery | ToolError:
    """Compiles the tool's ``sqlQuery`` for ``user``.

    Returns:
        The compiled query, or a :data:`ToolError`: the refusal's code and message, or
        ``internal_error`` for a compiler fault (logged with its traceback).
    """
    try:
        return compile_semantic_sql(sql, model=model, user=user)
    except SemanticSqlError as exc:
        return {"error": exc.message, "code": exc.code}
    except Exception:  # the tool boundary: a compiler fault must not break the stream
        logger.exception("sql tool compile fault sql=%.300r", sql)
        return {
            "error": "the query could not be compiled (internal error)",
            "code": "internal_error",
        }


def run_tool_query(
    compiled: CompiledQuery, *, warehouse: Warehouse, row_limit: int
) -> QueryResult | ToolError:
    """Runs a compiled query.

    Returns:
        The rows (at most ``row_limit``) with the exact total, or a :data:`ToolError` with code
        ``query_failed`` or ``query_timeout``.
    """
    try:
        return warehouse.run(compiled, row_limit=row_limit)
    except QueryExecutionError as exc:
        return {"error": exc.message, "code": "query_timeout" if exc.timed_out else "query_failed"}


def result_payload(
    request: Mapping[str, Any], result: QueryResult, *, row_limit: int
) -> dict[str, Any]:
    """Returns: the successful tool result for the tool input ``request``.

    See the module docstring; ``vegaSpec`` is repeated when the input has one.
    """
    found = {key: request[key] for key in ECHOED_FIELDS if key in request}
    found["schema"] = [{"name": n, "column_type": t} for n, t in result.columns]
    found["data"] = [list(row) for row in result.rows[:row_limit]]
    found["totalRows"] = result.total_rows
    found["uuid"] = str(uuid.uuid4())
    if "vegaSpec" in request:
        found["vegaSpec"] = request["vegaSpec"]
    return found


def sql_tool_result(
    request: Mapping[str, Any],
    *,
    model: SemanticModel,
    warehouse: Warehouse,
    user: UserContext,
    row_limit: int = 100,
) -> dict[str, Any]:
    """One ``svcSqlApi`` call from its input to its result.

    Args:
        request: The tool input (``sqlQuery`` required; the other fields are echoed).
        model: The semantic model of the branch queried.
        warehouse: Where the compiled query runs.
        user: Whose access policies apply.
        row_limit: Most rows in ``data``.

    Returns:
        The result object, or a :data:`ToolError` (also for a missing or non-text ``sqlQuery``).
    """
    sql = request.get("sqlQuery")
    if not isinstance(sql, str):
        return {"error": "sqlQuery: a Semantic SQL query (text) is required", "code": "parse_error"}
    compiled = compile_tool_query(sql, model=model, user=user)
    if isinstance(compiled, dict):
        return compiled
    result = run_tool_query(compiled, warehouse=warehouse, row_limit=row_limit)
    if isinstance(result, dict):
        return result
    return result_payload(request, result, row_limit=row_limit)
