"""Running the `grove` command line as a user would, in a place of its own: a temp store and
config, no keys or Grove settings from the environment, and a Ray temp dir to tell whether
the command started Ray.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.integration.groves import cli_environment

COMMAND_TIMEOUT_S = 240
# Runs the command given as its arguments and prints the largest resident set size any of its
# own children reached (it has only that one), in KiB, as its last stderr line.
PEAK_RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@dataclass(frozen=True)
class Place:
    base: Path
    env: dict[str, str]
    ray_temp: Path  # Ray's temp dir for the commands: empty unless one started Ray

    def ray_started(self) -> bool:
        return any(self.ray_temp.iterdir())

    def grove(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "grove.cli.app", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        return done

    def measured(
        self, *args: str, stdin: Path | None = None
    ) -> tuple[subprocess.CompletedProcess[str], float]:
        """Run `grove ARGS` (stdin from a file) and return it with its peak RSS in MB."""
        with (stdin or Path(os.devnull)).open("rb") as source:
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    PEAK_RSS_WRAPPER,
                    sys.executable,
                    "-m",
                    "grove.cli.app",
                    *args,
                ],
                stdin=source,
                capture_output=True,
                env=self.env,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        stderr = done.stderr.decode("utf-8", errors="replace")
        rest, _, peak_kib = stderr.rstrip("\n").rpartition("\n")
        result = subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode("utf-8", errors="replace"), rest
        )
        assert "Traceback" not in result.stdout + result.stderr, result.stderr
        return result, int(peak_kib) / 1024


def make_place(tmp_path: Path) -> Iterator[Place]:
    env = {
        key: value
        for key, value in cli_environment(tmp_path).items()
        if not key.endswith("_BASE_URL")
    }
    # Short: Ray's socket paths under it must fit in AF_UNIX's 107 bytes.
    ray_temp = Path(tempfile.mkdtemp(prefix="grove-ray-"))
    yield Place(tmp_path, {**env, "RAY_TMPDIR": str(ray_temp)}, ray_temp)
    shutil.rmtree(ray_temp, ignore_errors=True)
