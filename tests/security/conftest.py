"""Fixtures for the security checks: the integration tests' module Grove, store and store URL.

Each module of tests/security reproduces one finding of the audit and fails if it comes back.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import grove, pytest_configure, store, store_url
from tests.security.commands import Place, make_place

__all__ = ["grove", "place", "pytest_configure", "store", "store_url"]


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    """A place of its own for running `grove` commands (tests/security/commands.py)."""
    yield from make_place(tmp_path)
