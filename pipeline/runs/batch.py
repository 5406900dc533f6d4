"""Questions files and the jobs they expand to (pure).

A questions file (YAML) names personas, each an identity in ``sessionSettings``, and questions,
each asked as one or more personas::

    name: regression                    # optional run name
    chatUrl: http://...                 # optional; default: CHATSCRIBE_CHAT_URL
    deadlineS: 120                      # optional per-job deadline in seconds
    repeat: 5                           # optional: ask each (question, persona) 5 times
    limits:                             # optional, this run across every worker
      maxConcurrency: 20                #   streams at once
      requestsPerMinute: 600            #   chat calls started per minute
    targetLimits: {maxConcurrency: 50}  # optional, every run asking the same agent
    personas:
      - name: analyst
        sessionSettings: {externalId: analyst-1}
      - name: jfk-ops
        sessionSettings:
          externalId: jfk-ops-1
          userAttributes: [{name: origin, value: JFK}]
    questions:
      - text: How many flights were there in March?
        personas: [analyst]            # omitted: every persona
      - text: Average arrival delay by carrier

Each (question, persona) pair becomes one :class:`models.records.ChatJob` (``repeat`` of them,
one per round, when the file or ``chatscribe batch --repeat N`` repeats the run; scores of
repeated cases: :mod:`pipeline.runs.scores`); the limits travel
on every job (``limits``, ``target_limits``) and the workers enforce them together
(:mod:`pipeline.worker.admission`).

Bounds, so that a small file cannot take the machine (issue 24; the "billion laughs" attack,
OWASP's XML/YAML entity-expansion advice: bound what one document may expand to):

* a file is read only up to :data:`MAX_QUESTIONS_FILE_BYTES`;
* anchors and aliases may repeat at most :data:`MAX_ALIAS_NODES` YAML nodes in all (a persona's
  ``sessionSettings`` shared with ``&``/``*`` costs a few nodes per use; an alias bomb's
  expansion is counted on the composed node graph, before any Python object is built), and
  nesting deeper than :data:`MAX_DEPTH` is refused;
* a file may expand to at most ``max_jobs`` jobs (``CHATSCRIBE_RUN_MAX_JOBS``, 10,000;
  ``chatscribe batch --max-jobs`` raises it on purpose), counted before any job is built.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models.chat import SessionSettings
from models.records import MAX_REQUESTS_PER_MINUTE, ChatJob, RateLimits
from pipeline.errors import QuestionsFileError
from pipeline.settings import DEFAULT_RUN_MAX_JOBS
from pipeline.transcript.result_compare import ExpectedResult

MAX_QUESTIONS_FILE_BYTES: Final = 8 * 1024 * 1024
"""Largest questions file read (bytes)."""
MAX_ALIAS_NODES: Final = 10_000
"""YAML nodes that anchors and aliases may repeat in one file, in all."""
MAX_DEPTH: Final = 64
"""Deepest nesting of YAML collections in a questions file."""


class LimitsSpec(BaseModel):
    """``limits`` / ``targetLimits`` of a questions file (camelCase keys)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    max_concurrency: int | None = Field(default=None, alias="maxConcurrency", ge=1)
    requests_per_minute: int | None = Field(
        default=None, alias="requestsPerMinute", ge=1, le=MAX_REQUESTS_PER_MINUTE
    )

    def to_limits(self) -> RateLimits:
        """Returns: the limits as carried on a job."""
        return RateLimits(
            max_concurrency=self.max_concurrency, requests_per_minute=self.requests_per_minute
        )


def merge_limits(base: RateLimits | None, override: RateLimits | None) -> RateLimits | None:
    """Returns ``base`` with every limit ``override`` sets replaced.

    None when neither sets any (command-line options win over the questions file).
    """
    values = base.model_dump(exclude_none=True) if base is not None else {}
    if override is not None:
        values.update(override.model_dump(exclude_none=True))
    merged = RateLimits(**values)
    return None if merged.empty else merged


class Persona(BaseModel):
    """A named identity to ask questions as."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    session_settings: SessionSettings = Field(alias="sessionSettings")
    chat_url: str | None = Field(default=None, alias="chatUrl", pattern=r"^https?://")


class Question(BaseModel):
    """A question and the personas to ask it as (None: all of them)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    text: str = Field(min_length=1)
    personas: tuple[str, ...] | None = None
    active_branch_name: str | None = Field(default=None, alias="activeBranchName")
    is_default_branch: bool | None = Field(default=None, alias="isDefaultBranch")
    expected: dict[str, ExpectedResult] | None = None
    """Expected result per persona name (``"*"``: any); see :mod:`pipeline.runs.accuracy`."""


class QuestionsFile(BaseModel):
    """A whole questions file; persona names are unique and every reference resolves."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    name: str | None = None
    chat_url: str | None = Field(default=None, alias="chatUrl", pattern=r"^https?://")
    deadline_s: float | None = Field(default=None, alias="deadlineS", gt=0)
    repeat: int = Field(default=1, ge=1)
    """How many times each (question, persona) is asked."""
    limits: LimitsSpec | None = None
    target_limits: LimitsSpec | None = Field(default=None, alias="targetLimits")
    personas: tuple[Persona, ...] = Field(min_length=1)
    questions: tuple[Question, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _references_resolve(self) -> QuestionsFile:
        names = [p.name for p in self.personas]
        if len(set(names)) != len(names):
            raise ValueError("persona names must be unique")
        for question in self.questions:
            unknown = set(question.personas or ()) - set(names)
            if unknown:
                raise ValueError(
                    f"question {question.text!r} names unknown personas {sorted(unknown)}"
                )
        return self


def load_questions(path: Path) -> QuestionsFile:
    """Reads and validates a questions file, within the bounds of the module docstring.

    Raises:
        QuestionsFileError: The file is missing, larger than :data:`MAX_QUESTIONS_FILE_BYTES`,
            is not YAML, repeats more than :data:`MAX_ALIAS_NODES` nodes through aliases,
            nests deeper than :data:`MAX_DEPTH`, or does not validate; the message names the
            offending field or the limit.
    """
    data = load_bounded_yaml(path)
    try:
        return QuestionsFile.model_validate(data)
    except ValidationError as exc:
        raise QuestionsFileError(_first_errors(exc), path=path) from exc


def load_bounded_yaml(
    path: Path,
    *,
    max_bytes: int = MAX_QUESTIONS_FILE_BYTES,
    max_alias_nodes: int = MAX_ALIAS_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Reads one YAML document safely (``yaml.SafeLoader``) within size, alias and depth bounds.

    Args:
        path: The file.
        max_bytes: Largest file read.
        max_alias_nodes: Nodes that aliases may repeat in all (an alias of an anchored mapping
            of 5 nodes repeats 5).
        max_depth: Deepest nesting of sequences and mappings.

    Returns:
        The document's value (None for an empty file).

    Raises:
        QuestionsFileError: Unreadable, too large, not YAML, past a bound; the message names it.
    """
    try:
        with path.open("rb") as file:
            raw = file.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise QuestionsFileError(f"larger than the limit of {max_bytes} bytes", path=path)
        loader = yaml.SafeLoader(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node, path, max_alias_nodes=max_alias_nodes, max_depth=max_depth)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise QuestionsFileError(str(exc), path=path) from exc
    except RecursionError as exc:
        raise QuestionsFileError(f"nested deeper than the limit of {max_depth}", path=path) from exc


def _check_expansion(root: yaml.Node, path: Path, *, max_alias_nodes: int, max_depth: int) -> None:
    """Counts the nodes the document expands to, aliases followed, without building it.

    Each node's expanded size is computed once (memoised by identity, children first, without
    recursion), so an alias bomb is measured in time linear in its composed graph.

    Raises:
        QuestionsFileError: Expansion repeats more than ``max_alias_nodes`` nodes, or a
            collection nests deeper than ``max_depth``.
    """
    sizes: dict[int, int] = {}
    distinct: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if depth > max_depth:
            raise QuestionsFileError(f"nested deeper than the limit of {max_depth}", path=path)
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            distinct.add(id(node))
            continue
        if id(node) in sizes:
            continue
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children if id(child) not in sizes)
    repeated = sizes[id(root)] - len(distinct)
    if repeated > max_alias_nodes:
        raise QuestionsFileError(
            f"YAML aliases repeat {repeated} nodes, more than the limit of {max_alias_nodes}"
            " (an alias bomb?)",
            path=path,
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def count_jobs(questions: QuestionsFile, *, repeat: int | None = None) -> int:
    """Returns: how many jobs :func:`expand_jobs` makes of ``questions`` (without making them).

    ``repeat`` overrides the file's ``repeat``, as in :func:`expand_jobs`.
    """
    everyone = len(questions.personas)
    once = sum(len(q.personas) if q.personas is not None else everyone for q in questions.questions)
    return once * (repeat or questions.repeat)


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:limit]]
    return "; ".join(parts)


def expand_jobs(
    questions: QuestionsFile,
    *,
    run_id: str,
    chat_url: str,
    api_key: str | None = None,
    limits: RateLimits | None = None,
    target_limits: RateLimits | None = None,
    max_jobs: int = DEFAULT_RUN_MAX_JOBS,
    path: Path | None = None,
    repeat: int | None = None,
) -> list[ChatJob]:
    """Turns a questions file into jobs, in file order (question major, persona minor).

    A repeated file gives one round of every job per repeat, round after round.

    Args:
        questions: The validated file.
        run_id: The run the jobs belong to.
        chat_url: Chat endpoint for personas that name none (file-level ``chatUrl`` wins).
        api_key: Key the workers send for these jobs; None: the worker's own.
        limits: Run limits set on the command line; each one set wins over the file's
            ``limits``.
        target_limits: Agent limits set on the command line; each one set wins over the
            file's ``targetLimits``.
        max_jobs: Most jobs the file may expand to (``CHATSCRIBE_RUN_MAX_JOBS``).
        path: The file, named in errors.
        repeat: Rounds (``chatscribe batch --repeat``); None: the file's ``repeat`` (1 when
            it gives none).

    Returns:
        One job per (question, persona) and round, each with a fresh UUID job id.

    Raises:
        QuestionsFileError: The file expands to more than ``max_jobs`` jobs, or ``repeat`` is
            below 1 (none is built).
    """
    if repeat is not None and repeat < 1:
        raise QuestionsFileError(
            f"repeat must be at least 1, got {repeat}",
            path=path or Path(questions.name or "questions file"),
        )
    count = count_jobs(questions, repeat=repeat)
    if count > max_jobs:
        raise QuestionsFileError(
            f"expands to {count} jobs, more than the per-run limit of {max_jobs}"
            " (CHATSCRIBE_RUN_MAX_JOBS; `chatscribe batch --max-jobs N` raises it on purpose)",
            path=path or Path(questions.name or "questions file"),
        )
    by_name = {p.name: p for p in questions.personas}
    run_limits = merge_limits(_file_limits(questions.limits), limits)
    agent_limits = merge_limits(_file_limits(questions.target_limits), target_limits)
    jobs = []
    cases = [(q, name) for q in questions.questions for name in q.personas or tuple(by_name)]
    for question, name in cases * (repeat or questions.repeat):
        persona = by_name[name]
        jobs.append(
            ChatJob(
                job_id=str(uuid.uuid4()),
                run_id=run_id,
                question=question.text,
                persona=persona.name,
                session_settings=persona.session_settings,
                chat_url=persona.chat_url or questions.chat_url or chat_url,
                active_branch_name=question.active_branch_name,
                is_default_branch=question.is_default_branch,
                deadline_s=questions.deadline_s,
                limits=run_limits,
                target_limits=agent_limits,
                api_key=api_key,
            )
        )
    return jobs


def _file_limits(spec: LimitsSpec | None) -> RateLimits | None:
    return spec.to_limits() if spec is not None else None
