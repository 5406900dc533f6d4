"""Span attribute names: every name the OpenTelemetry export writes, in one place.

Three vocabularies, one block each:

* the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, status "Development"; since 2026
  kept in their own repository, ``open-telemetry/semantic-conventions-genai``): agent spans
  (``invoke_agent``) and tool spans (``execute_tool``), the conversation id, the messages, the
  tool call's arguments and result, time to first chunk; with the general conventions they lean
  on (``db.query.text``, ``db.response.returned_rows``, ``error.type``, ``user.id``);
* OpenInference (Arize Phoenix reads its span kind, session and input/output values to show
  agents, tools and sessions);
* ``chatscribe.*``: what no convention names (run, job, attempt, identity, answer source).

When a convention renames an attribute, the change is one line here.
"""

from __future__ import annotations

from typing import Final

# -- OpenTelemetry GenAI semantic conventions (gen-ai-spans, gen-ai-agent-spans) --------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_TYPE_FUNCTION: Final = "function"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
"""Seconds from the request to the first streamed chunk (the stream's first line)."""

# -- General conventions (database, errors, users) ---------------------------------------------
DB_QUERY_TEXT: Final = "db.query.text"
DB_RESPONSE_RETURNED_ROWS: Final = "db.response.returned_rows"
ERROR_TYPE: Final = "error.type"
USER_ID: Final = "user.id"
SERVICE_NAME: Final = "service.name"

# -- OpenInference (Arize Phoenix) ---------------------------------------------------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
SPAN_KIND_AGENT: Final = "AGENT"
SPAN_KIND_TOOL: Final = "TOOL"
SESSION_ID: Final = "session.id"
PROJECT_NAME: Final = "openinference.project.name"
"""Resource attribute: the Phoenix project the spans land in (else Phoenix's ``default``)."""
INPUT_VALUE: Final = "input.value"
OUTPUT_VALUE: Final = "output.value"
TOOL_NAME: Final = "tool.name"

# -- chatscribe ---------------------------------------------------------------------------------
RUN_ID: Final = "chatscribe.run.id"
JOB_ID: Final = "chatscribe.job.id"
ATTEMPT: Final = "chatscribe.job.attempt"
JOB_STATUS: Final = "chatscribe.job.status"
PERSONA: Final = "chatscribe.persona"
IDENTITY: Final = "chatscribe.identity"
"""The identity the question was asked as, for row-level security (``external:analyst-1``)."""
ANSWER_SOURCE: Final = "chatscribe.answer.source"
TOOL_KIND: Final = "chatscribe.tool.kind"
SQL_TOTAL_ROWS: Final = "chatscribe.sql.total_rows"
"""Rows the query matched (``totalRows``); ``db.response.returned_rows`` is the rows returned."""

SERVICE: Final = "chatscribe"
"""The ``service.name`` of exported spans."""
AGENT_NAME: Final = "chatscribe-agent"
"""``gen_ai.agent.name`` when the archive does not name the agent."""
