"""``chatscribe eval``: the agent's evaluation from the command line (issue 11, point 9)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pipeline.cli.app import app


def test_eval_prints_the_table_for_one_category() -> None:
    result = CliRunner().invoke(app, ["eval", "--category", "refusal", "--no-failures"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["category", "correct", "total", "accuracy"]
    assert lines[1].split()[0] == "refusal"
    assert "invented numbers: 0" in result.output


def test_eval_json_has_categories_total_and_counts() -> None:
    result = CliRunner().invoke(app, ["eval", "--category", "refusal", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert set(document["categories"]) == {"refusal"}
    correct, total, _ = document["total"]
    assert total >= 18 and correct <= total
    assert document["invented_numbers"] == 0 and document["rows_across_rls"] == 0
