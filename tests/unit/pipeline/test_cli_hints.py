"""Commands the CLI prints for a newcomer run as printed, from where they stand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipeline.cli import app as cli


def test_a_chatscribe_not_on_the_path_is_named_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "chatscribe").write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/chatscribe", "demo"])
    monkeypatch.setattr("shutil.which", lambda _name: None)
    assert cli._own_command() == ".venv/bin/chatscribe"


def test_the_chatscribe_on_the_path_is_named_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "chatscribe"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setattr("shutil.which", lambda _name: str(script))
    assert cli._own_command() == "chatscribe"
