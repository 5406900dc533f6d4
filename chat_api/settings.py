"""Configuration of our Chat API server, read once from ``CHATSCRIBE_*`` environment variables.

One frozen :class:`ChatApiSettings` per process, built at the edge
(:func:`chat_api.http.server.serve` or a test) and passed to :func:`chat_api.http.app.create_app`;
nothing deeper reads ``os.environ``.

Environment variables (prefix ``CHATSCRIBE_``):

====================================  =========================================================
``CHATSCRIBE_API_KEYS``               comma-separated API keys this process accepts, held in the
                                      process and never stored (default ``demo-key``; keys added
                                      with ``chatscribe api keys add`` are stored, for every
                                      replica, until revoked)
``CHATSCRIBE_MAX_INPUT_CHARS``        longest chat ``input`` in characters (default 4000);
                                      longer is a 413 naming the limit
``CHATSCRIBE_CLOUD_REGION``           ``{cloudRegion}`` path segment served (default ``local``)
``CHATSCRIBE_ACCOUNT_NAME``           ``{accountName}`` path segment served (default ``demo``)
``CHATSCRIBE_AGENT_ID``               ``{agentId}`` path segment served (default ``1``)
``CHATSCRIBE_DATABASE_PATH``          where the embedded nycflights13 DuckDB file is cached
                                      (built when missing; a file it did not build is refused)
``CHATSCRIBE_WAREHOUSE``              the user's warehouse: a DuckDB file (opened read-only,
                                      never written) or a folder of Parquet/CSV files (one table
                                      per file); unset: the embedded nycflights13
``CHATSCRIBE_MODEL_DIR``              folder of the semantic data model's YAML files
``CHATSCRIBE_READER``                 ``rules`` (the model-driven rule reader), ``legacy`` (the
                                      nycflights13-only planner), ``llm`` (a language model reads
                                      the typed query), ``hybrid`` (rules first, the language
                                      model for what they cannot read) or ``auto`` (default:
                                      legacy on the embedded nycflights13 model or data, rules on
                                      any other)
``CHATSCRIBE_LLM_BASE_URL``           the OpenAI-compatible endpoint (``llm``/``hybrid``)
``CHATSCRIBE_LLM_MODEL``              the model name sent to it
``CHATSCRIBE_LLM_API_KEY_ENV``        the name of the environment variable holding its key
                                      (default ``CHATSCRIBE_LLM_API_KEY``; unset: no key)
``CHATSCRIBE_LLM_OUTPUT``             ``tools`` (tool calling, default), ``forced`` (the query
                                      tool named in ``tool_choice``: llama.cpp) or ``json``
                                      (``response_format`` with the query's JSON Schema)
``CHATSCRIBE_LLM_TIMEOUT_S``          connect and between-chunk timeout (default 30)
``CHATSCRIBE_LLM_CALL_TIMEOUT_S``     longest one model call may stream (default 120)
``CHATSCRIBE_LLM_MAX_RETRIES``        retries of timeouts, 429 and 5xx (default 2)
``CHATSCRIBE_LLM_BREAKER_FAILURES``   failed calls in a row that pause calls (default 3)
``CHATSCRIBE_LLM_BREAKER_RESET_S``    how long calls pause (default 30)
``CHATSCRIBE_DEVELOPMENT_MODE``       ``true`` streams ``thinking`` lines (default ``true``)
``CHATSCRIBE_LINE_DELAY_MS``          pause between stream lines, for demos and abort tests
``CHATSCRIBE_ROW_LIMIT``              rows returned in a SQL tool result (default 100)
``CHATSCRIBE_API_DATABASE_URL``       state database: SQLAlchemy URL (default a SQLite file
                                      ``$XDG_STATE_HOME/chatscribe/chat-api.sqlite3``)
``CHATSCRIBE_USER_ATTRIBUTES``        comma-separated user attribute names the account
                                      declares (default ``origin``)
``CHATSCRIBE_USER_GROUPS``            comma-separated group names the account declares
                                      (default none); other ``groups`` are a 400
``CHATSCRIBE_INTERNAL_USERS``         JSON list of internal users created at start:
                                      ``[{"email", "groups": [...], "attributes": {...}}]``
``CHATSCRIBE_MAX_EXTERNAL_USERS``     external users per account (default 10000)
``CHATSCRIBE_EPHEMERAL_TTL_S``        default lifetime of an ephemeral user (one week)
``CHATSCRIBE_SESSION_TTL_S``          lifetime of an embed session (default 300)
``CHATSCRIBE_ABORT_WINDOW_S``         how long after its last turn a thread can still be
                                      aborted (a 204 no-op; later: 404; default 3600)
====================================  =========================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from chat_api.sql.data import default_database_path
from chat_api.state.sessions import SESSION_TTL_S
from chat_api.state.users import DEFAULT_EPHEMERAL_TTL_S, DEFAULT_MAX_EXTERNAL_USERS

DEFAULT_API_KEY = "demo-key"
DEFAULT_CLOUD_REGION = "local"
DEFAULT_ACCOUNT_NAME = "demo"
DEFAULT_AGENT_ID = "1"
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "data_model" / "main"
DEFAULT_ROW_LIMIT = 100
"""Rows in a SQL tool result; ``totalRows`` counts them all (field notes, "Tool names")."""
DEFAULT_USER_ATTRIBUTES = ("origin",)
"""Attributes the demo account declares: ``origin`` drives the flights access policy."""
DEFAULT_ABORT_WINDOW_S = 3600.0
DEFAULT_MAX_INPUT_CHARS = 4000
"""Longest chat ``input``: a long question is a few hundred characters; 4000 keeps a reply
(which repeats the question a few times) under about 64 KiB (issue 12, "Amplification")."""
STATE_FILE_NAME = "chat-api.sqlite3"
DEFAULT_LLM_API_KEY_ENV = "CHATSCRIBE_LLM_API_KEY"
"""The environment variable the language model's key is read from unless another is named."""
ReaderName = Literal["rules", "legacy", "llm", "hybrid"]
"""A reader :func:`resolve_reader` chooses."""


DEFAULT_TIMEOUT_S = 30.0
"""Longest wait for a connection or for the next chunk of a stream."""
DEFAULT_CALL_TIMEOUT_S = 120.0
"""Longest one call may stream, chunks or not."""
DEFAULT_MAX_RETRIES = 2
"""Retries of a timeout, 429 or 5xx by the ``openai`` client (``Retry-After`` honoured)."""
DEFAULT_BREAKER_FAILURES = 3
"""Unavailable language-model calls in a row that open the circuit breaker."""
DEFAULT_BREAKER_RESET_S = 30.0
"""Seconds an open breaker refuses calls."""
DEFAULT_MAX_TOKENS = 1024
"""Most tokens one answer of the language model may hold."""
OutputMode = Literal["tools", "forced", "json"]
"""How the query is asked for: ``tools`` offers the tools (the model may call
``cannot_answer``); ``forced`` names the query tool in ``tool_choice`` (servers that constrain
only a named tool's arguments by a grammar, as llama.cpp's ``chatml-function-calling`` does
when streaming); ``json`` puts the query's schema in ``response_format`` (structured outputs)."""


@dataclass(frozen=True)
class LanguageModelConfig:
    """Where the language model is and how patiently to call it (``chat_api.reader.llm``).

    Attributes:
        base_url: The endpoint's base URL (``http://127.0.0.1:8080/v1``).
        model: The model name sent with each request.
        api_key: The key, read from the environment variable the settings name; never logged.
        output: :data:`OutputMode`.
        timeout_s: Connect timeout and longest wait between two chunks, in seconds.
        call_timeout_s: Longest one call may take, in seconds.
        max_retries: Retries of timeouts, 429 and 5xx (the ``openai`` client's backoff).
        breaker_failures: Unavailable calls in a row that open the circuit breaker.
        breaker_reset_s: Seconds the open breaker refuses calls before trying one again.
        max_tokens: Most tokens one answer may hold.
    """

    base_url: str
    model: str
    api_key: SecretStr | None = None
    output: OutputMode = "tools"
    timeout_s: float = DEFAULT_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    breaker_failures: int = DEFAULT_BREAKER_FAILURES
    breaker_reset_s: float = DEFAULT_BREAKER_RESET_S
    max_tokens: int = DEFAULT_MAX_TOKENS


def default_state_url() -> str:
    """Returns: ``sqlite:///<$XDG_STATE_HOME or ~/.local/state>/chatscribe/chat-api.sqlite3``."""
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite:///{Path(state_home) / 'chatscribe' / STATE_FILE_NAME}"


def is_embedded_model(model_dir: Path | None, warehouse: Path | None) -> bool:
    """Whether the agent serves the embedded nycflights13 model or data.

    True for the embedded model folder (``model_dir`` None or the default) whatever the
    warehouse, and for any model over the embedded warehouse (``warehouse`` None): a changed
    copy of the flights model, as a branch or a regression run uses, stays on the planner its
    member names were written for.
    """
    default = model_dir is None or model_dir.resolve() == DEFAULT_MODEL_DIR.resolve()
    return default or warehouse is None


def resolve_reader(reader: str, *, embedded: bool) -> ReaderName:
    """The reader a setting stands for: ``auto`` is legacy on the embedded flights model or data.

    ``embedded`` is :func:`is_embedded_model`: there the legacy planner still reads more
    questions correctly than the rule reader (``docs/evaluation.md``, "Any model"); on every
    other model only the rule reader can read at all.

    ``llm`` and ``hybrid`` read with the model's index whatever the model (issue 23).

    Raises:
        ValueError: ``reader`` is not ``auto``, ``rules``, ``legacy``, ``llm`` or ``hybrid``.
    """
    if reader == "auto":
        return "legacy" if embedded else "rules"
    for name in get_args(ReaderName):
        if reader == name:
            return name  # type: ignore[no-any-return]
    raise ValueError(f"reader must be auto, rules, legacy, llm or hybrid, not {reader!r}")


class InternalUser(BaseModel):
    """An internal user created at start-up (``CHATSCRIBE_INTERNAL_USERS``).

    Attributes:
        email: The ``internalId`` that names the user.
        groups: Its groups.
        attributes: Its user attributes (names must be declared).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    email: str = Field(min_length=3)
    groups: tuple[str, ...] = ()
    attributes: dict[str, str] = Field(default_factory=dict)


class ChatApiSettings(BaseSettings):
    """Settings of the Chat API server.

    Attributes:
        api_keys: Accepted API keys, sent by clients as ``Authorization: Api-Key <key>``.
        cloud_region, account_name, agent_id: The one agent this server answers for; other
            values in the chat path are a 404 (interface, "Errors").
        database_path: Where the embedded nycflights13 DuckDB file is cached (built when
            missing); used only without ``warehouse``.
        warehouse: The user's DuckDB file or folder of Parquet/CSV files, read-only.
        model_dir: Folder of the semantic data model (YAML cubes, views, access policies).
        reader: ``rules``: the model-driven reader (``chat_api.reader``); ``legacy``: the
            nycflights13-only planner (``chat_api.planner``); ``llm``: a language model reads
            the typed query (``chat_api.reader.llm``); ``hybrid``: the rule reader, and the
            language model for what it cannot read; ``auto``: legacy on the embedded
            nycflights13 model or data, rules on any other (:meth:`chosen_reader`).
        llm_base_url, llm_model: The OpenAI-compatible endpoint and model (``llm``, ``hybrid``).
        llm_api_key_env: The environment variable holding the endpoint's key (issue 23: never
            a command-line value, never logged).
        llm_output, llm_timeout_s, llm_call_timeout_s, llm_max_retries, llm_breaker_failures,
            llm_breaker_reset_s: :class:`chat_api.reader.llm.LanguageModelConfig`.
        development_mode: When true the stream carries the agent's ``thinking`` lines
            (interface, "Chat stream message").
        line_delay_ms: Milliseconds to wait between two stream lines (0: none).
        row_limit: Most rows put in a SQL tool result's ``data``.
        api_database_url: SQLAlchemy URL of the state database (users, threads, sessions).
        max_input_chars: Longest chat ``input`` accepted, in characters (413 beyond).
        user_attributes: Declared user attribute names; others are refused (400).
        user_groups: Declared group names; others are refused (400, field notes).
        internal_users: Internal users created (or updated) at start-up.
        max_external_users: Most live external users of the account (interface, "Limits").
        ephemeral_ttl_s: Lifetime of an ephemeral user without ``ephemeralTtlSeconds``.
        session_ttl_s: Lifetime of an embed session (field notes: 5 minutes).
        abort_window_s: Seconds after its last turn during which a thread counts as
            "recently completed" for abort (interface, "2. Abort").
    """

    model_config = SettingsConfigDict(env_prefix="CHATSCRIBE_", frozen=True, extra="ignore")

    api_keys: Annotated[tuple[SecretStr, ...], NoDecode] = (SecretStr(DEFAULT_API_KEY),)
    cloud_region: str = Field(default=DEFAULT_CLOUD_REGION, min_length=1)
    account_name: str = Field(default=DEFAULT_ACCOUNT_NAME, min_length=1)
    agent_id: str = Field(default=DEFAULT_AGENT_ID, min_length=1)
    database_path: Path = Field(default_factory=default_database_path)
    warehouse: Path | None = None
    model_dir: Path = DEFAULT_MODEL_DIR
    reader: Literal["auto", "rules", "legacy", "llm", "hybrid"] = "auto"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = Field(default=DEFAULT_LLM_API_KEY_ENV, min_length=1)
    llm_output: Literal["tools", "forced", "json"] = "tools"
    llm_timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    llm_call_timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0)
    llm_max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    llm_breaker_failures: int = Field(default=DEFAULT_BREAKER_FAILURES, ge=1)
    llm_breaker_reset_s: float = Field(default=DEFAULT_BREAKER_RESET_S, gt=0)
    development_mode: bool = True
    line_delay_ms: int = Field(default=0, ge=0)
    row_limit: int = Field(default=DEFAULT_ROW_LIMIT, ge=1)
    api_database_url: str = Field(default_factory=default_state_url, min_length=1)
    max_input_chars: int = Field(default=DEFAULT_MAX_INPUT_CHARS, ge=1)
    user_attributes: Annotated[tuple[str, ...], NoDecode] = DEFAULT_USER_ATTRIBUTES
    user_groups: Annotated[tuple[str, ...], NoDecode] = ()
    internal_users: tuple[InternalUser, ...] = ()
    max_external_users: int = Field(default=DEFAULT_MAX_EXTERNAL_USERS, ge=0)
    ephemeral_ttl_s: float = Field(default=DEFAULT_EPHEMERAL_TTL_S, gt=0)
    session_ttl_s: float = Field(default=SESSION_TTL_S, gt=0)
    abort_window_s: float = Field(default=DEFAULT_ABORT_WINDOW_S, ge=0)

    def chosen_reader(self) -> ReaderName:
        """Returns: the reader ``auto`` stands for (:func:`resolve_reader`)."""
        embedded = is_embedded_model(self.model_dir, self.warehouse)
        return resolve_reader(self.reader, embedded=embedded)

    def language_model(self) -> LanguageModelConfig | None:
        """The language model's configuration, its key read from ``llm_api_key_env``.

        Returns:
            None unless the reader is ``llm`` or ``hybrid``.
        """
        if self.reader not in ("llm", "hybrid") or not self.llm_base_url or not self.llm_model:
            return None
        key = os.environ.get(self.llm_api_key_env)
        return LanguageModelConfig(
            base_url=self.llm_base_url,
            model=self.llm_model,
            api_key=SecretStr(key) if key else None,
            output=self.llm_output,
            timeout_s=self.llm_timeout_s,
            call_timeout_s=self.llm_call_timeout_s,
            max_retries=self.llm_max_retries,
            breaker_failures=self.llm_breaker_failures,
            breaker_reset_s=self.llm_breaker_reset_s,
        )

    @model_validator(mode="after")
    def _llm_endpoint(self) -> ChatApiSettings:
        """``llm`` and ``hybrid`` need an endpoint and a model: fail at start, naming them."""
        if self.reader in ("llm", "hybrid"):
            missing = [
                name
                for name, value in (
                    ("CHATSCRIBE_LLM_BASE_URL", self.llm_base_url),
                    ("CHATSCRIBE_LLM_MODEL", self.llm_model),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"reader {self.reader} needs {' and '.join(missing)}")
        return self

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        """``"a, b"`` from the environment becomes ``("a", "b")``; empty entries are dropped."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",")]
        if isinstance(value, list | tuple):
            value = tuple(v for v in value if not (isinstance(v, str) and not v.strip()))
            if not value:
                raise ValueError("CHATSCRIBE_API_KEYS holds no key")
        return value

    @field_validator("user_attributes", "user_groups", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        """``"origin, dest"`` from the environment becomes ``("origin", "dest")``."""
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        return value
