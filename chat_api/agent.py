"""One turn of the analytics agent, as the stream messages it produces.

The rule readers are deterministic: the planner (or the model-driven reader) maps the question
to a Semantic SQL query (with ``llm``/``hybrid`` a language model may read the typed query
instead, ``chat_api.reader.llm``, checked by the same validator), the metadata search and the
SQL tool run it against the warehouse under the user's row-level security, and the answer is
composed from the rows. A turn is a generator of NDJSON
line objects in this order (interface, "Response", "Events"; field notes, "Lines that the
interface does not list")::

    __cutoff__                 sort 0, state {chatId, isStreaming: true}
    user message               the question
    thinking deltas            development mode only, then the complete thinking message
    svcMeta  (input, result)   metadata search; graphPath [agent, "tools"]
    svcSqlApi (input, result)  only when the question was planned; a failure is a tool error
    content deltas             the answer in chunks, isInProcess true, then the same id once
                               more with the whole answer, isDelta false, isInProcess false
    final answer               graphPath ["final"], isDelta false, isInProcess false
    __state__                  state {chatId, isStreaming: false, messages}
    __usage__                  last: llmCalls, tokens, sqlQueries, and the turn's reader
                               (``reader``; with a language model also ``llmModel`` and
                               ``llmLatencyMs``: unknown fields the field notes allow)

The generator blocks (planning, DuckDB): the HTTP layer drives it from a worker thread, paces it
and stops it on abort, ending the stream with :meth:`Turn.aborted_lines` instead.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from chat_api.errors import InvalidQueryError, UnreadableQuestionError
from chat_api.planner.access import PROBES, AccessCheck, access_check, visible_vocabulary
from chat_api.planner.answers import compose_answer, compose_cannot_answer, vega_spec
from chat_api.planner.planner import (
    CannotAnswer,
    Plan,
    QuerySpec,
    QuestionReader,
    plan_question,
    rule_reader,
)
from chat_api.planner.plans import build_plan, describe_filter
from chat_api.planner.shape_answers import share_answer
from chat_api.planner.specs import PlanState, plan_state, share_specs, spec_from_state
from chat_api.planner.vocabulary import Vocabulary, load_vocabulary
from chat_api.reader.access import (
    PerAccess,
    access_key,
    access_note,
    limited_note,
    visible_values,
)
from chat_api.reader.checks import check_query
from chat_api.reader.describe import compose, read_as
from chat_api.reader.index import ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.llm import LanguageModelReader, Reading
from chat_api.reader.query import Query
from chat_api.reader.sql import semantic_sql
from chat_api.search import search_members
from chat_api.semantic.checks import check_members
from chat_api.semantic.model import SemanticModel
from chat_api.sql.compiler import CompiledQuery
from chat_api.sql.policies import UserContext
from chat_api.sql.sql_tool import ToolError, compile_tool_query, result_payload, run_tool_query
from chat_api.sql.warehouse import QueryResult, Warehouse
from models import wire

logger = logging.getLogger(__name__)

Line = dict[str, Any]
"""One NDJSON line as a JSON object (validates as :class:`models.chat.StreamMessage`)."""

TYPED_QUERY_KEY = "typedQuery"
"""The thread keeps the model reader's last query under this key of its opaque state."""
DELTA_CHARS = 40
"""Content deltas end at a sentence end or after about this many characters."""
ReaderMode = Literal["rules", "llm", "hybrid"]
"""Who reads the typed query: the rule reader, a language model, or rules then the model."""
_TOKEN = re.compile(r"\s*\S+\s*")
_SENTENCE_END = re.compile(r"[.!?:]\s+$")


@dataclass(frozen=True)
class Toolbox:
    """What the agent works with, shared by every turn.

    Attributes:
        model: The semantic data model (views, members, access policies).
        vocabulary: Words of the data the planner recognises (carriers, airports, months).
        warehouse: Runs compiled queries on the DuckDB file.
        reader: The flights-only planner's reader (``legacy``), used when ``index`` is None.
        index: The model's index: when given, questions are read by the model-driven reader
            (``chat_api.reader``) into a typed query; the safety rules after it (access
            policies, SQL guard, compiler) do not depend on which reader it is.
        mode: With ``index``: ``rules``, ``llm`` (``language_model`` reads every question) or
            ``hybrid`` (the rule reader answers what it reads; the language model the rest).
        language_model: The language-model reader of ``llm`` and ``hybrid``.

    ``vocabulary`` and ``index`` hold every row's values; a user under a row filter reads with
    those of their visible rows (:meth:`vocabulary_for`, :meth:`index_for`), built once per
    distinct access and kept (``chat_api.reader.access.PerAccess``).
    """

    model: SemanticModel
    vocabulary: Vocabulary | None
    warehouse: Warehouse
    reader: QuestionReader = rule_reader
    index: ModelIndex | None = None
    mode: ReaderMode = "rules"
    language_model: LanguageModelReader | None = None
    _vocabularies: PerAccess[Vocabulary] | None = field(init=False, repr=False, compare=False)
    _indexes: PerAccess[ModelIndex] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode != "rules" and self.language_model is None:
            raise ValueError(f"reader {self.mode} needs a language model")
        vocabularies = indexes = None
        if self.vocabulary is not None:
            vocabularies = PerAccess(self.vocabulary, self._visible_vocabulary)
        if self.index is not None:
            indexes = PerAccess(self.index, self._visible_index)
        object.__setattr__(self, "_vocabularies", vocabularies)
        object.__setattr__(self, "_indexes", indexes)

    @property
    def planner_vocabulary(self) -> Vocabulary:
        """The legacy planner's vocabulary.

        Raises:
            RuntimeError: this toolbox reads with the model-driven reader (no vocabulary).
        """
        if self.vocabulary is None:
            raise RuntimeError("the legacy planner's vocabulary is not loaded: reader is rules")
        return self.vocabulary

    def vocabulary_for(self, user: UserContext) -> Vocabulary:
        """The legacy planner's vocabulary of the rows ``user`` sees.

        Raises:
            RuntimeError: this toolbox reads with the model-driven reader (no vocabulary).
        """
        if self._vocabularies is None:
            return self.planner_vocabulary
        return self._vocabularies.get(access_key(self.model, user), user)

    def index_for(self, user: UserContext) -> ModelIndex | None:
        """The model's index of the values ``user``'s rows hold; None: the legacy planner."""
        if self._indexes is None:
            return None
        return self._indexes.get(access_key(self.model, user), user)

    def _visible_vocabulary(self, user: UserContext) -> Vocabulary:
        return visible_vocabulary(self.model, user, self.warehouse.query_raw)

    def _visible_index(self, user: UserContext) -> ModelIndex:
        rows = self.warehouse.query_raw
        return build_index(self.model, rows, values=visible_values(self.model, user, rows))

    @classmethod
    def build(
        cls,
        model: SemanticModel,
        warehouse: Warehouse,
        *,
        reader: Literal["rules", "legacy", "llm", "hybrid"],
        language_model: LanguageModelReader | None = None,
    ) -> Toolbox:
        """The toolbox of ``reader`` over ``model`` and ``warehouse``, checked against each other.

        Raises:
            ModelError: a member's SQL fails against the warehouse (file and member named).
            ValueError: ``llm`` or ``hybrid`` without ``language_model``.
        """
        check_members(model, warehouse.query_raw)
        if reader == "legacy":
            return cls(model, load_vocabulary(warehouse.query_raw), warehouse)
        index = build_index(model, warehouse.query_raw)
        return cls(model, None, warehouse, index=index, mode=reader, language_model=language_model)

    def for_model(self, model: SemanticModel) -> Toolbox:
        """The same warehouse and reader over another model (a branch), indexed anew."""
        if self.index is None:
            return replace(self, model=model)
        return replace(self, model=model, index=build_index(model, self.warehouse.query_raw))


@dataclass(frozen=True)
class TurnRequest:
    """One question on a thread.

    Attributes:
        chat_id: The thread's chatId, announced in ``__cutoff__``.
        question: The user's input.
        user: Identity for row-level security.
        memory_id: The thread's ``memoryId`` for the SQL tool.
        previous: The thread's last answered query (:attr:`Turn.plan_state` of an earlier
            turn, kept by the thread as an opaque JSON object), the context of a follow-up
            question; None on a new thread.
        history: Summaries of the thread's earlier messages, for ``__state__``.
        development_mode: Stream ``thinking`` lines.
        row_limit: Most rows in the SQL tool result's ``data``.
    """

    chat_id: str
    question: str
    user: UserContext
    memory_id: str
    previous: PlanState | None = None
    history: tuple[dict[str, Any], ...] = ()
    development_mode: bool = True
    row_limit: int = 100


class Turn:
    """One turn of the agent; :meth:`lines` runs it.

    After :meth:`lines` is exhausted (or stopped), the attributes tell what happened:

    Attributes:
        spec: The query answered, or None (cannot answer, failed query, not run yet).
        plan_state: ``spec`` as JSON for the thread to keep (None with ``spec``).
        answer: The final answer text, once its line was produced.
        sql_queries: Queries sent to the warehouse.
        reader: Which reader read the question: ``legacy``, ``rules`` or ``llm``.
        reading: The language model's reading and its cost, when it was asked.
    """

    def __init__(self, request: TurnRequest, *, toolbox: Toolbox) -> None:
        self.request = request
        self._toolbox = toolbox
        self._sort = 0
        self._user_id = str(uuid.uuid4())
        self._final_id = str(uuid.uuid4())
        self.spec: QuerySpec | None = None
        self.query: Query | None = None
        self.answer: str | None = None
        self.sql_queries = 0
        self.reader = "legacy" if toolbox.index is None else toolbox.mode
        self.reading: Reading | None = None

    @property
    def plan_state(self) -> PlanState | None:
        """The answered query as a JSON object, the next turn's ``TurnRequest.previous``."""
        if self.query is not None:
            return {TYPED_QUERY_KEY: self.query.to_json()}
        return plan_state(self.spec) if self.spec is not None else None

    @property
    def answered(self) -> bool:
        """Whether a query ran and its rows back the answer."""
        return self.spec is not None or self.query is not None

    def lines(self) -> Generator[Line, None, None]:
        """Runs the turn.

        Yields:
            Line objects in the order of the module docstring, ``sort`` increasing from 0.

        Raises:
            ChatApiError: An unexpected failure of search or planning (compile and query
                failures become tool errors instead).
        """
        request = self.request
        yield self._line(wire.ID_CUTOFF, role="assistant", state=self._state(streaming=True))
        yield self._line(self._user_id, role="user", content=request.question)
        index = self._toolbox.index_for(request.user)
        if index is not None:
            answer = yield from self._model_answer(index)
        else:
            answer = yield from self._planner_answer()
        yield from self._answer(answer)
        yield self._line(wire.ID_STATE, state=self._state(streaming=False))
        yield self.usage_line()

    def _planner_answer(self) -> Generator[Line, Any, str]:
        """The legacy planner's turn up to the answer text: plan, think, search, run."""
        request = self.request
        outcome = plan_question(
            request.question,
            vocabulary=self._vocabulary(),
            previous=spec_from_state(request.previous),
            reader=self._toolbox.reader,
        )
        reasoning: Sequence[str]
        if isinstance(outcome, CannotAnswer):
            reasoning, search_query = (outcome.reason,), request.question
        else:
            reasoning, search_query = outcome.reasoning, outcome.search_query
        if request.development_mode:
            yield from self._thinking(reasoning)
        yield from self._meta_tool(search_query)
        if isinstance(outcome, CannotAnswer):
            return self._limited(compose_cannot_answer(outcome))
        return (yield from self._answer_plan(outcome))

    def _model_answer(self, index: ModelIndex) -> Generator[Line, Any, str]:
        """The model-driven reader's turn up to the answer text: read, say it, search, run.

        ``rules`` and ``hybrid`` read with the rule reader first; ``llm`` and ``hybrid`` (for
        what the rules cannot read) ask the language model. Both readers' queries pass
        :func:`chat_api.reader.checks.check_query` before anything runs.
        """
        request = self.request
        if self._toolbox.mode == "llm":
            return (yield from self._llm_answer(index, fallback=None))
        try:
            query = read(request.question, index, previous=_previous_query(request.previous))
            check_query(query, index, model=self._toolbox.model, user=request.user)
        except UnreadableQuestionError as exc:
            if self._toolbox.mode == "hybrid":
                return (yield from self._llm_answer(index, fallback=exc))
            return (yield from self._unreadable(exc))
        self.reader = "rules"
        return (yield from self._read_query(query, index))

    def _read_query(self, query: Query, index: ModelIndex) -> Generator[Line, Any, str]:
        """Says how the query was read, searches the metadata, runs the query."""
        if self.request.development_mode:
            yield from self._thinking([read_as(query, index), *query.notes])
        yield from self._meta_tool(self.request.question)
        return (yield from self._run_query(query, index))

    def _unreadable(self, exc: UnreadableQuestionError) -> Generator[Line, Any, str]:
        """The refusal of a question no reader could read, with the reason."""
        request = self.request
        reason = exc.reason
        if exc.words and limited_note(self._toolbox.model, request.user):
            # a word of another view or of none: one refusal, as hidden rows' values are
            # unknown to this user's index (chat_api.reader.access)
            reason = f"I don't know {', '.join(repr(w) for w in exc.words)}."
        if request.development_mode:
            yield from self._thinking([reason])
        yield from self._meta_tool(request.question)
        return self._limited(f"I can't answer that from the data: {reason}")

    def _llm_answer(
        self, index: ModelIndex, *, fallback: UnreadableQuestionError | None
    ) -> Generator[Line, Any, str]:
        """The language model's reading (``chat_api.reader.llm``), then as the rule reader's.

        An unreachable endpoint (or an open circuit breaker) answers ``fallback``'s refusal in
        ``hybrid``, and a refusal naming the failure in ``llm``; it never waits past the
        client's timeouts.
        """
        language_model = self._toolbox.language_model
        assert language_model is not None  # Toolbox.__post_init__
        request, self.reader = self.request, "llm"
        reading = yield from self._streamed_thinking(
            language_model.read(
                request.question, index, model=self._toolbox.model, user=request.user,
                previous=_previous_query(request.previous), history=request.history,
            )
        )  # fmt: skip
        self.reading = reading
        if reading.query is not None:
            return (yield from self._read_query(reading.query, index))
        if reading.failure is not None and fallback is not None:
            self.reader = "rules"
            return (yield from self._unreadable(fallback))
        if reading.failure is not None:
            reason = f"the language model is unavailable ({reading.failure.message})."
        else:
            reason = reading.refusal.rstrip(".") + "."
        return (yield from self._unreadable(InvalidQueryError("refused", reason)))

    def _streamed_thinking(
        self, reading: Generator[str, None, Reading]
    ) -> Generator[Line, Any, Reading]:
        """Streams the language model's reasoning as thinking deltas; returns its reading."""
        thinking_id, whole = str(uuid.uuid4()), ""
        try:
            while True:
                try:
                    piece = next(reading)
                except StopIteration as stop:
                    result: Reading = stop.value
                    break
                whole += piece
                if self.request.development_mode:
                    yield self._agent_line(
                        thinking_id, thinking=piece, isDelta=True, isInProcess=True
                    )
        finally:
            reading.close()
        if whole and self.request.development_mode:
            yield self._agent_line(thinking_id, thinking=whole, isDelta=False, isInProcess=False)
        return result

    def _run_query(self, query: Query, index: ModelIndex) -> Generator[Line, Any, str]:
        """Says row-level security out loud, runs the typed query, composes the answer."""
        user = self.request.user
        checked = access_note(query, model=self._toolbox.model, index=index, user=user)
        if checked.query is None:
            return checked.note
        query = checked.query
        numeric = frozenset(
            name for name in query.members
            if name in index.views[query.view].members
            and index.info(name).member.type in ("number", "boolean")
        )  # fmt: skip
        sql = semantic_sql(query, numeric=numeric)
        reading = read_as(query, index)
        compiled = compile_tool_query(sql, model=self._toolbox.model, user=user)
        payload = {
            "sqlQuery": sql,
            "queryTitle": reading.removeprefix("Read as: ").rstrip(".")[:200],
            "description": reading,
            "userRequest": self.request.question,
            "memoryId": self.request.memory_id,
        }
        outcome = yield from self._sql_call(payload, compiled)
        if isinstance(outcome, dict):
            return f"I could not answer that: the query failed ({outcome['error']})."
        self.query = query
        columns = [name for name, _ in outcome.columns]
        answer = compose(
            query, index, columns=columns, rows=outcome.rows, total_rows=outcome.total_rows
        )
        return f"{checked.note}\n\n{answer}" if checked.note else answer

    def _vocabulary(self) -> Vocabulary:
        """The legacy planner's vocabulary of the rows this turn's user sees."""
        return self._toolbox.vocabulary_for(self.request.user)

    def _limited(self, refusal: str) -> str:
        """A refusal, followed by the access note when the user's access is limited."""
        limited = limited_note(self._toolbox.model, self.request.user)
        return f"{refusal}\n\n{limited}" if limited else refusal

    def summaries(self) -> list[dict[str, Any]]:
        """Returns: ``{"id", "role", "content"}`` of the question and, once given, the answer."""
        found = [{"id": self._user_id, "role": "user", "content": self.request.question}]
        if self.answer is not None:
            found.append({"id": self._final_id, "role": "assistant", "content": self.answer})
        return found

    def aborted_lines(self) -> list[Line]:
        """Returns: the ``__aborted__`` line then ``__usage__``.

        To end an aborted stream (field notes, "Lines that the interface does not list").
        """
        aborted = self._line(
            wire.ID_ABORTED, type="abort", code="chat_aborted", message="Chat aborted by the user"
        )
        return [aborted, self.usage_line()]

    def usage_line(self) -> Line:
        """Returns: the ``__usage__`` line.

        ``llmCalls`` and tokens count the language model's calls (0 for the rule readers);
        ``reader`` names the reader that read the question, and with a language model
        ``llmModel`` and ``llmLatencyMs`` (its calls' milliseconds) follow: fields the field
        notes' ``usage: {llmCalls, inputTokens, outputTokens, totalTokens, ...}`` leaves open,
        archived raw with the line.
        """
        reading = self.reading
        tokens_in = reading.input_tokens if reading else 0
        tokens_out = reading.output_tokens if reading else 0
        usage: dict[str, Any] = {
            "llmCalls": reading.calls if reading else 0,
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "totalTokens": tokens_in + tokens_out,
            "sqlQueries": self.sql_queries,
            "reader": self.reader,
        }
        if reading is not None and self._toolbox.language_model is not None:
            usage["llmModel"] = self._toolbox.language_model.model_name
            usage["llmLatencyMs"] = round(reading.latency_s * 1000)
        return self._line(wire.ID_USAGE, usage=usage)

    # -- lines -----------------------------------------------------------------------------------

    def _line(self, line_id: str, **fields: Any) -> Line:
        line: Line = {"id": line_id, **fields, "sort": self._sort}
        self._sort += 1
        return line

    def _state(self, *, streaming: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"chatId": self.request.chat_id, "isStreaming": streaming}
        if not streaming:
            state["messages"] = [*self.request.history, *self.summaries()]
        return state

    def _thinking(self, sentences: Sequence[str]) -> Iterator[Line]:
        thinking_id = str(uuid.uuid4())
        parts = [s if i == 0 else f" {s}" for i, s in enumerate(sentences)]
        for part in parts:
            yield self._agent_line(thinking_id, thinking=part, isDelta=True, isInProcess=True)
        if parts:
            whole = "".join(parts)
            yield self._agent_line(thinking_id, thinking=whole, isDelta=False, isInProcess=False)

    def _agent_line(self, line_id: str, **fields: Any) -> Line:
        return self._line(line_id, role="assistant", **fields, graphPath=[wire.GRAPH_AGENT])

    def _tool_lines(self, name: str, payload: dict[str, Any]) -> Generator[Line, Any, str]:
        """Yields the tool call's input line; the caller sends the result via :meth:`_result`."""
        call_id = str(uuid.uuid4())
        call = {"name": name, "input": json.dumps(payload)}
        yield self._tool_line(call_id, call, in_process=True)
        return call_id

    def _tool_line(self, call_id: str, call: dict[str, str], *, in_process: bool) -> Line:
        return self._line(
            call_id,
            role="assistant",
            toolCall=call,
            isInProcess=in_process,
            graphPath=[wire.GRAPH_AGENT, wire.GRAPH_TOOLS],
        )

    def _meta_tool(self, search_query: str) -> Iterator[Line]:
        payload = {"searchQuery": search_query}
        call_id = yield from self._tool_lines(wire.TOOL_META, payload)
        found = search_members(self._toolbox.model, search_query, self.request.user)
        call = {"name": wire.TOOL_META, "input": json.dumps(payload), "result": json.dumps(found)}
        yield self._tool_line(call_id, call, in_process=False)

    def _answer_plan(self, plan: Plan) -> Generator[Line, Any, str]:
        """Says row-level security out loud, then runs the plan.

        The access check is ``chat_api.planner.access``; the plan is one query, or two for a share
        (the part and the whole).
        """
        check = self._access(plan.spec)
        if check.spec is None:
            return check.note
        if check.spec != plan.spec:
            vocabulary = self._vocabulary()
            plan = build_plan(
                plan.question, check.spec, vocabulary=vocabulary, reasoning=plan.reasoning
            )
        if plan.spec.share_of:
            answer = yield from self._share(plan)
        else:
            answer = yield from self._sql_tool(plan)
        return f"{check.note}\n\n{answer}" if check.note else answer

    def _access(self, spec: QuerySpec) -> AccessCheck:
        user = self.request.user
        if spec.view not in PROBES or not (user.attributes or user.groups):
            return AccessCheck(spec)
        compiled = compile_tool_query(PROBES[spec.view], model=self._toolbox.model, user=user)
        if isinstance(compiled, dict):
            return AccessCheck(spec)
        probe = run_tool_query(compiled, warehouse=self._toolbox.warehouse, row_limit=1000)
        if isinstance(probe, dict):
            return AccessCheck(spec)
        visible = frozenset(str(row[0]) for row in probe.rows if row[1])
        origins = self._vocabulary().origins
        return access_check(spec, visible=visible, origins=origins, attributes=user.attributes)

    def _share(self, plan: Plan) -> Generator[Line, Any, str]:
        vocabulary = self._vocabulary()
        results = []
        for spec in share_specs(plan.spec):
            sub = build_plan(plan.question, spec, vocabulary=vocabulary, reasoning=plan.reasoning)
            outcome = yield from self._run(sub)
            if isinstance(outcome, str):
                return outcome
            names = [name for name, _ in outcome.columns]
            results.append([dict(zip(names, row, strict=False)) for row in outcome.rows])
        self.spec = plan.spec
        words = [describe_filter(f, vocabulary) for f in plan.spec.share_of]
        return share_answer(plan, results[0], results[1], words)

    def _sql_tool(self, plan: Plan) -> Generator[Line, Any, str]:
        """Runs the plan's query and composes the answer from its rows."""
        outcome = yield from self._run(plan)
        if isinstance(outcome, str):
            return outcome
        self.spec = plan.spec
        return compose_answer(
            plan, columns=outcome.columns, rows=outcome.rows, total_rows=outcome.total_rows
        )

    def _run(self, plan: Plan) -> Generator[Line, Any, QueryResult | str]:
        """Compiles and runs the plan's query.

        A refusal or failure becomes a tool error and the text of the answer.
        """
        model, user = self._toolbox.model, self.request.user
        compiled = compile_tool_query(plan.semantic_sql, model=model, user=user)
        outcome = yield from self._sql_call(self._sql_input(plan, compiled), compiled)
        if isinstance(outcome, dict):
            return f"I could not answer that: the query “{plan.title}” failed ({outcome['error']})."
        return outcome

    def _sql_call(
        self, payload: dict[str, Any], compiled: CompiledQuery | ToolError
    ) -> Generator[Line, Any, QueryResult | ToolError]:
        """One ``svcSqlApi`` tool call: its input line, the run, its result line.

        Returns:
            The rows, or the tool error (a refused compile or a failed run) the result carries.
        """
        call_id = yield from self._tool_lines(wire.TOOL_SQL, payload)
        call = {"name": wire.TOOL_SQL, "input": json.dumps(payload)}
        outcome: QueryResult | ToolError = compiled if isinstance(compiled, dict) else {}
        if not isinstance(compiled, dict):
            self.sql_queries += 1
            outcome = run_tool_query(
                compiled, warehouse=self._toolbox.warehouse, row_limit=self.request.row_limit
            )
        if isinstance(outcome, dict):
            call["result"] = json.dumps(outcome)
            yield self._tool_line(call_id, call, in_process=False)
            logger.info("sql tool failed chat_id=%s code=%s", self.request.chat_id, outcome["code"])
            return outcome
        result = result_payload(payload, outcome, row_limit=self.request.row_limit)
        call["result"] = json.dumps(result)
        yield self._tool_line(call_id, call, in_process=False)
        return outcome

    def _sql_input(self, plan: Plan, compiled: CompiledQuery | ToolError) -> dict[str, Any]:
        payload = {
            "sqlQuery": plan.semantic_sql,
            "queryTitle": plan.title,
            "description": plan.description,
            "userRequest": self.request.question,
            "memoryId": self.request.memory_id,
        }
        if not isinstance(compiled, dict):
            payload["vegaSpec"] = json.dumps(vega_spec(plan, columns=compiled.columns))
        return payload

    def _answer(self, answer: str) -> Iterator[Line]:
        delta_id = str(uuid.uuid4())
        chunks = answer_chunks(answer)
        for chunk in chunks:
            yield self._agent_line(delta_id, content=chunk, isDelta=True, isInProcess=True)
        if chunks:  # the deltas' message ends complete, as thinking does (field notes)
            yield self._agent_line(delta_id, content=answer, isDelta=False, isInProcess=False)
        self.answer = answer
        yield self._line(
            self._final_id,
            role="assistant",
            content=answer,
            isDelta=False,
            isInProcess=False,
            graphPath=[wire.GRAPH_FINAL],
        )


def _previous_query(state: PlanState | None) -> Query | None:
    """The thread's last typed query, or None (a new thread, or another reader's state)."""
    if not state or TYPED_QUERY_KEY not in state:
        return None
    try:
        return Query.from_json(state[TYPED_QUERY_KEY])
    except (KeyError, TypeError, ValueError):
        logger.warning("thread state is not a typed query; reading afresh")
        return None


def answer_chunks(text: str, *, size: int = DELTA_CHARS) -> list[str]:
    """Splits an answer into content deltas.

    Args:
        text: The whole answer.
        size: A chunk ends after at least this many characters at a word boundary, or earlier
            at a sentence end.

    Returns:
        Chunks whose concatenation is exactly ``text`` (empty list for empty text).
    """
    chunks: list[str] = []
    current = ""
    for token in _TOKEN.findall(text) or ([text] if text else []):
        current += token
        if len(current) >= size or _SENTENCE_END.search(current):
            chunks.append(current)
            current = ""
    if current:
        chunks.append(current)
    return chunks


def snapshot_lines(chat_id: str, messages: Sequence[dict[str, Any]]) -> list[Line]:
    """The stream for a chat request without ``input``.

    The thread's current state (interface, "1. Chat": "When omitted, the response returns the
    current state").

    Returns:
        ``__cutoff__`` (not streaming), ``__state__`` with ``messages``, ``__usage__``.
    """
    state = {"chatId": chat_id, "isStreaming": False}
    usage = {"llmCalls": 0, "inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return [
        {"id": wire.ID_CUTOFF, "role": "assistant", "sort": 0, "state": state},
        {"id": wire.ID_STATE, "sort": 1, "state": {**state, "messages": list(messages)}},
        {"id": wire.ID_USAGE, "sort": 2, "usage": {**usage, "sqlQueries": 0}},
    ]
