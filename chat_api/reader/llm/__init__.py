"""The language-model reader: an OpenAI-compatible model asked for the typed query.

``client`` (the endpoint: streaming, timeouts, retries, circuit breaker; the one importer of
``openai``) -> ``prompt`` (the messages, the tools, parsing the answer) -> ``reader`` (ask,
check with ``chat_api.reader.checks``, retry once, refuse). The query it returns goes through
the same access policies, SQL guard and compiler as the rule reader's.
"""

from __future__ import annotations

from chat_api.reader.llm.client import ChatModel, Completion
from chat_api.reader.llm.reader import LanguageModelReader, Reading
from chat_api.settings import LanguageModelConfig

__all__ = ["ChatModel", "Completion", "LanguageModelConfig", "LanguageModelReader", "Reading"]
