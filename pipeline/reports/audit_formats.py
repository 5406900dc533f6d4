"""Audit report formats: CSV and JSON for tools, HTML for people (pure).

* CSV: one row per job; lists joined with ``"; "``; user attributes as ``name=value``. A text
  cell that a spreadsheet would read as a formula (first character ``=``, ``+``, ``-``, ``@``,
  tab or carriage return) gets a leading ``'`` (OWASP, "CSV Injection": :func:`csv_cell`).
* JSON: ``{"generated_at", "filter", "summary", "entries": [...]}``.
* Scores: given ``job_id → scores`` (:func:`pipeline.runs.accuracy.job_scores`), a CSV row
  carries ``matched``, ``partial_credit``, ``case_runs``, ``case_pass_rate`` and ``flaky`` (empty
  for a job without an expected result), a JSON entry a ``score`` object (or null).
* HTML: one self-contained page a non-engineer can read: a summary, then one card per
  question (who asked, when, as which identity, the answer, which data it used, how many rows,
  problems). Charts are drawn from each query's ``vegaSpec`` with its returned rows by
  vega-embed; the vendored scripts (``chat_api/static``: vega, vega-lite, vega-embed) are
  inlined, so the file works offline. When they are absent the page shows the rows as a table
  and says that charts were not rendered. Every archived string is escaped (ids included);
  a content-security policy in the page (:data:`REPORT_CSP`) lets it load and send nothing.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from models.rendering import chart_spec, format_cell, markdown_html
from pipeline.archive.audit import AuditEntry, AuditFilter
from pipeline.runs.scores import JobScore

STATIC_DIR: Final = Path(__file__).resolve().parents[2] / "chat_api" / "static"
VEGA_SCRIPTS: Final = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
TABLE_ROWS: Final = 12
FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""
REPORT_CSP: Final = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
"""The report's content-security policy: its inline scripts and styles, no load, no request."""
CSV_COLUMNS: Final = [
    "asked_at",
    "job_id",
    "run_id",
    "persona",
    "identity",
    "external_id",
    "internal_id",
    "groups",
    "user_attributes",
    "security_context",
    "question",
    "status",
    "aborted",
    "answer_source",
    "answer",
    "views",
    "members",
    "sql",
    "rows_returned",
    "tool_errors",
    "stream_errors",
    "error",
    "matched",
    "partial_credit",
    "case_runs",
    "case_pass_rate",
    "flaky",
    "verdict",
    "reviewer",
    "reviewed_at",
]


def _flat(entry: AuditEntry) -> dict[str, Any]:
    return {
        "asked_at": entry.asked_at.isoformat() if entry.asked_at else None,
        "job_id": entry.job_id,
        "run_id": entry.run_id,
        "persona": entry.persona,
        "identity": entry.identity,
        "external_id": entry.external_id,
        "internal_id": entry.internal_id,
        "groups": "; ".join(entry.groups),
        "user_attributes": "; ".join(f"{k}={v}" for k, v in entry.user_attributes.items()),
        "security_context": json.dumps(entry.security_context) if entry.security_context else "",
        "question": entry.question,
        "status": entry.status,
        "aborted": entry.aborted,
        "answer_source": entry.answer_source,
        "answer": entry.answer,
        "views": "; ".join(entry.views),
        "members": "; ".join(entry.members),
        "sql": "; ".join(q["sql"] for q in entry.queries if q.get("sql")),
        "rows_returned": entry.rows_returned,
        "tool_errors": "; ".join(f"{e['tool']}: {e['error']}" for e in entry.tool_errors),
        "stream_errors": "; ".join(entry.stream_errors),
        "error": entry.error,
        "verdict": entry.verdict,
        "reviewer": entry.reviewer,
        "reviewed_at": entry.reviewed_at.isoformat() if entry.reviewed_at else None,
    }


def csv_cell(value: Any) -> Any:
    """Returns: ``value``, a text starting with :data:`FORMULA_STARTS` prefixed with ``'``.

    OWASP, "CSV Injection": prefix such cells with a single quote so that spreadsheet software
    shows them as text instead of evaluating them. Numbers, booleans and None pass unchanged.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def to_csv(entries: Sequence[AuditEntry], scores: Mapping[str, JobScore] | None = None) -> str:
    """Returns: the CSV text (header row first; cells through :func:`csv_cell`).

    Args:
        entries: The audit entries.
        scores: ``job_id → scores`` of the scored jobs (module docstring); None: none.
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n", restval="")
    writer.writeheader()
    for entry in entries:
        score = (scores or {}).get(entry.job_id)
        row = {**_flat(entry), **(asdict(score) if score is not None else {})}
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


def summary(entries: Sequence[AuditEntry]) -> dict[str, Any]:
    """Returns: counts for the report's head: questions, identities, views, problems."""
    views = Counter(v for e in entries for v in e.views)
    return {
        "questions": len(entries),
        "identities": len({e.identity for e in entries}),
        "by_status": dict(Counter(e.status for e in entries)),
        "aborted": sum(e.aborted for e in entries),
        "with_tool_errors": sum(bool(e.tool_errors) for e in entries),
        "fallback_answers": sum(e.answer_source == "fallback" for e in entries),
        "rows_returned": sum(e.rows_returned for e in entries),
        "views": dict(views.most_common()),
    }


def to_json(
    entries: Sequence[AuditEntry],
    flt: AuditFilter,
    scores: Mapping[str, JobScore] | None = None,
) -> str:
    """Returns: the JSON document (module docstring); ``scores`` as for :func:`to_csv`."""
    found = scores or {}
    doc = {
        "generated_at": datetime.now(UTC).isoformat(),
        "filter": {k: str(v) if v is not None else None for k, v in vars(flt).items()},
        "summary": summary(entries),
        "entries": [
            {
                **vars(e),
                "views": e.views,
                "members": e.members,
                "rows_returned": e.rows_returned,
                "score": asdict(found[e.job_id]) if e.job_id in found else None,
            }
            for e in entries
        ],
    }
    return json.dumps(doc, default=str, indent=1, ensure_ascii=False)


def vega_scripts(static_dir: Path = STATIC_DIR) -> str | None:
    """Returns: the vendored vega scripts as inline ``<script>`` blocks, or None when absent."""
    paths = [static_dir / name for name in VEGA_SCRIPTS]
    if not all(p.is_file() for p in paths):
        return None
    return "\n".join(f"<script>{p.read_text(encoding='utf-8')}</script>" for p in paths)


def to_html(
    entries: Sequence[AuditEntry], flt: AuditFilter, *, static_dir: Path = STATIC_DIR
) -> str:
    """Returns: the HTML page (module docstring)."""
    scripts = vega_scripts(static_dir)
    charts: list[tuple[str, dict[str, Any]]] = []
    cards = "\n".join(_card(n, e, charts, scripts is not None) for n, e in enumerate(entries, 1))
    facts = summary(entries)
    head = _summary_html(facts, flt)
    note = (
        ""
        if scripts
        else "<p class=note>Charts are not rendered: the vega scripts are not available"
        " offline (chat_api/static); each chart's data is shown as a table instead.</p>"
    )
    embed = ""
    if scripts and charts:
        calls = "\n".join(
            f"vegaEmbed('#{cid}', {_script_json(spec)}, {{actions: false}});"
            for cid, spec in charts
        )
        embed = f"{scripts}\n<script>\n{calls}\n</script>"
    return _PAGE.format(csp=REPORT_CSP, head=head, note=note, cards=cards, embed=embed)


def _summary_html(facts: dict[str, Any], flt: AuditFilter) -> str:
    scope = ", ".join(f"{k} {v}" for k, v in vars(flt).items() if v is not None) or "everything"
    views = ", ".join(f"{html.escape(v)} ({n})" for v, n in facts["views"].items()) or "none"
    statuses = ", ".join(f"{n} {html.escape(s)}" for s, n in facts["by_status"].items()) or "none"
    return (
        f"<p>Scope: {html.escape(scope)}. Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.</p>"
        f"<ul><li><b>{facts['questions']}</b> questions from <b>{facts['identities']}</b>"
        f" people or identities ({statuses})</li>"
        f"<li>Data used: {views}</li>"
        f"<li><b>{facts['rows_returned']:,}</b> rows returned in total</li>"
        f"<li>{facts['aborted']} stopped before the end, {facts['with_tool_errors']} with a"
        f" failed tool, {facts['fallback_answers']} without a final answer line</li></ul>"
    )


def _card(n: int, e: AuditEntry, charts: list[tuple[str, dict[str, Any]]], live: bool) -> str:
    who = e.external_id or e.internal_id or e.identity or "unknown"
    limits = [f"{k} = {v}" for k, v in e.user_attributes.items()]
    limits += [f"group {g}" for g in e.groups]
    if e.security_context:
        limits.append(f"security context {json.dumps(e.security_context)}")
    scope = "; ".join(limits) or "no row-level restrictions sent"
    when = f"{e.asked_at:%Y-%m-%d %H:%M:%S} UTC" if e.asked_at else "unknown time"
    problems = [f"{t['tool']} failed: {t['error']}" for t in e.tool_errors]
    problems += [f"stream error: {s}" for s in e.stream_errors]
    problems += ["the conversation was stopped (aborted)"] if e.aborted else []
    problems += [f"job error: {e.error}"] if e.error else []
    source = e.answer_source or "no"
    source = "" if source == "final" else f" <i>({html.escape(source)} answer)</i>"
    queries = "".join(_query(n, i, q, charts, live) for i, q in enumerate(e.queries, 1))
    trouble = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return (
        f"<section class=card><h3>{n}. {html.escape(e.question or '')}</h3>"
        f"<p class=who>Asked by <b>{html.escape(who)}</b> on {when} — seen data as:"
        f" {html.escape(scope)} · status {html.escape(e.status)}</p>"
        f"<div class=answer>{markdown_html(e.answer) or '(no answer)'}{source}</div>{queries}"
        + (f"<ul class=problems>{trouble}</ul>" if trouble else "")
        + _reviewed(e)
        + f"<p class=ids>job {html.escape(e.job_id)} · run {html.escape(e.run_id or '')}</p>"
        + "</section>"
    )


def _reviewed(e: AuditEntry) -> str:
    if e.verdict is None:
        return ""
    when = f" on {e.reviewed_at:%Y-%m-%d %H:%M:%S} UTC" if e.reviewed_at else ""
    verdict = html.escape(e.verdict.replace("_", " "))
    return (
        f"<p class=reviewed>Reviewed <b>{verdict}</b> by {html.escape(e.reviewer or '')}{when}</p>"
    )


def _query(
    n: int, i: int, q: dict[str, Any], charts: list[tuple[str, dict[str, Any]]], live: bool
) -> str:
    title = html.escape(q.get("title") or f"Query {i}")
    used = ", ".join(q.get("members") or ()) or ", ".join(q.get("views") or ()) or "unknown"
    found = q.get("rows")
    rows: list[Any] = found if isinstance(found, list) else []
    names = [c.get("name", "") for c in q.get("schema") or () if isinstance(c, dict)]
    types = {
        str(c.get("name", "")): str(c.get("column_type", ""))
        for c in q.get("schema") or ()
        if isinstance(c, dict)
    }
    spec = q.get("vega_spec")
    chart = ""
    if live and isinstance(spec, dict) and rows:
        cid = f"chart-{n}-{i}"
        table_rows = [list(r.values()) for r in _records(rows, names)]
        drawn = chart_spec(spec, q.get("schema") or [], table_rows)
        charts.append((cid, drawn or {}))
        chart = f"<div id={cid} class=chart></div>"
    total = q.get("total_rows")
    total = total if isinstance(total, int) else 0
    return (
        f"<div class=query><p><b>{title}</b>: used {html.escape(used)};"
        f" {total:,} row{'' if total == 1 else 's'}.</p>{chart}{_table(rows, names, types)}"
        f"<details><summary>SQL</summary><pre>{html.escape(q.get('sql') or '')}</pre>"
        "</details></div>"
    )


def _cell(value: Any, name: str, types: dict[str, str] | None) -> str:
    return format_cell(value, name=name, column_type=(types or {}).get(name) or None)


def _records(rows: list[Any], names: list[str]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if isinstance(row, dict):
            out.append(row)
        elif isinstance(row, list):
            out.append({names[k] if k < len(names) else f"c{k}": v for k, v in enumerate(row)})
    return out


def _table(rows: list[Any], names: list[str], types: dict[str, str] | None = None) -> str:
    records = _records(rows[:TABLE_ROWS], names)
    if not records:
        return ""
    cols = list(dict.fromkeys(k for r in records for k in r))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell(r.get(c), c, types))}</td>" for c in cols)
        + "</tr>"
        for r in records
    )
    more = f"<caption>first {TABLE_ROWS} of {len(rows)}</caption>" if len(rows) > TABLE_ROWS else ""
    return f"<table>{more}<tr>{head}</tr>{body}</table>"


_PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>chatscribe audit report</title>
<meta http-equiv="Content-Security-Policy" content="{csp}">
<style>
body{{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}}
.card{{border:1px solid #ddd;border-radius:6px;padding:0.6em 1em;margin:1em 0}}
.who,.ids{{color:#555;font-size:90%}} .problems{{color:#a00}}
.answer{{font-size:105%}} .chart{{display:block;margin:0.4em 0}}
table{{border-collapse:collapse;font-size:85%;margin:0.4em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px}} .note{{background:#ffe;padding:0.5em}}
</style></head><body>
<h1>Audit report: questions asked of the analytics agent</h1>
{head}{note}
{cards}
{embed}
</body></html>
"""


def _script_json(value: Any) -> str:
    """Returns: ``value`` as JSON safe inside ``<script>`` (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
