"""The error trees of ``pipeline`` and ``chat_api``: drawn whole, rooted once, every error raised.

Each top package keeps its errors in one ``errors.py`` whose docstring draws the tree
(style.md, "Errors"). These tests read the modules with ``ast`` and check that the drawing names
every public class, that every class derives from the package's root, that no error class is
defined elsewhere in the package, and that every error is raised (or built to be raised: a call,
or a value in a status → error table) outside ``errors.py``; an error with subclasses counts as
raised when one of its subclasses is.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = {"pipeline": "PipelineError", "chat_api": "ChatApiError"}
PRIVATE_CONTROL_FLOW = {
    # Control flow inside one function family, never leaves its module (documented there).
    "chat_api.planner.reading_base": {"UnanswerableError"},
    "pipeline.worker.job_runner": {"_OutputFailedError"},
    "pipeline.chat.network": {"_ReadDeadlineError"},
}


def _error_classes(package: str) -> dict[str, type[BaseException]]:
    module = importlib.import_module(f"{package}.errors")
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and issubclass(cls, BaseException)
        and cls.__module__ == module.__name__
        and not name.startswith("_")
    }


def _uses_outside_errors(package: str) -> set[str]:
    """Returns: names raised, called or used as a table value in ``package`` (not errors.py)."""
    used: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        if path.name == "errors.py" and path.parent == ROOT / package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target: ast.expr | None = None
            if isinstance(node, ast.Raise):
                target = node.exc
            elif isinstance(node, ast.Call):
                target = node.func
                used.update(_name(arg) for arg in node.args if _name(arg))
            elif isinstance(node, ast.Dict):
                used.update(_name(value) for value in node.values if value and _name(value))
            name = _name(target.func if isinstance(target, ast.Call) else target)
            if name:
                used.add(name)
    return used


def _name(node: ast.expr | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


@pytest.mark.parametrize("package", sorted(TREES))
def test_every_error_derives_from_the_root(package: str) -> None:
    classes = _error_classes(package)
    root = classes[TREES[package]]
    assert [name for name, cls in classes.items() if not issubclass(cls, root)] == []


@pytest.mark.parametrize("package", sorted(TREES))
def test_the_docstring_draws_every_error(package: str) -> None:
    module = importlib.import_module(f"{package}.errors")
    named = set(re.findall(r"\b([A-Z]\w*Error)\b", module.__doc__ or ""))
    drawn = {name for name in named if not hasattr(builtins, name)}
    assert set(_error_classes(package)) - drawn == set()
    assert drawn - set(_error_classes(package)) == set()


@pytest.mark.parametrize("package", sorted(TREES))
def test_every_error_is_raised_somewhere(package: str) -> None:
    classes = _error_classes(package)
    used = _uses_outside_errors(package)
    raised = {name for name in classes if name in used}
    raised |= {
        name
        for name, cls in classes.items()
        if any(issubclass(classes[r], cls) for r in raised if r != name)
    }
    assert set(classes) - raised == set()


@pytest.mark.parametrize("package", sorted(TREES))
def test_no_error_class_lives_outside_the_tree(package: str) -> None:
    """Error classes are defined only in ``errors.py`` (private control flow excepted)."""
    strays: list[str] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module == f"{package}.errors":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.ClassDef)
                and node.name.endswith(("Error", "Exception"))
                and node.name not in PRIVATE_CONTROL_FLOW.get(module, set())
            ):
                strays.append(f"{module}.{node.name}")
    assert strays == []


def test_the_scan_would_see_an_unraised_error() -> None:
    """The raise scan does find raise sites (so an empty difference above means something)."""
    used = _uses_outside_errors("pipeline")
    assert {"StreamBrokenError", "RecordDeliveryError", "ArchiveRejectedError"} <= used
    assert "PipelineError" not in used
