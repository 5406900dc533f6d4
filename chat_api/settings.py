"""Configuration of our Chat API server, read once from ``CHATSCRIBE_*`` environment variables.

One frozen :class:`ChatApiSettings` per process, built at the edge (:func:`chat_api.server.serve`
or a test) and passed to :func:`chat_api.app.create_app`; nothing deeper reads ``os.environ``.

Environment variables (prefix ``CHATSCRIBE_``):

====================================  =========================================================
``CHATSCRIBE_API_KEYS``               comma-separated API keys (default ``demo-key``)
``CHATSCRIBE_CLOUD_REGION``           ``{cloudRegion}`` path segment served (default ``local``)
``CHATSCRIBE_ACCOUNT_NAME``           ``{accountName}`` path segment served (default ``demo``)
``CHATSCRIBE_AGENT_ID``               ``{agentId}`` path segment served (default ``1``)
``CHATSCRIBE_DATABASE_PATH``          the nycflights13 DuckDB file (built when missing)
``CHATSCRIBE_MODEL_DIR``              folder of the semantic data model's YAML files
``CHATSCRIBE_DEVELOPMENT_MODE``       ``true`` streams ``thinking`` lines (default ``true``)
``CHATSCRIBE_LINE_DELAY_MS``          pause between stream lines, for demos and abort tests
``CHATSCRIBE_ROW_LIMIT``              rows returned in a SQL tool result (default 100)
====================================  =========================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from chat_api.data import default_database_path

DEFAULT_API_KEY = "demo-key"
DEFAULT_CLOUD_REGION = "local"
DEFAULT_ACCOUNT_NAME = "demo"
DEFAULT_AGENT_ID = "1"
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "data_model" / "main"
DEFAULT_ROW_LIMIT = 100
"""Rows in a SQL tool result; ``totalRows`` counts them all (field notes, "Tool names")."""


class ChatApiSettings(BaseSettings):
    """Settings of the Chat API server.

    Attributes:
        api_keys: Accepted API keys, sent by clients as ``Authorization: Api-Key <key>``.
        cloud_region, account_name, agent_id: The one agent this server answers for; other
            values in the chat path are a 404 (interface, "Errors").
        database_path: The DuckDB file holding nycflights13; built on start when missing.
        model_dir: Folder of the semantic data model (YAML cubes, views, access policies).
        development_mode: When true the stream carries the agent's ``thinking`` lines
            (interface, "Chat stream message").
        line_delay_ms: Milliseconds to wait between two stream lines (0: none).
        row_limit: Most rows put in a SQL tool result's ``data``.
    """

    model_config = SettingsConfigDict(env_prefix="CHATSCRIBE_", frozen=True, extra="ignore")

    api_keys: Annotated[tuple[SecretStr, ...], NoDecode] = (SecretStr(DEFAULT_API_KEY),)
    cloud_region: str = Field(default=DEFAULT_CLOUD_REGION, min_length=1)
    account_name: str = Field(default=DEFAULT_ACCOUNT_NAME, min_length=1)
    agent_id: str = Field(default=DEFAULT_AGENT_ID, min_length=1)
    database_path: Path = Field(default_factory=default_database_path)
    model_dir: Path = DEFAULT_MODEL_DIR
    development_mode: bool = True
    line_delay_ms: int = Field(default=0, ge=0)
    row_limit: int = Field(default=DEFAULT_ROW_LIMIT, ge=1)

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
