"""The semantic data model: Cube-format YAML views, cubes, members, access policies as declared."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_api.semantic.branches import BranchCatalog
    from chat_api.semantic.model import (
        AccessPolicy,
        Dimension,
        FilterRule,
        Member,
        ResolvedView,
        RowLevel,
        SemanticModel,
        load_model,
    )
    from chat_api.semantic.search import search_members
    from chat_api.semantic.templates import MEASURE_PLACEHOLDER, PHYSICAL_SCHEMA_NAME

__all__ = [
    "MEASURE_PLACEHOLDER",
    "PHYSICAL_SCHEMA_NAME",
    "AccessPolicy",
    "BranchCatalog",
    "Dimension",
    "FilterRule",
    "Member",
    "ResolvedView",
    "RowLevel",
    "SemanticModel",
    "load_model",
    "search_members",
]

_EXPORTS: dict[str, str] = {
    "AccessPolicy": "chat_api.semantic.model",
    "BranchCatalog": "chat_api.semantic.branches",
    "Dimension": "chat_api.semantic.model",
    "FilterRule": "chat_api.semantic.model",
    "MEASURE_PLACEHOLDER": "chat_api.semantic.templates",
    "Member": "chat_api.semantic.model",
    "PHYSICAL_SCHEMA_NAME": "chat_api.semantic.templates",
    "ResolvedView": "chat_api.semantic.model",
    "RowLevel": "chat_api.semantic.model",
    "SemanticModel": "chat_api.semantic.model",
    "load_model": "chat_api.semantic.model",
    "search_members": "chat_api.semantic.search",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
