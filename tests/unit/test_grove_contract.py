"""The Grove interface (supervisor/contract.py) holds for every implementation: mypy, run here on
tests/unit/grove_conformance.py, finds each of them conforming, and finds a drifted one out.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(__file__).with_name("grove_conformance.py")

# A Grove whose `seed` drifted from the contract, as the service's client once had it.
DRIFTED = """
from grove.server.client import RemoteGrove
from grove.supervisor.contract import GroveAPI


class Drifted(RemoteGrove):
    def seed(self, agent: str, entries: list[tuple[str, str]]) -> None:  # type: ignore[override]
        return None


def drifted(grove: Drifted) -> GroveAPI:
    return grove
"""


def mypy(*arguments: str) -> subprocess.CompletedProcess[str]:
    """The project's mypy (its configuration from pyproject.toml) on `arguments` alone."""
    command = [sys.executable, "-m", "mypy", *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_every_implementation_conforms() -> None:
    checked = mypy(str(CONFORMANCE))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_drifted_implementation_is_found_out(tmp_path: Path) -> None:
    drifted = tmp_path / f"drifted_{uuid.uuid4().hex}.py"  # a module mypy has not seen
    drifted.write_text(DRIFTED)
    checked = mypy(str(drifted))
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "GroveAPI" in errors[0], checked.stdout + checked.stderr
    assert "def seed(" in checked.stdout and "-> None" in checked.stdout, checked.stdout
