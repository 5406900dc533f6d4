"""Wire names: Kafka topics, record headers, stream sentinels and tool names.

Every name that crosses a process boundary lives here, once. Sources:
``chat-api-interface.md`` (Chat stream message, toolCall object) and ``field-notes.md``
(lines the interface does not list, tool names and payloads).
"""

from __future__ import annotations

from typing import Final

# -- Kafka topics (design.md, "Flow") -----------------------------------------------------------
TOPIC_REQUESTS: Final = "chat.requests"
TOPIC_LINES: Final = "chat.lines"
TOPIC_JOB_EVENTS: Final = "chat.job-events"
TOPIC_CANCELLATIONS: Final = "chat.cancellations"
TOPIC_ANSWERS: Final = "chat.answers"
TOPIC_REQUESTS_DLQ: Final = "chat.requests.dlq"
TOPIC_LINES_DLQ: Final = "chat.lines.dlq"
ALL_TOPICS: Final = (
    TOPIC_REQUESTS,
    TOPIC_LINES,
    TOPIC_JOB_EVENTS,
    TOPIC_CANCELLATIONS,
    TOPIC_ANSWERS,
    TOPIC_REQUESTS_DLQ,
    TOPIC_LINES_DLQ,
)
"""Every topic of the pipeline, for ``ensure_topics`` at start-up (design.md, "Topics and keys")."""

# -- Headers of a record on TOPIC_LINES (values are ASCII bytes) ---------------------------------
HEADER_ATTEMPT: Final = "chatscribe-attempt"
HEADER_LINE_NO: Final = "chatscribe-line-no"
HEADER_RECEIVED_AT: Final = "chatscribe-received-at"
"""Receive time as an ISO-8601 UTC timestamp with microseconds."""
HEADER_TERMINATED: Final = "chatscribe-terminated"
"""``1`` when the line ended with ``\\n`` on the wire, ``0`` for a truncated last line."""
HEADER_CHAT_ID: Final = "chatscribe-chat-id"
HEADER_JOB_AT: Final = "chatscribe-job-at"
"""When the job was submitted (``ChatJob.submitted_at``), ISO-8601 UTC: the same on every line of
every attempt of a job, so the archive partitions a job's lines together (migration 0006)."""

# -- Headers of a record on a dead-letter topic --------------------------------------------------
HEADER_DLQ_REASON: Final = "chatscribe-dlq-reason"
HEADER_DLQ_SOURCE_TOPIC: Final = "chatscribe-dlq-source-topic"
HEADER_DLQ_SOURCE_PARTITION: Final = "chatscribe-dlq-source-partition"
HEADER_DLQ_SOURCE_OFFSET: Final = "chatscribe-dlq-source-offset"

# -- CloudEvents attributes of a record on TOPIC_ANSWERS (binary content mode, CloudEvents 1.0
#    Kafka protocol binding: ``ce_*`` headers and ``content-type``) -----------------------------
CE_TYPE_ANSWER: Final = "io.chatscribe.answer.v1"
"""``ce_type`` of a ``chat.answers`` record; the ``v1`` follows the record's schema version."""
CE_SOURCE_PREFIX: Final = "/chatscribe/runs/"
"""``ce_source`` is this prefix and the run id: the run the answer belongs to."""
CE_CONTENT_TYPE: Final = "application/json"

# -- Stream sentinels (interface "Events"; field notes "Lines that the interface does not list") -
ID_CUTOFF: Final = "__cutoff__"
ID_STATE: Final = "__state__"
ID_ABORTED: Final = "__aborted__"
ID_SUSPENDED: Final = "__suspended__"
ID_USAGE: Final = "__usage__"
SENTINEL_IDS: Final = frozenset({ID_CUTOFF, ID_STATE, ID_ABORTED, ID_SUSPENDED, ID_USAGE})

GRAPH_FINAL: Final = "final"
"""``graphPath[0] == "final"`` marks the final consolidated answer (interface, Chat endpoint)."""
GRAPH_AGENT: Final = "svc_data_analyst_agent"
"""``graphPath[0]`` of the agent's own messages (thinking, content deltas, tool calls)."""
GRAPH_TOOLS: Final = "tools"
"""``graphPath[1]`` of a tool-call message: ``[GRAPH_AGENT, GRAPH_TOOLS]``."""

# -- Tool names (interface "toolCall object"; field notes "Tool names and payloads") ------------
TOOL_META: Final = "svcMeta"
TOOL_SQL: Final = "svcSqlApi"
HOSTED_TOOL_META: Final = "cubeMeta"
HOSTED_TOOL_SQL: Final = "cubeSqlApi"
HOSTED_TOOL_SQL_CHART: Final = "cubeSqlApiWithChart"
META_TOOL_NAMES: Final = frozenset({TOOL_META, HOSTED_TOOL_META})
SQL_TOOL_NAMES: Final = frozenset({TOOL_SQL, HOSTED_TOOL_SQL, HOSTED_TOOL_SQL_CHART})

# -- Chat API paths -----------------------------------------------------------------------------
CHAT_PATH_TEMPLATE: Final = (
    "/api/v1/public/{cloud_region}/{account_name}/agents/{agent_id}/chat/stream-chat-state"
)
ABORT_SUFFIX: Final = "/abort"
GENERATE_SESSION_PATH: Final = "/api/v1/embed/generate-session"
