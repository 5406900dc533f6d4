"""Public datasets bundled with a semantic model and evaluation questions.

Each ``<name>/`` holds ``build.py`` (writes one Parquet file per table, offline, deterministic),
``model/`` (Cube YAML written as a modeller would) and ``questions.yaml`` (analysts' questions
written without sight of the reader, truths as hand-written SQL).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def model_dir(name: str) -> Path:
    """Returns: the Cube YAML folder of dataset ``name`` (``jaffle_shop``, ``txhousing``)."""
    return ROOT / name / "model"


def questions_file(name: str) -> Path:
    """Returns: the evaluation questions of dataset ``name``."""
    return ROOT / name / "questions.yaml"


__all__ = ["ROOT", "model_dir", "questions_file"]
