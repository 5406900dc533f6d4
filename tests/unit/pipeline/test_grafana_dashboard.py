"""ops/grafana/pipeline.json: valid JSON whose every expression names a metric we export."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

import pipeline.metrics
import pipeline.sink.metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "ops" / "grafana" / "pipeline.json"
METRIC_NAME = re.compile(r"\bchatscribe_[a-z0-9_]+\b")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
    "summary": ("", "_count", "_sum", "_created"),
}
# The quantities issue 4 ("Operators") asks the dashboard to chart.
REQUIRED = {
    "chatscribe_worker_jobs_in_flight",
    "chatscribe_worker_jobs_total",
    "chatscribe_worker_lines_total",
    "chatscribe_worker_first_line_seconds_bucket",
    "chatscribe_worker_final_answer_seconds_bucket",
    "chatscribe_worker_stream_retries_total",
    "chatscribe_worker_dead_letters_total",
    "chatscribe_worker_consumer_lag_records",
    "chatscribe_sink_lines_total",
    "chatscribe_sink_batch_records_bucket",
    "chatscribe_sink_write_seconds_bucket",
    "chatscribe_sink_write_retries_total",
    "chatscribe_sink_dead_letters_total",
    "chatscribe_sink_consumer_lag_records",
}


def _exported() -> set[str]:
    """Returns: every sample name the worker and sink registries can expose."""
    assert pipeline.metrics.JOBS and pipeline.sink.metrics.LINES  # registered on import
    names: set[str] = set()
    for family in REGISTRY.collect():
        if family.name.startswith("chatscribe_"):
            names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
    return names


def _targets(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for panel in dashboard["panels"] for t in panel.get("targets", [])]


def test_dashboard_is_valid_json_with_unique_panel_ids_and_a_prometheus_datasource() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert all(t["datasource"]["uid"] == "${datasource}" for t in _targets(dashboard))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24


def test_every_expression_names_only_metrics_our_registries_export() -> None:
    exported = _exported()
    used: set[str] = set()
    for target in _targets(json.loads(DASHBOARD.read_text())):
        names = set(METRIC_NAME.findall(target["expr"]))
        assert names, f"expression names no chatscribe metric: {target['expr']}"
        unknown = names - exported
        assert not unknown, f"{target['expr']} names metrics nobody exports: {unknown}"
        assert target["expr"].count("(") == target["expr"].count(")")
        used |= names
    assert used >= REQUIRED, f"not charted: {REQUIRED - used}"
