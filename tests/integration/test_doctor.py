"""`grove doctor`: each check on its own line with what to fix; a clean setup passes, a
credentials file others can read and a store that cannot be reached fail, with the fix, and
a machine without bubblewrap is told how to get it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import free_loopback_port, path_without
from tests.integration.groves import cli_environment


def doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grove.cli.entry", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


def test_a_clean_setup_passes_every_check(tmp_path: Path) -> None:
    done = doctor(cli_environment(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {
        line.split()[1]: line.split()[0]
        for line in done.stdout.splitlines()
        if not line.startswith(" ")
    }
    assert set(verdicts) == {
        "versions",
        "config",
        "store",
        "credentials",
        "ray",
        "sandbox",
        "git",
        "simulator",
        "service",
    }
    assert verdicts["credentials"] == "warn"  # no provider key: only --simulate works
    checks = ("store", "ray", "sandbox", "git", "simulator", "service")
    assert all(verdicts[check] == "ok" for check in checks)


def test_what_is_wrong_is_named_with_its_fix(tmp_path: Path) -> None:
    env = cli_environment(tmp_path)
    credentials = Path(env["XDG_CONFIG_HOME"]) / "grove" / "credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(json.dumps({"anthropic": {"api_key": "sk-doctor-test"}}))
    credentials.chmod(0o644)
    env["GROVE_STORE"] = f"redis://127.0.0.1:{free_loopback_port()}/0"  # nothing listens
    env["PATH"] = path_without(tmp_path, "bwrap")
    done = doctor(env)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    failed = {
        line.split()[1]: lines[index + 1].strip()
        for index, line in enumerate(lines)
        if line.startswith("FAIL")
    }
    assert failed["credentials"] == f"fix: chmod 600 {credentials}"
    assert failed["store"].startswith("fix: start that Redis, or set GROVE_STORE")
    assert "sk-doctor-test" not in done.stdout + done.stderr
    (sandbox,) = [index for index, line in enumerate(lines) if line.split()[1:2] == ["sandbox"]]
    assert lines[sandbox].startswith("warn  sandbox     bash cannot run: Tools run commands in")
    assert lines[sandbox + 1].strip().startswith("fix: Install bubblewrap (Debian, Ubuntu:")
    (git,) = [index for index, line in enumerate(lines) if line.split()[1:2] == ["git"]]
    assert lines[git : git + 2] == [
        "warn  git sandbox Grove's git runs unsandboxed (its fixed configuration and refusals "
        "hold): `bwrap` is not on PATH",
        f"{'':<17} fix: Install bubblewrap 0.2 or newer, first on PATH (Debian, Ubuntu: sudo apt "
        "install bubblewrap)",
    ]
