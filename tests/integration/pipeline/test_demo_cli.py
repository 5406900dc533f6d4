"""``chatscribe demo`` end to end as a person runs it.

It ends by printing the command that opens the console on the run it just made.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from pipeline.archive.engine import create_engine
from tests.stack_support import chat_url, free_port, isolated_settings, stack_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_demo_ends_with_the_console_command_for_its_run(
    kafka_bootstrap: str, database_url: str, tmp_path: Path
) -> None:
    questions = tmp_path / "one.yaml"
    persona = {"name": "analyst", "sessionSettings": {"externalId": "analyst-1"}}
    questions.write_text(
        yaml.safe_dump(
            {
                "name": "one",
                "personas": [persona],
                "questions": [{"text": "How many airports are there?"}],
            }
        )
    )
    with isolated_settings(kafka_bootstrap, database_url, tag="demo") as settings:
        env = stack_env(settings, CHATSCRIBE_CHAT_URL=chat_url(free_port()))
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.cli.app", "demo", str(questions)],
            env=env,
            cwd=tmp_path,  # the demo's logs go under .state/demo of the working directory
            capture_output=True,
            timeout=240,
            check=False,
        )
        output = done.stdout.decode() + done.stderr.decode()
        assert done.returncode == 0, output[-3000:]
        found = re.search(
            r"chatscribe console.*\n?.*http://127\.0\.0\.1:8500/runs/([0-9a-f-]{36})", output
        )
        assert found is not None, output[-3000:]
        engine = create_engine(settings)
        with engine.connect() as conn:
            runs = conn.execute(
                sa.text(f'SELECT run_id FROM "{settings.database_schema}".runs')
            ).all()
        engine.dispose()
        assert [r.run_id for r in runs] == [found.group(1)]
