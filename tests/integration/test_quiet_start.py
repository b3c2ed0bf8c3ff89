"""What a user sees on a terminal when `grove run` starts Ray of its own: the reply and nothing
else (Ray's start-up notices stay off the terminal)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.groves import cli_environment

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_grove_run_on_a_terminal_prints_only_the_reply(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "grove.cli.entry", "run", "--simulate", "--model", "gpt-6.1-terra",
         '[[sim reply="A quiet start"]] hi'],
        stdin=follower, stdout=follower, stderr=follower, env=cli_environment(tmp_path),
    )  # fmt: skip
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert process.wait(180) == 0
    text = ANSI.sub("", seen.decode(errors="replace")).replace("\r", "")
    assert [line for line in text.splitlines() if line.strip()] == ["A quiet start"], text
