"""The two-minute seeded chaos soak (``python -m bench.chaos --minutes 2 --seed 1``).

Marked ``chaos``: run by ``make chaos``, not ``make test`` (it starts a three-node cluster and a
PostgreSQL of its own, and drains for minutes on a loaded machine). The soak's own checks are
the assertions (:mod:`bench.chaos_checks`): it exits 0 only when no job is lost, no line is
stored twice, every chain verifies, every dead letter is an injected poison record and both
consumer groups end without lag; its last line is the issue's ``chaos:`` line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.chaos import main

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.chaos]

LAST_LINE = re.compile(
    r"chaos: submitted=(\d+) completed=\d+ agent_failed=\d+ lost=0 duplicate_lines=0 "
    r"unverified_chains=0 stray_dead_letters=0 final_lag=0 longest_idle_wait_s=[\d.]+ "
    r"faults=(\d+)"
)


@pytest.mark.timeout(1800)
def test_chaos_soak_of_two_minutes_keeps_every_invariant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--minutes", "2", "--seed", "1", "--logs", str(tmp_path / "logs")])
    out = capsys.readouterr().out
    print(out)
    found = LAST_LINE.fullmatch(out.strip().splitlines()[-1])
    assert found is not None, out
    assert int(found[1]) > 0 and int(found[2]) > 0
    assert code == 0, out
