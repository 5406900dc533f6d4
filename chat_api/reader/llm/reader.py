"""The language-model reader: a question -> the model's typed query -> the same checks.

:meth:`LanguageModelReader.read` asks the model (``chat_api.reader.llm.prompt``) and parses its
answer into a :class:`~chat_api.reader.query.Query`, which must pass
:func:`chat_api.reader.checks.check_query`, the rule reader's validator. An answer that fails
(not JSON, not the schema, an unknown member, a wrong type, a hidden member, a value outside
the member's domain) is sent back once with the validator's message; a second failure is a
refusal that says why. The model never writes SQL that runs (only the typed query is read, and
it is compiled under the user's access policies like the rule reader's), never sees rows (only
member names and the user's own low-cardinality values), and never decides access.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chat_api.errors import InvalidQueryError, LanguageModelError
from chat_api.reader.checks import check_query
from chat_api.reader.index import ModelIndex
from chat_api.reader.llm.client import ChatModel, Completion
from chat_api.reader.llm.prompt import QUERY_TOOL, TOOLS, messages, parse_answer
from chat_api.reader.query import Query
from chat_api.search import search_members
from chat_api.semantic.model import SemanticModel
from chat_api.sql.policies import UserContext

ATTEMPTS = 2
"""The first answer and one retry with the validator's message."""


@dataclass
class Reading:
    """What one reading produced, and what it cost.

    Attributes:
        query: The checked query, or None.
        refusal: Why there is no query ("" with a query).
        failure: The endpoint's failure when the model could not be asked, else None.
        calls: Chat completions made.
        input_tokens, output_tokens: Their usage, summed.
        latency_s: Their seconds, summed.
        invalid: The validator's messages, one per refused answer.
    """

    query: Query | None = None
    refusal: str = ""
    failure: LanguageModelError | None = None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    invalid: list[str] = field(default_factory=list)

    def add(self, completion: Completion) -> None:
        """Counts one completion's usage."""
        self.calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.latency_s += completion.latency_s


class LanguageModelReader:
    """Reads questions with a language model behind the typed query (module docstring)."""

    def __init__(self, chat_model: ChatModel) -> None:
        self.chat_model = chat_model

    def __repr__(self) -> str:
        return f"LanguageModelReader({self.chat_model!r})"

    @property
    def model_name(self) -> str:
        """The model name sent to the endpoint."""
        return self.chat_model.config.model

    def read(
        self,
        question: str,
        index: ModelIndex,
        *,
        model: SemanticModel,
        user: UserContext,
        previous: Query | None = None,
        history: Sequence[Mapping[str, Any]] = (),
    ) -> Generator[str, None, Reading]:
        """Reads ``question`` into a checked query.

        Args:
            question: The user's question.
            index: The model's index of the values ``user``'s rows hold.
            model: The semantic model (members listed, access checked).
            user: Whose access decides the members shown and the checks.
            previous: The thread's last typed query, or None.
            history: The thread's earlier messages (``{"role", "content"}``).

        Yields:
            The model's reasoning, piece by piece.

        Returns:
            The reading: a query, or a refusal, or the endpoint's failure; never raises for an
            endpoint failure, so the caller decides (refuse, or fall back to the rule reader).
        """
        meta = search_members(model, "", user)
        asked = messages(question, meta=meta, index=index, previous=previous, history=history)
        reading = Reading()
        for _ in range(ATTEMPTS):
            try:
                completion = yield from self.chat_model.complete(asked, tools=TOOLS)
            except LanguageModelError as exc:
                reading.failure = exc
                return reading
            reading.add(completion)
            name, arguments = _answer(completion)
            try:
                outcome = parse_answer(name, arguments)
                if isinstance(outcome, str):
                    reading.refusal = outcome
                    return reading
                check_query(outcome, index, model=model, user=user)
            except InvalidQueryError as exc:
                reading.invalid.append(exc.reason)
                asked = [*asked, *_correction(name, arguments, exc.reason)]
                continue
            reading.query = outcome
            return reading
        reading.refusal = f"the language model's query is invalid: {reading.invalid[-1]}"
        return reading


def _answer(completion: Completion) -> tuple[str | None, str]:
    """The first tool call's name and arguments, or the content (``json`` mode)."""
    if completion.tool_calls:
        return completion.tool_calls[0]
    return None, completion.content.strip()


def _correction(name: str | None, arguments: str, reason: str) -> list[dict[str, Any]]:
    """The refused answer and the validator's message, as the next messages."""
    again = f"That query is invalid: {reason}. Answer again with a corrected {QUERY_TOOL} call."
    if name is None:
        return [
            {"role": "assistant", "content": arguments},
            {"role": "user", "content": again},
        ]
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"error": again})},
    ]
