"""Fixtures for the modules that share one Grove: its SQLite store's URL, the Grove, the store.

A module sets its Grove's hosts and `GROVE_*` settings with `pytest.mark.grove(hosts=…, env=…)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grove.supervisor import Grove
from grove.supervisor.store import Store, open_store
from tests.integration.groves import running_grove


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "grove(hosts, env): the keyword arguments of the module's running_grove"
    )


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'grove.sqlite3'}"


@pytest.fixture(scope="module")
def grove(
    request: pytest.FixtureRequest, store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Grove]:
    """The module's Grove on `store_url`, set up as its `grove` mark says (defaults without)."""
    mark = request.node.get_closest_marker("grove")
    options = mark.kwargs if mark else {}
    with running_grove(tmp_path_factory.mktemp("grove"), store_url=store_url, **options) as grove:
        yield grove


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """The module's store, opened for one test and closed after it."""
    opened = open_store(store_url)
    yield opened
    opened.close()
