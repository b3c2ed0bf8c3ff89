"""Shared pytest fixtures: a real redis-server on a free loopback port, a temp-file SQLite store,
the one Ray of this test process (tests/integration/shared_ray.py); and the order modules run in
(the longest first).

Whatever a fixture starts it stops through its own handle; the machine's own Redis (6379) is
never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from hypothesis import settings

from grove.cli.context import NO_SERVICE_ENV
from grove.providers.catalog import CATALOG
from grove.providers.lifecycle import TODAY_ENV
from grove.supervisor.store import SqliteStore
from tests.integration.shared_ray import SHARED_RAY

# Lifecycle verdicts (retired, deprecated, shutting down soon) are made for the catalog's own
# date in every test process and what it starts (Ray's workers, the command line), so a model
# the data file calls deprecated does not turn retired under the suite as days pass.
os.environ.setdefault(TODAY_ENV, CATALOG.as_of.isoformat())

# Commands run in their own process, never starting a Grove service in the background
# (cli/autostart.py) that would outlive their test: also in what this process starts, and in
# tests/integration/groves.py's cli_environment. The tests of autostart itself take it away.
os.environ.setdefault(NO_SERVICE_ENV, "1")

# A suite started in the background by a shell without job control (`nohup ... &`) inherits
# SIGINT ignored, and so would every process it starts: the tests that stop a command or the
# simulator with Ctrl-C would wait for it forever. A handler here is reset to the default in
# whatever this process starts, so each of them gets Python's own KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No per-example deadline: timing belongs in bench/, and a shared machine makes the first
# examples (cold imports, busy cores) slow without anything being wrong.
settings.register_profile("grove", deadline=None)
settings.load_profile("grove")

# The modules that take longest, longest first; then the rest of integration/ and security/
# (they start Ray), then the others. The workers of pyproject's addopts each take a whole
# module at a time, in this order, so no long module starts when the others are done.
LONGEST_FIRST = (
    "tests/integration/test_local_cluster_script.py",
    "tests/integration/test_readme_tools.py",
    "tests/integration/test_service.py",
    "tests/security/test_terminal_escapes.py",
    "tests/integration/test_service_resume.py",
    "tests/security/test_secret_masking.py",
    "tests/integration/test_security.py",
    "tests/integration/test_preflight.py",
    "tests/integration/test_one_path.py",
    "tests/integration/test_supervision.py",
    "tests/security/test_service_abuse.py",
    "tests/security/test_mcp_scope.py",
    "tests/security/test_mcp_limits.py",
)
STARTING_RAY = ("tests/integration/", "tests/security/")

REDIS_START_TIMEOUT_S = 10.0
REDIS_STOP_TIMEOUT_S = 5.0
REDIS_START_ATTEMPTS = 3


def _running_order(item: pytest.Item) -> tuple[int, int]:
    module = item.nodeid.split("::", 1)[0]
    if module in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(module)
    return (1 if module.startswith(STARTING_RAY) else 2), 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "own_ray: the module needs Ray of its own or none in this process (the shared one stops)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest modules first (a stable sort: each module's tests stay together, in order)."""
    items.sort(key=_running_order)


@pytest.fixture(scope="session", autouse=True)
def shared_ray() -> Iterator[None]:
    """The Ray this process's Groves share, started by the first (`running_grove`) and stopped
    through its own handle when the session ends."""
    yield
    SHARED_RAY.stop()


@pytest.fixture(scope="module", autouse=True)
def ray_where_wanted(request: pytest.FixtureRequest) -> None:
    """Before a module marked `own_ray`, and before the modules that start no Ray (they run
    after those that do), the shared Ray stops: the first Grove after them starts it again."""
    if request.node.get_closest_marker("own_ray") or not request.node.nodeid.startswith(
        STARTING_RAY
    ):
        SHARED_RAY.stop()


def required_binary(name: str) -> str:
    """The path of the command `name`; when it is not on PATH the test skips, except under
    CI=true where it fails (.ci/run installs what the suite starts), so no check goes missing
    there unseen."""
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is not on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def path_without(base: Path, name: str) -> str:
    """A PATH with every command of this one but `name`: a directory in `base` of links to
    them (the first of each name, as PATH finds it)."""
    directory = base / f"path-without-{name}"
    directory.mkdir()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for command in os.listdir(entry):
            link = directory / command
            if command != name and not os.path.lexists(link):
                link.symlink_to(os.path.join(entry, command))
    return str(directory)


def bwrap_without(base: Path, option: str) -> str:
    """A PATH whose `bwrap` lacks `option`, as a bubblewrap built or wrapped without it: its
    --help does not list it, and it refuses it as bubblewrap refuses an option it does not know;
    all else goes to the real bwrap."""
    real = shutil.which("bwrap")
    assert real is not None
    shim = base / f"bwrap-without{option}" / "bwrap"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --help ] && {{ {real} --help | grep -v -- "{option} "; exit 0; }}\n'
        f'for word in "$@"; do [ "$word" = {option} ] && '
        f'{{ echo "bwrap: Unknown option {option}" >&2; exit 1; }}; done\n'
        f'exec {real} "$@"\n'
    )
    shim.chmod(0o755)
    return f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def bwrap_version() -> str:
    """What the `bwrap` on PATH says of its version: `bubblewrap 0.8.0`."""
    done = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _answers_ping(process: subprocess.Popen[bytes], client: redis.Redis) -> bool:
    """Wait until `client` gets an answer to PING; False when the server exited or never did."""
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if client.ping():
                    return True
            except redis.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=REDIS_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(
    workdir: Path,
    options: Callable[[int], list[str]],
    client: Callable[[int], redis.Redis],
) -> Iterator[int]:
    """A private redis-server in `workdir` on a free loopback port, started with
    `options(port)` and ready once `client(port)` gets an answer; yields the port and stops
    the server through its handle. Fails (never skips) under CI=true without redis-server."""
    executable = required_binary("redis-server")
    log_path = workdir / "redis.log"
    common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
    for _ in range(REDIS_START_ATTEMPTS):
        port = free_loopback_port()
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [executable, *options(port), *common], stdout=log, stderr=subprocess.STDOUT
            )
        if _answers_ping(process, client(port)):
            break
        stop_process(process)  # most likely lost the port to another process: try another one
    else:
        pytest.fail(f"redis-server did not start:\n{log_path.read_text(errors='replace')[-2000:]}")
    try:
        yield port
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for this test session: redis://127.0.0.1:PORT/0."""
    with redis_server(
        tmp_path_factory.mktemp("redis"),
        lambda port: ["--port", str(port)],
        lambda port: redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0),
    ) as port:
        yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "grove.sqlite3"


@pytest.fixture
def sqlite_store(sqlite_path: Path) -> Iterator[SqliteStore]:
    """A fresh SQLite store on a temp file, closed after the test."""
    store = SqliteStore(sqlite_path)
    try:
        yield store
    finally:
        store.close()
