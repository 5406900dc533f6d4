"""The import rules of the tree (docs/layout.md), checked over every module's ``ast`` imports.

Each rule names who may import what; a module breaking one makes its test fail with the module,
the line and the import. Imports inside ``if TYPE_CHECKING:`` count too: a rule is about
dependencies, not only about what runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "pipeline", "chat_api")

IO_LIBRARIES = (
    "httpx",
    "openai",
    "aiokafka",
    "faust",
    "mode",
    "sqlalchemy",
    "psycopg",
    "duckdb",
    "starlette",
    "uvicorn",
    "urllib3",
)
"""Libraries that do I/O: pure packages import none of them."""

ALLOWED: dict[str, tuple[str, ...]] = {
    "httpx": ("pipeline.chat",),
    "openai": ("chat_api.reader.llm",),
    "aiokafka": ("pipeline.kafka", "pipeline.worker"),
    "faust": ("pipeline.kafka", "pipeline.worker"),
    "mode": ("pipeline.kafka", "pipeline.worker"),
    "sqlalchemy": ("pipeline.archive", "chat_api.state"),
    "psycopg": ("pipeline.archive", "chat_api.state"),
    "urllib3": ("pipeline.otel",),
}
"""Library → the only packages that may import it (``models`` and ``pipeline.transcript`` are
pure and may import none)."""

PURE = ("models", "pipeline.transcript")
PIPELINE_USERS_OF_CHAT_API = ("pipeline.cli", "pipeline.replay")


@dataclass(frozen=True)
class Import:
    """One imported name: ``module`` is absolute, ``name`` is the name taken from it (or None)."""

    importer: str
    line: int
    module: str
    name: str | None

    def __str__(self) -> str:
        what = self.module if self.name is None else f"{self.module}:{self.name}"
        return f"{self.importer}:{self.line} imports {what}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_of_text(text: str, *, importer: str) -> Iterator[Import]:
    package = importer.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(importer, node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            for alias in node.names:
                yield Import(importer, node.lineno, module, alias.name)


def _imports_of(path: Path) -> Iterator[Import]:
    importer = _module_name(path)
    if path.name == "__init__.py":
        importer += ".__init__"  # relative imports of a package resolve against the package
    for found in _imports_of_text(path.read_text(encoding="utf-8"), importer=importer):
        yield Import(found.importer.removesuffix(".__init__"), found.line, found.module, found.name)


def _all_imports() -> list[Import]:
    found: list[Import] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.extend(_imports_of(path))
    return found


IMPORTS = _all_imports()


def _within(module: str, packages: tuple[str, ...] | str) -> bool:
    wanted = (packages,) if isinstance(packages, str) else packages
    return any(module == p or module.startswith(p + ".") for p in wanted)


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_scan_sees_the_tree() -> None:
    importers = {i.importer for i in IMPORTS}
    assert {"pipeline.sink.loop", "pipeline.chat.client", "chat_api.http.app"} <= importers
    assert any(i.module == "httpx" for i in IMPORTS)


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_io_library(package: str) -> None:
    broken = [
        str(i) for i in IMPORTS if _within(i.importer, package) and _top(i.module) in IO_LIBRARIES
    ]
    assert broken == []


@pytest.mark.parametrize("library", sorted(ALLOWED))
def test_io_library_is_imported_only_by_its_adapter(library: str) -> None:
    broken = [
        str(i)
        for i in IMPORTS
        if _top(i.module) == library and not _within(i.importer, ALLOWED[library])
    ]
    assert broken == []


def test_chat_api_never_imports_pipeline() -> None:
    broken = [
        str(i) for i in IMPORTS if _within(i.importer, "chat_api") and _top(i.module) == "pipeline"
    ]
    assert broken == []


def test_pipeline_imports_chat_api_only_from_cli_and_replay() -> None:
    broken = [
        str(i)
        for i in IMPORTS
        if _within(i.importer, "pipeline")
        and _top(i.module) == "chat_api"
        and not _within(i.importer, PIPELINE_USERS_OF_CHAT_API)
    ]
    assert broken == []


def test_the_sink_decoder_imports_nothing_of_the_archive() -> None:
    """``pipeline/sink/decode.py`` decodes records; the key rules it checks are in ``models``."""
    broken = [
        str(i)
        for i in IMPORTS
        if i.importer == "pipeline.sink.decode" and _within(i.module, "pipeline.archive")
    ]
    assert broken == []


def _exported(package: str) -> set[str]:
    """Returns: the names in ``__all__`` of ``package``'s ``__init__.py`` (empty if none)."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            and node.value is not None
        ):
            value = ast.literal_eval(node.value)
            return set(value)
    return set()


def test_pipeline_uses_only_what_chat_api_exports_on_purpose() -> None:
    """``from chat_api[.subpackage] import name`` with ``name`` in that package's ``__all__``."""
    broken = [
        str(i)
        for i in IMPORTS
        if _within(i.importer, "pipeline")
        and _top(i.module) == "chat_api"
        and (i.name is None or i.name not in _exported(i.module))
    ]
    assert broken == []


def _packages() -> list[str]:
    return sorted(_module_name(init) for p in PACKAGES for init in (ROOT / p).rglob("__init__.py"))


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_package_faces_are_plain_imports() -> None:
    """A face is a docstring, or eager imports plus ``__all__``: no PEP 562 ``__getattr__``."""
    lazy = [
        package
        for package in _packages()
        for node in ast.parse(ROOT.joinpath(*package.split("."), "__init__.py").read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    ]
    assert lazy == []


def test_names_taken_from_a_package_face_are_exported() -> None:
    """``from package import name`` (not a submodule) needs ``name`` in the face's ``__all__``."""
    packages = set(_packages())
    broken = [
        str(i)
        for i in IMPORTS
        if i.module in packages
        and i.name is not None
        and not _is_module(f"{i.module}.{i.name}")
        and i.name not in _exported(i.module)
    ]
    assert broken == []


@pytest.mark.parametrize("package", ["models", "pipeline", "chat_api"])
def test_every_exported_name_exists(package: str) -> None:
    """Each ``__all__`` entry resolves once the package is imported."""
    import importlib

    for init in sorted((ROOT / package).rglob("__init__.py")):
        name = _module_name(init)
        module = importlib.import_module(name)
        for exported in _exported(name):
            assert getattr(module, exported, None) is not None, f"{name}.{exported}"


BASE_MODULES = ("errors", "settings")
"""A top package's error tree and settings: every part may import them; they are not parts."""


def _part(module: str, top: str) -> str | None:
    """Returns: the first name below ``top`` (a subpackage or module), None for the base."""
    parts = module.split(".")
    if parts[0] != top or len(parts) < 2 or parts[1] in BASE_MODULES:
        return None
    return parts[1]


def _part_cycles(imports: list[Import], top: str) -> list[list[str]]:
    """Returns: each cycle between ``top``'s parts as the path of parts, with an import per hop."""
    edges: dict[str, dict[str, Import]] = {}
    for i in imports:
        source, target = _part(i.importer, top), _part(i.module, top)
        if source and target and source != target:
            edges.setdefault(source, {}).setdefault(target, i)
    cycles: list[list[str]] = []

    def walk(path: list[str]) -> None:
        for target, found in sorted(edges.get(path[-1], {}).items()):
            if target == path[0]:
                cycles.append([*path, target, str(found)])
            elif target not in path and target > path[0]:
                walk([*path, target])

    for start in sorted(edges):
        walk([start])
    return cycles


@pytest.mark.parametrize("top", ["pipeline", "chat_api"])
def test_no_cycles_between_parts(top: str) -> None:
    """Subpackages and top-level modules (the base aside) depend on each other one way only."""
    assert _part_cycles(IMPORTS, top) == []


def test_a_cycle_between_parts_is_caught() -> None:
    found = [
        *_imports_of_text("from chat_api.agent import Toolbox\n", importer="chat_api.semantic.x"),
        *_imports_of_text("from chat_api.semantic import y\n", importer="chat_api.agent"),
        *_imports_of_text("from chat_api.errors import E\n", importer="chat_api.agent"),
    ]
    assert [cycle[:3] for cycle in _part_cycles(found, "chat_api")] == [
        ["agent", "semantic", "agent"]
    ]


def test_the_rules_would_catch_a_breach(tmp_path: Path) -> None:
    """The scanner sees relative and absolute imports, so a breach cannot hide in either form."""
    source = tmp_path / "probe.py"
    source.write_text("import httpx\nfrom sqlalchemy import text\nfrom . import x\n")
    found = list(_imports_of_text(source.read_text(), importer="pipeline.transcript.probe"))
    assert [(i.module, i.name) for i in found] == [
        ("httpx", None),
        ("sqlalchemy", "text"),
        ("pipeline.transcript", "x"),
    ]


def test_the_reader_keeps_its_complexity_cap_and_top_level_imports(tmp_path: Path) -> None:
    """chat_api/reader/ruff.toml: complexity 10, no function-local import (issue 22)."""
    ruff = Path(sys.executable).with_name("ruff")
    checked = ["--select", "C901,PLC0415", "--no-cache", "--output-format", "concise"]
    clean = subprocess.run(
        [ruff, "check", *checked, "chat_api/reader"], cwd=ROOT, capture_output=True, text=True
    )
    assert clean.returncode == 0, clean.stdout
    branchy = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(10))
    breach = tmp_path / "breach.py"
    breach.write_text(branchy + "def g():\n    import os\n    return os\n")
    config = ["--config", str(ROOT / "chat_api" / "reader" / "ruff.toml")]
    caught = subprocess.run(
        [ruff, "check", *config, *checked, str(breach)], cwd=ROOT, capture_output=True, text=True
    )
    assert "C901" in caught.stdout and "PLC0415" in caught.stdout, caught.stdout
