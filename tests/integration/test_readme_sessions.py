"""The README's "Long sessions" walkthrough, run as written: a script piped into `grove chat`
whose lines run in order (each prompt's turn ends before the next line), so `/compact` after
two prompts compacts instead of meeting a reply still streaming.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conformance.corpus import REPO_ROOT
from tests.integration.groves import cli_environment

TIMEOUT_S = 240
COMPACTED = re.compile(r"^Compacted (\d+) messages: context ([\d,]+) -> ([\d,]+) tokens", re.M)


def sessions_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text.split("## Long sessions\n", 1)[1].split("\n## ", 1)[0]


def test_the_compaction_walkthrough_runs_as_a_piped_script(tmp_path: Path) -> None:
    (script,) = re.findall(r"```bash\n(.+?)\n```", sessions_section(), re.DOTALL)
    assert "| " in script and "grove chat" in script  # a script piped into the chat
    env = cli_environment(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "streaming" not in done.stdout  # no line met a turn still under way
    (compacted,) = COMPACTED.findall(done.stdout)
    summarised, before, after = (int(number.replace(",", "")) for number in compacted)
    assert summarised >= 2 and after < before
    # /context before and after: the history it reports shrank with the compaction.
    shown = re.findall(r"^  history +([\d,]+)$", done.stdout, re.MULTILINE)
    histories = [int(number.replace(",", "")) for number in shown]
    assert len(histories) == 2 and histories[1] < histories[0], done.stdout[-3000:]
    # The last prompt was answered after all that: its reply ends the output.
    after_context = done.stdout.rsplit("  tool results", 1)[1]
    assert after_context.split("\n", 1)[1].strip()
