"""Questions files: bounded size, alias expansion, nesting and jobs per run (issue 24, class 4)."""

from __future__ import annotations

import string
from itertools import pairwise
from pathlib import Path

import pytest

from pipeline.errors import QuestionsFileError
from pipeline.runs.batch import (
    MAX_QUESTIONS_FILE_BYTES,
    count_jobs,
    expand_jobs,
    load_bounded_yaml,
    load_questions,
)

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
HEAD = "personas: [{name: a, sessionSettings: {externalId: a}}]\n"


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "questions.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def billion_laughs(levels: int) -> str:
    """Expected rows as a "billion laughs": each level an anchor aliasing the one before 9 times.

    Every anchor is a row of the expected result, so the file validates as it stands; nine
    levels are under 700 bytes and expand to 9**9 (387 million) strings.
    """
    names = string.ascii_lowercase[:levels]
    rows = [f"&{names[0]} [{','.join(['lol'] * 9)}]"]
    rows += [f"&{name} [{','.join(['*' + before] * 9)}]" for before, name in pairwise(names)]
    return f"{HEAD}questions:\n  - text: q\n    expected: {{'*': {{rows: [{', '.join(rows)}]}}}}\n"


@pytest.mark.parametrize("levels", [5, 9])
def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path, levels: int) -> None:
    text = billion_laughs(levels)
    assert levels < 9 or len(text.encode()) < 800
    path = _write(tmp_path, text)
    with pytest.raises(QuestionsFileError, match=r"aliases repeat \d+ nodes.*limit of 10000") as e:
        load_questions(path)
    assert e.value.path == path and str(path) in str(e.value)


def test_anchors_that_share_a_few_nodes_still_load(tmp_path: Path) -> None:
    text = (
        "personas:\n"
        "  - {name: a, sessionSettings: &jfk {externalId: a, userAttributes: [{name: origin,"
        " value: JFK}]}}\n"
        "  - {name: b, sessionSettings: *jfk}\n"
        "questions: [{text: hi}]\n"
    )
    questions = load_questions(_write(tmp_path, text))
    assert questions.personas[0].session_settings == questions.personas[1].session_settings


def test_a_file_larger_than_the_bound_is_refused_unread(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "questions: [{text: hi}]\n" + "#" * MAX_QUESTIONS_FILE_BYTES)
    with pytest.raises(QuestionsFileError, match=f"limit of {MAX_QUESTIONS_FILE_BYTES} bytes"):
        load_questions(path)


@pytest.mark.parametrize("depth", [100, 5_000])
def test_deep_nesting_is_refused_with_the_limit(tmp_path: Path, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    path = _write(
        tmp_path, f"{HEAD}questions: [{{text: q, expected: {{a: {{rows: {nested}}}}}}}]\n"
    )
    with pytest.raises(QuestionsFileError, match="nested deeper than the limit of 64"):
        load_questions(path)


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    with pytest.raises(QuestionsFileError):
        load_bounded_yaml(_write(tmp_path, "a: &a [*a]\n"))


def _many_jobs_file(personas: int, questions: int) -> str:
    people = ", ".join(
        f"{{name: p{i}, sessionSettings: {{externalId: u{i}}}}}" for i in range(personas)
    )
    asked = ", ".join(f"{{text: q{i}}}" for i in range(questions))
    return f"personas: [{people}]\nquestions: [{asked}]\n"


def test_a_small_file_expanding_past_the_per_run_cap_is_refused_naming_the_override(
    tmp_path: Path,
) -> None:
    text = _many_jobs_file(300, 400)  # ~32 KB, 120,000 jobs
    assert len(text) < 40_000
    path = _write(tmp_path, text)
    questions = load_questions(path)
    assert count_jobs(questions) == 120_000
    with pytest.raises(QuestionsFileError, match=r"120000 jobs.*limit of 10000.*--max-jobs") as e:
        expand_jobs(questions, run_id="r", chat_url=URL, path=path)
    assert e.value.path == path


def test_the_per_run_cap_is_overridable_on_purpose(tmp_path: Path) -> None:
    questions = load_questions(_write(tmp_path, _many_jobs_file(3, 4)))
    with pytest.raises(QuestionsFileError):
        expand_jobs(questions, run_id="r", chat_url=URL, max_jobs=11)
    assert len(expand_jobs(questions, run_id="r", chat_url=URL, max_jobs=12)) == 12
