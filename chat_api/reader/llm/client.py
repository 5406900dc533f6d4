"""The OpenAI-compatible chat-completions client of the language-model reader (the adapter).

Any endpoint that speaks the OpenAI chat-completions protocol serves (a hosted API, vLLM,
llama.cpp's server, Ollama). The official ``openai`` package makes the calls, streamed
(server-sent events): content, the model's reasoning (``reasoning_content`` or ``reasoning``,
as vLLM, llama.cpp and DeepSeek name it) and tool-call deltas (``arguments`` split across
chunks, joined by ``index``) are gathered into one :class:`Completion`; the reasoning is
yielded piece by piece as it arrives, for the Chat API's thinking deltas.

Failures are translated here, once, into ``chat_api.errors``:

- a timeout (connect, or ``timeout_s`` without a chunk), a refused connection, a 429 or a 5xx
  after the ``openai`` client's own retries (which honour ``Retry-After``), and a stream still
  running after ``call_timeout_s``: :class:`~chat_api.errors.LanguageModelUnavailableError`;
- another HTTP error (401, 404, 400): :class:`~chat_api.errors.LanguageModelError`;
- ``breaker_failures`` unavailable calls in a row open a circuit breaker (``pybreaker``): for
  ``breaker_reset_s`` no call is made and :class:`~chat_api.errors.CircuitOpenError` is raised
  at once, so a turn never waits on an endpoint that keeps failing.

The ``openai`` client turns a transport failure while a stream is read into its own
``APITimeoutError``/``APIConnectionError``, so no HTTP library is imported here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
import pybreaker

from chat_api.errors import CircuitOpenError, LanguageModelError, LanguageModelUnavailableError
from chat_api.settings import LanguageModelConfig

logger = logging.getLogger(__name__)

UNUSED_API_KEY = "unused"
"""Sent when no key is configured: local servers ignore it, the ``openai`` client needs one."""


@dataclass
class Completion:
    """One streamed answer of the model.

    Attributes:
        content: The answer's text (the query's JSON in ``json`` mode).
        reasoning: The reasoning the endpoint streamed apart from the content.
        tool_calls: ``(name, arguments JSON text)`` of each tool call, in index order.
        input_tokens, output_tokens: The endpoint's usage figures (0 when it sends none).
        latency_s: Seconds from the request to the stream's end.
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0


class ChatModel:
    """Streams chat completions from one endpoint, behind a circuit breaker (module docstring).

    Thread-safe as the ``openai`` client is; one per process, shared by every turn.
    """

    def __init__(self, config: LanguageModelConfig) -> None:
        self.config = config
        key = config.api_key.get_secret_value() if config.api_key else UNUSED_API_KEY
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=key,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
        )
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=config.breaker_failures,
            reset_timeout=config.breaker_reset_s,
            exclude=[lambda exc: not isinstance(exc, LanguageModelUnavailableError)],
            throw_new_error_on_trip=False,
        )
        self.calls = 0
        self.failures = 0

    def __repr__(self) -> str:
        return (
            f"ChatModel(model={self.config.model!r} base_url={self.config.base_url!r} "
            f"calls={self.calls} failures={self.failures} breaker={self._breaker.current_state})"
        )

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] = ()
    ) -> Generator[str, None, Completion]:
        """Asks the model once and streams its answer.

        Args:
            messages: OpenAI chat messages (``{"role", "content", ...}``).
            tools: OpenAI tool definitions offered (``tools`` mode), or none.

        Yields:
            Pieces of the model's reasoning, as they arrive.

        Returns:
            The whole answer.

        Raises:
            LanguageModelUnavailableError: timeout, stall, refused connection, 429 or 5xx.
            CircuitOpenError: the endpoint failed too often in a row; no call was made.
            LanguageModelError: any other refusal of the endpoint.
        """
        try:
            with self._breaker.calling():  # refuses at once while open
                self.calls += 1
                return (yield from self._stream(messages, tools))
        except pybreaker.CircuitBreakerError as exc:
            raise CircuitOpenError(
                f"the language model at {self.config.base_url} keeps failing; calls pause for "
                f"{self.config.breaker_reset_s:g} s",
                retry_after_s=self.config.breaker_reset_s,
            ) from exc
        except LanguageModelError:
            self.failures += 1
            raise

    def _stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Generator[str, None, Completion]:
        started = time.monotonic()
        found = Completion()
        calls: dict[int, list[str]] = {}
        try:
            stream = self._client.chat.completions.create(**self._request(messages, tools))
            with stream:
                for chunk in stream:
                    if time.monotonic() - started > self.config.call_timeout_s:
                        raise LanguageModelUnavailableError(
                            f"the language model streamed past {self.config.call_timeout_s:g} s"
                        )
                    yield from _gather(chunk, found, calls)
        except (openai.APIError, ValueError) as exc:
            raise _translated(exc) from exc
        found.tool_calls = [(name, args) for _, (name, args) in sorted(calls.items())]
        found.latency_s = time.monotonic() - started
        logger.info(
            "language model answered model=%s latency_s=%.3f input_tokens=%d output_tokens=%d",
            self.config.model, found.latency_s, found.input_tokens, found.output_tokens,
        )  # fmt: skip
        return found

    def _request(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self.config.max_tokens,
            "temperature": 0,
        }
        if tools and self.config.output in ("tools", "forced"):
            request["tools"] = list(tools)
            if self.config.output == "forced":
                name = tools[0]["function"]["name"]
                request["tool_choice"] = {"type": "function", "function": {"name": name}}
        elif tools:
            schema = tools[0]["function"]["parameters"]
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": tools[0]["function"]["name"], "schema": schema},
            }
        return request


def _gather(
    chunk: Any, found: Completion, calls: dict[int, list[str]]
) -> Generator[str, None, None]:
    """Folds one chunk into ``found`` (tool-call pieces into ``calls``); yields its reasoning."""
    if chunk.usage is not None:
        found.input_tokens = chunk.usage.prompt_tokens or 0
        found.output_tokens = chunk.usage.completion_tokens or 0
    for choice in chunk.choices:
        delta = choice.delta
        extra = delta.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            found.reasoning += reasoning
            yield reasoning
        found.content += delta.content or ""
        for call in delta.tool_calls or ():
            entry = calls.setdefault(call.index, ["", ""])
            if call.function is not None:
                entry[0] += call.function.name or ""
                entry[1] += call.function.arguments or ""


def _translated(exc: Exception) -> LanguageModelError:
    """The ``openai`` failure as our error (module docstring)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"the language model answered HTTP {status}"
        if status == 429 or status >= 500:
            retry_after = _retry_after_s(exc.response.headers.get("retry-after"))
            return LanguageModelUnavailableError(
                message, status_code=status, retry_after_s=retry_after
            )
        return LanguageModelError(message)
    if isinstance(exc, openai.APITimeoutError):
        return LanguageModelUnavailableError("the language model did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return LanguageModelUnavailableError(f"the language model is unreachable ({exc})")
    return LanguageModelError(f"the language model's answer could not be read ({exc})")


def _retry_after_s(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
