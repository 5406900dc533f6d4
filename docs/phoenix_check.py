"""What an Arize Phoenix holds of our exported conversations, read through its own APIs.

Usage (standard library only; Phoenix on 127.0.0.1:6006, docs/observability.md)::

    python docs/phoenix_check.py [--url http://127.0.0.1:6006] [--project chatscribe]

Prints one line per session (Phoenix's GraphQL ``sessions``: the chat id, its traces, first
input, user) and, from the REST API (``/v1/projects/{project}/spans``), one line per trace:
its root span, identity, tool spans with their SQL and row counts. Ends with the totals
``spans=N traces=N sessions=N distinct_span_ids=N``: after a re-export, ``spans`` must not have
grown (ids derive from job, attempt and message ids, so Phoenix keeps one copy).
Exit status 1 when a root span lacks ``session.id`` or ``user.id``, or a trace has no tool span.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from collections import defaultdict
from typing import Any

SESSIONS = """
{ projects { edges { node { name traceCount recordCount
  sessions(first: 1000) { edges { node { sessionId numTraces firstInput { value } } } } } } } }
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


def _graphql(base: str, query: str, variables: dict[str, Any]) -> Any:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"{base}/graphql", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def spans(base: str, project: str) -> list[dict[str, Any]]:
    """Returns: every span of ``project`` (REST API, paged by its cursor)."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": 1000} | ({"cursor": cursor} if cursor else {})
        page = _get(f"{base}/v1/projects/{project}/spans?{urllib.parse.urlencode(query)}")
        found += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def main() -> int:
    """Prints sessions, traces and totals; returns 1 when a check fails (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:6006")
    parser.add_argument("--project", default="chatscribe")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    projects = _graphql(base, SESSIONS, {})["data"]["projects"]["edges"]
    project = next(p["node"] for p in projects if p["node"]["name"] == args.project)
    sessions = [edge["node"] for edge in project["sessions"]["edges"]]
    all_spans = spans(base, args.project)
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in all_spans:
        by_trace[span["context"]["trace_id"]].append(span)
    users = {
        s["attributes"].get("session.id"): s["attributes"].get("user.id")
        for s in all_spans
        if s["parent_id"] is None
    }
    for session in sessions:
        first = (session["firstInput"] or {}).get("value", "")[:60]
        user = users.get(session["sessionId"])
        print(f"session {session['sessionId']} traces={session['numTraces']} user={user} {first!r}")
    failures = 0
    for trace_id, members in sorted(by_trace.items()):
        root = next((s for s in members if s["parent_id"] is None), None)
        tools = [s for s in members if s["span_kind"] == "TOOL"]
        attrs = root["attributes"] if root else {}
        print(
            f"trace {trace_id} root={root and root['name']!r} kind={root and root['span_kind']}"
            f" status={root and root['status_code']} session={attrs.get('session.id')}"
            f" user={attrs.get('user.id')} run={attrs.get('chatscribe.run.id')}"
        )
        for tool in tools:
            a = tool["attributes"]
            sql = (a.get("db.query.text") or "")[:70]
            rows = a.get("db.response.returned_rows")
            print(f"  tool {a.get('tool.name')} status={tool['status_code']} rows={rows} {sql!r}")
        if not root or not attrs.get("session.id") or not attrs.get("user.id") or not tools:
            failures += 1
    distinct = len({s["context"]["span_id"] for s in all_spans})
    print(
        f"spans={len(all_spans)} traces={len(by_trace)} sessions={len(sessions)}"
        f" distinct_span_ids={distinct}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
