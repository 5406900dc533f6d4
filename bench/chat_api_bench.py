"""Benchmark 4, our Chat API: questions/s, time to first line, and svcSqlApi's overhead.

Questions: every (question, persona) of ``examples/questions.yaml``, ``rounds`` times, asked of
``chatscribe api serve`` (uvicorn, a child process) with plain httpx at :data:`CONCURRENCY`.
Baseline, same run, same requests and concurrency: the synthetic endpoint replaying the answers
our agent recorded, so the ratio is the agent's own cost (planning, search, DuckDB, answer).

svcSqlApi overhead, in-process: for each planned question, the SQL tool's work
(:func:`chat_api.sql.compiler.compile_semantic_sql` under the persona's row-level security, then
:meth:`chat_api.sql.warehouse.Warehouse.run`: first rows, exact count, JSON-safe values) against
the same compiled SQL run directly on a DuckDB connection (``execute().fetchall()``),
alternating the two, ``rounds`` times.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import duckdb

from bench import processes
from bench.reader import ReadRun, read_all
from bench.workload import questions_jobs, request_bodies
from chat_api.http.app import load_toolbox
from chat_api.planner.planner import Plan, plan_question
from chat_api.settings import ChatApiSettings
from chat_api.sql.compiler import compile_semantic_sql
from chat_api.sql.data import READ_ONLY_CONFIG
from chat_api.sql.policies import UserContext
from models.chat import SessionSettings
from models.records import ChatJob

CONCURRENCY: Final = 4


@dataclass(frozen=True)
class ChatApiFigures:
    """Figures of the questions run and of the SQL tool.

    Attributes:
        ours, replay: The runs against our Chat API and against the replaying endpoint.
        sql_tool_s, duckdb_s: Per planned query, seconds of the SQL tool and of DuckDB alone.
    """

    ours: ReadRun
    replay: ReadRun
    sql_tool_s: list[float]
    duckdb_s: list[float]


def ask(url: str, jobs: Sequence[ChatJob]) -> ReadRun:
    """Asks every job's question at :data:`CONCURRENCY` (after two warm-up questions)."""
    bodies = request_bodies(jobs)
    key = processes.BENCH_API_KEY
    asyncio.run(read_all(url, bodies[:2], api_key=key, concurrency=1))
    return asyncio.run(read_all(url, bodies, api_key=key, concurrency=CONCURRENCY))


def questions(rounds: int, synthetic_url: str) -> tuple[ReadRun, ReadRun]:
    """Runs the questions file ``rounds`` times against our Chat API, then the replay."""
    port = processes.free_port()
    env = {"CHATSCRIBE_API_KEYS": processes.BENCH_API_KEY}
    api = processes.start(
        "chat-api", "pipeline.cli.app", "api", "serve", "--port", str(port), env=env
    )
    try:
        processes.wait_healthy(api, port)
        ours = ask(processes.chat_url(port), questions_jobs(processes.chat_url(port)) * rounds)
    finally:
        api.stop()
    replay = ask(synthetic_url, questions_jobs(synthetic_url) * rounds)
    return ours, replay


def sql_tool(rounds: int) -> tuple[list[float], list[float]]:
    """Times the SQL tool against DuckDB alone on every planned query (module docstring)."""
    settings = ChatApiSettings()
    toolbox = load_toolbox(settings)
    direct = duckdb.connect(
        str(settings.database_path), read_only=True, config=dict(READ_ONLY_CONFIG)
    )
    tool_s: list[float] = []
    duck_s: list[float] = []
    try:
        for _ in range(rounds):
            for job in questions_jobs(settings_url()):
                plan = plan_question(job.question, vocabulary=toolbox.planner_vocabulary)
                if not isinstance(plan, Plan):
                    continue
                user = user_context(job.session_settings)
                started = time.perf_counter()
                compiled = compile_semantic_sql(plan.semantic_sql, model=toolbox.model, user=user)
                toolbox.warehouse.run(compiled, row_limit=settings.row_limit)
                tool_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                direct.execute(compiled.sql).fetchall()
                duck_s.append(time.perf_counter() - started)
    finally:
        direct.close()
        toolbox.warehouse.close()
    return tool_s, duck_s


def user_context(session: SessionSettings) -> UserContext:
    """Returns: the identity row-level security filters by.

    As the Chat API builds it (attribute values as text, booleans lower-case).
    """
    attributes = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in session.attributes().items()
    }
    return UserContext(
        groups=tuple(session.groups or ()),
        attributes=attributes,
        security_context=session.security_context or {},
    )


def settings_url() -> str:
    """Returns: a chat URL for building jobs that are never sent (only their questions count)."""
    return processes.chat_url(1)


def measure(rounds: int, *, synthetic_url: str) -> ChatApiFigures:
    """Runs both parts of the benchmark."""
    ours, replay = questions(rounds, synthetic_url)
    tool_s, duck_s = sql_tool(rounds)
    return ChatApiFigures(ours, replay, tool_s, duck_s)
