"""Tests of providers/private_files.py on real files: credentials.json and the service's token,
left readable by others, are made 0600 with one warning, the same way; a file Grove cannot
change is read with a warning that says how to fix it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from grove.providers.credentials import load_api_key, warn_if_credentials_exposed
from grove.server.files import TOKEN_FILE, service_token
from tests.conftest import required_binary

REPO_ROOT = Path(__file__).resolve().parents[2]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def made_private(path: Path, mode: int) -> str:
    return f"Warning: {path} could be read by other users (mode {mode:o}); it is now 0600"


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


def token_file(directory: Path, mode: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TOKEN_FILE
    path.write_text("the-token\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620, 0o601], ids=oct)
def test_a_token_others_can_reach_is_made_0600_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    path = token_file(tmp_path / "grove", mode)
    with caplog.at_level(logging.WARNING):
        assert service_token(tmp_path / "grove") == "the-token"
        assert mode_of(path) == 0o600
        assert warnings(caplog) == [made_private(path, mode)]
        caplog.clear()
        assert service_token(tmp_path / "grove") == "the-token"  # kept private: said once
    assert warnings(caplog) == []


def test_a_new_token_and_a_private_one_say_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        made = service_token(tmp_path / "grove")
        assert service_token(tmp_path / "grove") == made
    assert mode_of(tmp_path / "grove" / TOKEN_FILE) == 0o600
    assert caplog.records == []


def test_credentials_others_can_read_are_made_0600_as_the_token_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "grove" / "credentials.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"anthropic": {"api_key": "k"}}))
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    for read in ("the command line's check", "a host's reading"):
        path.chmod(0o644)
        with caplog.at_level(logging.WARNING):
            if read == "a host's reading":
                assert load_api_key("anthropic", environ=environ) == "k"
            else:
                warn_if_credentials_exposed(environ)
        assert mode_of(path) == 0o600
        assert warnings(caplog) == [made_private(path, 0o644)]
        caplog.clear()


def test_no_credentials_file_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        warn_if_credentials_exposed({"XDG_CONFIG_HOME": str(tmp_path)})
    assert caplog.records == [] and not (tmp_path / "grove").exists()


def test_a_file_grove_cannot_change_is_used_with_how_to_fix_it(tmp_path: Path) -> None:
    """On a read-only mount (as another user's file would be) the chmod fails: the token is
    still read, and the warning says what to run."""
    bwrap = required_binary("bwrap")
    path = token_file(tmp_path / "grove", 0o644)
    code = (
        "import logging, sys, pathlib\n"
        "from grove.server.files import service_token\n"
        "logging.basicConfig(format='%(message)s')\n"
        "print(service_token(pathlib.Path(sys.argv[1])))\n"
    )
    done = subprocess.run(
        [bwrap, "--bind", "/", "/", "--ro-bind", str(tmp_path), str(tmp_path), "--dev", "/dev",
         "--proc", "/proc", sys.executable, "-c", code, str(path.parent)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "the-token\n"), done.stderr
    assert done.stderr == (
        f"Warning: {path} can be read by other users (mode 644) and Grove cannot change that "
        f"(Read-only file system); run: chmod 600 {path}\n"
    )
    assert mode_of(path) == 0o644
