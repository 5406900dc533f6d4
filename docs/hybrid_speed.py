"""Hybrid against the rule reader where the rule reader answers: time per turn, same run.

Usage (from a checkout's root)::

    PYTHONPATH=$PWD .venv/bin/python docs/hybrid_speed.py [QUESTIONS] [ROUNDS]

Takes the first QUESTIONS (default 60) base evaluation questions that the rule reader answers
on the embedded flights data, and runs each through a ``rules`` toolbox and a ``hybrid`` one
(whose language model is an unreachable endpoint, so a call would show as a refusal and in
``llm_calls``), alternating the order each round, and prints ``time.process_time()`` per turn
of each and their ratio (issue 23's target: hybrid no slower where the rules answer).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from chat_api.agent import Toolbox, Turn, TurnRequest
from chat_api.evaluation.questions import QUESTIONS_FILE, load_questions
from chat_api.reader.llm import ChatModel, LanguageModelConfig, LanguageModelReader
from chat_api.semantic.model import load_model
from chat_api.sql.data import default_database_path, ensure_database
from chat_api.sql.policies import UserContext
from chat_api.sql.warehouse import Warehouse

UNREACHABLE = "http://127.0.0.1:9/v1"


def _turn(toolbox: Toolbox, question: str) -> Turn:
    request = TurnRequest("c", question, UserContext(), "m", development_mode=False)
    turn = Turn(request, toolbox=toolbox)
    list(turn.lines())
    return turn


def main(count: int = 60, rounds: int = 3) -> None:
    """Prints ms per turn of rules and hybrid, their ratio and the language model's calls."""
    with Warehouse(ensure_database(default_database_path())) as warehouse:
        rules = Toolbox.build(load_model(), warehouse, reader="rules")
        config = LanguageModelConfig(UNREACHABLE, "none", max_retries=0)
        hybrid = replace(
            rules, mode="hybrid", language_model=LanguageModelReader(ChatModel(config))
        )
        questions = [item.q for item in load_questions(QUESTIONS_FILE, tag="base").items][:count]
        answered = [q for q in questions if _turn(rules, q).answered]
        spent = {"rules": 0.0, "hybrid": 0.0}
        calls = 0
        for round_ in range(rounds):
            pairs = [("rules", rules), ("hybrid", hybrid)]
            for name, toolbox in pairs if round_ % 2 == 0 else pairs[::-1]:
                for question in answered:
                    started = time.process_time()
                    turn = _turn(toolbox, question)
                    spent[name] += time.process_time() - started
                    calls += turn.reading.calls if turn.reading else 0
        turns = rounds * len(answered)
        print(
            f"questions={len(answered)} rounds={rounds} "
            f"rules={spent['rules'] / turns * 1000:.1f} ms/turn "
            f"hybrid={spent['hybrid'] / turns * 1000:.1f} ms/turn "
            f"ratio={spent['hybrid'] / spent['rules']:.3f} llm_calls={calls}"
        )


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
