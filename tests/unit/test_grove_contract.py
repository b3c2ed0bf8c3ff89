"""The Grove interface (supervisor/contract.py) holds for every implementation: mypy, run here on
tests/unit/grove_conformance.py, finds each of them conforming, and finds a drifted one out.
"""

from __future__ import annotations

import subprocess
import sys
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


def mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    """The project's mypy (its configuration from pyproject.toml) on `files` alone."""
    command = [sys.executable, "-m", "mypy", *map(str, files)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_every_implementation_conforms_and_a_drifted_one_is_found_out(tmp_path: Path) -> None:
    drifted = tmp_path / "drifted_grove.py"
    drifted.write_text(DRIFTED)
    checked = mypy(CONFORMANCE, drifted)
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert errors, checked.stdout + checked.stderr
    assert all(line.startswith(str(drifted)) for line in errors), checked.stdout
    assert "GroveAPI" in errors[0] and "seed" in checked.stdout, checked.stdout
