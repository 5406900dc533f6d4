from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import QuestionsFileError
from pipeline.runs.batch import expand_jobs, load_questions

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "questions.yaml"
    path.write_text(text)
    return path


def test_questions_expand_per_persona_in_file_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
personas:
  - {name: a, sessionSettings: {externalId: a-1}}
  - {name: b, sessionSettings: {externalId: b-1, userAttributes: [{name: origin, value: JFK}]}}
questions:
  - text: q1
  - text: q2
    personas: [b]
""",
    )
    jobs = expand_jobs(load_questions(path), run_id="r1", chat_url=URL, api_key="k")
    assert [(j.question, j.persona) for j in jobs] == [("q1", "a"), ("q1", "b"), ("q2", "b")]
    assert len({j.job_id for j in jobs}) == 3
    assert all(j.run_id == "r1" and j.chat_url == URL for j in jobs)
    assert jobs[1].session_settings.attributes() == {"origin": "JFK"}
    assert jobs[0].api_key is not None


def test_file_level_chat_url_and_deadline_apply(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
chatUrl: https://agent.example.com/chat/stream-chat-state
deadlineS: 30
personas: [{name: a, sessionSettings: {externalId: a-1}}]
questions: [{text: q}]
""",
    )
    (job,) = expand_jobs(load_questions(path), run_id="r", chat_url=URL)
    assert job.chat_url == "https://agent.example.com/chat/stream-chat-state"
    assert job.deadline_s == 30
    assert job.api_key is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("personas: []\nquestions: [{text: q}]", "personas"),
        (
            "personas: [{name: a, sessionSettings: {externalId: A}}]\nquestions: [{text: q}]",
            "lowercase",
        ),
        (
            "personas: [{name: a, sessionSettings: {externalId: a}}]\n"
            "questions: [{text: q, personas: [zz]}]",
            "unknown personas",
        ),
        (
            "personas: [{name: a, sessionSettings: {externalId: a}},"
            " {name: a, sessionSettings: {externalId: b}}]\nquestions: [{text: q}]",
            "unique",
        ),
        ("personas: [{name: a, sessionSettings: {externalId: a}}]\nquestions: [{txt: q}]", "text"),
        ("{unclosed", "while parsing"),
    ],
)
def test_invalid_questions_file_names_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(QuestionsFileError, match=message):
        load_questions(_write(tmp_path, text))


def test_example_questions_file_is_valid() -> None:
    questions = load_questions(Path(__file__).parents[3] / "examples" / "questions.yaml")
    assert len(questions.questions) >= 20
    with_origin = [p for p in questions.personas if "origin" in p.session_settings.attributes()]
    assert with_origin
    assert len(questions.personas) >= 2


def test_repeat_asks_every_case_once_per_round_and_the_option_wins(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
repeat: 3
personas:
  - {name: a, sessionSettings: {externalId: a-1}}
  - {name: b, sessionSettings: {externalId: b-1}}
questions:
  - text: q1
  - text: q2
    personas: [b]
""",
    )
    questions = load_questions(path)
    jobs = expand_jobs(questions, run_id="r", chat_url=URL)
    one_round = [("q1", "a"), ("q1", "b"), ("q2", "b")]
    assert [(j.question, j.persona) for j in jobs] == one_round * 3
    assert len({j.job_id for j in jobs}) == 9
    assert len(expand_jobs(questions, run_id="r", chat_url=URL, repeat=5)) == 15


def test_repeat_counts_against_the_job_limit_before_any_job_is_built(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "personas: [{name: a, sessionSettings: {externalId: a-1}}]\nquestions: [{text: q}]\n",
    )
    questions = load_questions(path)
    with pytest.raises(QuestionsFileError, match="expands to 11 jobs"):
        expand_jobs(questions, run_id="r", chat_url=URL, repeat=11, max_jobs=10)
    with pytest.raises(QuestionsFileError, match="repeat must be at least 1"):
        expand_jobs(questions, run_id="r", chat_url=URL, repeat=0)
    bad = _write(tmp_path, path.read_text() + "repeat: 0\n")
    with pytest.raises(QuestionsFileError, match="repeat"):
        load_questions(bad)
