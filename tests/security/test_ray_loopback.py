"""The Ray that Grove starts listens on loopback only, with a private token: while `grove run`
runs, no process it started has a socket bound to another address, and Ray's token file is
0600 in a 0700 directory.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.commands import Place

SOCKET_TABLES = ("tcp", "tcp6", "udp", "udp6")
TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"
SLOW_REPLY = "[[sim ttft_ms=5000 reply=done]] take your time"


def children_of() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        found.setdefault(int(fields[1]), []).append(int(entry.name))
    return found


def process_tree(root: int) -> list[int]:
    children = children_of()
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass
    return inodes


def decode_address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])
    # /proc shows IPv6 addresses as four host-order 32-bit words.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return ipaddress.IPv6Address(words)


def listening(pid: int) -> list[tuple[str, str, int]]:
    """(table, address, port) of every listening TCP or bound UDP socket `pid` holds."""
    inodes = socket_inodes(pid)
    found = []
    for table in SOCKET_TABLES:
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            wanted = TCP_LISTEN if table.startswith("tcp") else UDP_UNCONNECTED
            if state == wanted and inode in inodes:
                address, _, port = local.partition(":")
                found.append((table, str(decode_address(address)), int(port, 16)))
    return found


def is_loopback(text: str) -> bool:
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def test_decoding_proc_addresses() -> None:
    assert str(decode_address("0100007F")) == "127.0.0.1"
    assert str(decode_address("00000000")) == "0.0.0.0"
    assert is_loopback(str(decode_address("0000000000000000FFFF00000100007F")))
    assert not is_loopback(str(decode_address("00000000000000000000000000000000")))


@pytest.fixture
def home(place: Place) -> Path:
    home = place.base / "home"
    home.mkdir()
    return home


def test_every_socket_of_a_grove_run_is_on_loopback_and_the_token_is_private(
    place: Place, home: Path
) -> None:
    command = [sys.executable, "-m", "grove.cli.app", "run", "--simulate", "--model", "gpt-5-mini"]
    env = {**place.env, "HOME": str(home)}
    with subprocess.Popen(
        [*command, SLOW_REPLY],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        seen: dict[tuple[str, str, int], str] = {}
        names: set[str] = set()
        deadline = time.monotonic() + 60
        # Sample while the slow reply is on its way: Ray, the supervisor and a host are up.
        while running.poll() is None and time.monotonic() < deadline:
            for pid in process_tree(running.pid):
                try:
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                for socket in listening(pid):
                    seen[socket] = name
                    names.add(name)
            time.sleep(0.5)
        stdout, stderr = running.communicate(timeout=120)
    assert running.returncode == 0, stderr
    assert "done" in stdout
    assert {"gcs_server", "raylet"} <= names, names  # the sampling saw Ray's own services
    exposed = {socket: name for socket, name in seen.items() if not is_loopback(socket[1])}
    assert exposed == {}
    token = home / ".ray" / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600
    assert token.parent.stat().st_mode & 0o777 == 0o700
    assert "Token authentication is enabled" not in stderr


def test_an_existing_token_file_others_can_read_is_made_private(place: Place, home: Path) -> None:
    token = home / ".ray" / "auth_token"
    token.parent.mkdir(mode=0o755)
    token.write_text("a" * 64)
    token.chmod(0o644)
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "run", "--simulate", "--model", "gpt-5-mini", "hi"],
        env={**place.env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert token.read_text() == "a" * 64
    assert token.stat().st_mode & 0o777 == 0o600
    assert token.parent.stat().st_mode & 0o777 == 0o700
