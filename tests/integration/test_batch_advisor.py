"""`grove batch --advisor` as a real subprocess: every task gets its own reviewer, and the
advice each task received is in its output record (none where the reviewer had none).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_batch_cli import make_workspace, write_tasks


def advise(note: str, severity: str) -> str:
    args = json.dumps({"note": note, "severity": severity})
    return f"[[sim@reviewer tool=advise args='{args}']]"


def test_each_task_records_the_advice_it_received(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    write_tasks(
        work.tasks,
        [
            {"id": "nitpicked", "prompt": advise("name the constant", "nit") + " task one"},
            {"id": "worried", "prompt": advise("this drops errors", "concern") + " task two"},
            {"id": "quiet", "prompt": "task three"},
        ],
    )
    run = work.batch(
        str(work.tasks), "--model", "gpt-5-mini", "--advisor", "claude-haiku-4-5", "--simulate"
    )
    assert run.returncode == 0, run.stderr
    advice = {record["id"]: record["advice"] for record in work.records()}
    assert advice == {
        "nitpicked": [{"reviewer": "advisor", "severity": "nit", "note": "name the constant"}],
        "worried": [{"reviewer": "advisor", "severity": "concern", "note": "this drops errors"}],
        "quiet": [],
    }
