"""Semantic SQL.

The guard, the compiler with access policies (row-level security), the DuckDB warehouse that runs
it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.sql.compiler import CompiledQuery, compile_semantic_sql
    from chat_api.sql.conditions import parse_condition, template_references
    from chat_api.sql.data import READ_ONLY_CONFIG, default_database_path, ensure_database
    from chat_api.sql.policies import UserContext, resolve_access
    from chat_api.sql.sql_tool import ToolError, compile_tool_query, result_payload, run_tool_query
    from chat_api.sql.warehouse import QueryResult, Warehouse

__all__ = [
    "READ_ONLY_CONFIG",
    "CompiledQuery",
    "QueryResult",
    "ToolError",
    "UserContext",
    "Warehouse",
    "compile_semantic_sql",
    "compile_tool_query",
    "default_database_path",
    "ensure_database",
    "parse_condition",
    "resolve_access",
    "result_payload",
    "run_tool_query",
    "template_references",
]

_EXPORTS: dict[str, str] = {
    "CompiledQuery": "chat_api.sql.compiler",
    "QueryResult": "chat_api.sql.warehouse",
    "READ_ONLY_CONFIG": "chat_api.sql.data",
    "ToolError": "chat_api.sql.sql_tool",
    "UserContext": "chat_api.sql.policies",
    "Warehouse": "chat_api.sql.warehouse",
    "compile_semantic_sql": "chat_api.sql.compiler",
    "compile_tool_query": "chat_api.sql.sql_tool",
    "default_database_path": "chat_api.sql.data",
    "ensure_database": "chat_api.sql.data",
    "parse_condition": "chat_api.sql.conditions",
    "resolve_access": "chat_api.sql.policies",
    "result_payload": "chat_api.sql.sql_tool",
    "run_tool_query": "chat_api.sql.sql_tool",
    "template_references": "chat_api.sql.conditions",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
