"""The ``chatscribe`` command line (typer).

One module per command group, the demo, child processes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.cli.children import ROOT, Child, start_child

__all__ = ["ROOT", "Child", "start_child"]

_EXPORTS: dict[str, str] = {
    "Child": "pipeline.cli.children",
    "ROOT": "pipeline.cli.children",
    "start_child": "pipeline.cli.children",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
