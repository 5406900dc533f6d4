"""Questions files and the jobs they expand to (pure).

A questions file (YAML) names personas, each an identity in ``sessionSettings``, and questions,
each asked as one or more personas::

    name: regression                    # optional run name
    chatUrl: http://...                 # optional; default: CHATSCRIBE_CHAT_URL
    deadlineS: 120                      # optional per-job deadline in seconds
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

Each (question, persona) pair becomes one :class:`models.records.ChatJob`; the limits travel
on every job (``limits``, ``target_limits``) and the workers enforce them together
(:mod:`pipeline.worker.admission`).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models.chat import SessionSettings
from models.records import MAX_REQUESTS_PER_MINUTE, ChatJob, RateLimits
from pipeline.errors import QuestionsFileError
from pipeline.transcript.result_compare import ExpectedResult


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
    """Reads and validates a questions file.

    Raises:
        QuestionsFileError: The file is missing, is not YAML, or does not validate; the message
            names the offending field.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise QuestionsFileError(str(exc), path=path) from exc
    try:
        return QuestionsFile.model_validate(data)
    except ValidationError as exc:
        raise QuestionsFileError(_first_errors(exc), path=path) from exc


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
) -> list[ChatJob]:
    """Turns a questions file into jobs, in file order (question major, persona minor).

    Args:
        questions: The validated file.
        run_id: The run the jobs belong to.
        chat_url: Chat endpoint for personas that name none (file-level ``chatUrl`` wins).
        api_key: Key the workers send for these jobs; None: the worker's own.
        limits: Run limits set on the command line; each one set wins over the file's
            ``limits``.
        target_limits: Agent limits set on the command line; each one set wins over the
            file's ``targetLimits``.

    Returns:
        One job per (question, persona), each with a fresh UUID job id.
    """
    by_name = {p.name: p for p in questions.personas}
    run_limits = merge_limits(_file_limits(questions.limits), limits)
    agent_limits = merge_limits(_file_limits(questions.target_limits), target_limits)
    jobs = []
    for question in questions.questions:
        for name in question.personas or tuple(by_name):
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
