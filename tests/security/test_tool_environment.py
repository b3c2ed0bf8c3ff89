"""What a tool's process sees of Grove's own secrets, and Ray's token file: with the store on a
Redis that needs a password (`GROVE_STORE=redis://:PASSWORD@...`), neither bash nor an MCP
server gets that URL, and bash gets no variable `[tools.sandbox] env` does not name (a
`GITHUB_PAT`); `RAY_AUTH_TOKEN_PATH` in a directory that does not exist yet is made
(0700, the file 0600), and one that cannot be made is one clear line, not a traceback.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import redis_server
from tests.security.commands import Place, make_place

PASSWORD = f"store-pw-{secrets.token_hex(8)}"
GITHUB_PAT = "ghp_" + secrets.token_hex(18)  # a token in a variable of a name Grove never heard of
CALC = Path(__file__).resolve().parents[1] / "mcp_servers" / "calc.py"


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis_server(
        tmp_path_factory.mktemp("locked-redis"),
        lambda port: ["--port", str(port), "--requirepass", PASSWORD],
        lambda port: redis.Redis(host="127.0.0.1", port=port, password=PASSWORD),
    ) as port:
        yield port


@dataclass(frozen=True)
class Looked:
    """One `grove run` (it starts Ray) serves the two tests below: its bash and an MCP server
    look for the store's URL, and Ray's token file is to be made in a missing directory."""

    done: subprocess.CompletedProcess[str]
    token: Path


@pytest.fixture(scope="module")
def looked(tmp_path_factory: pytest.TempPathFactory, locked_redis: int) -> Iterator[Looked]:
    for place in make_place(tmp_path_factory.mktemp("looked")):
        store = f"redis://:{PASSWORD}@127.0.0.1:{locked_redis}/0?namespace=tools"
        Path(place.env["GROVE_CONFIG_FILE"]).write_text(
            f"[mcp.servers.calc]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(CALC))}]\n"
            '[tools.sandbox]\nenv = ["PROJECT_FLAG"]\n'
        )
        calls = [
            {"name": "bash", "args": {"command": "env; echo env listed"}},
            {"name": "mcp__calc__has_variable", "args": {"name": "GROVE_STORE"}},
        ]
        prompt = f"[[sim calls='{json.dumps(calls)}' step=1]] look"
        token = place.base / "made" / "for" / "ray" / "token"
        done = place.grove(
            "run", "--simulate", "--model", "gpt-6.1-terra", "--json", "--tools", "bash",
            "--allow", "bash", prompt, GROVE_STORE=store, RAY_AUTH_TOKEN_PATH=str(token),
            GITHUB_PAT=GITHUB_PAT, PROJECT_FLAG="named",
        )  # fmt: skip
        yield Looked(done, token)


def test_a_store_password_reaches_no_tool(looked: Looked) -> None:
    done = looked.done
    assert done.returncode == 0, done.stderr
    results = {r["name"]: r["content"] for r in json.loads(done.stdout)["tool_results"]}
    assert results["bash"].startswith("exit code 0\n") and "env listed" in results["bash"]
    assert "PATH=" in results["bash"]  # the environment was listed, without the store's URL
    assert PASSWORD not in results["bash"] and "GROVE_STORE" not in results["bash"]
    assert GITHUB_PAT not in results["bash"] and "GITHUB_PAT" not in results["bash"]
    assert "PROJECT_FLAG=named" in results["bash"]  # named in [tools.sandbox] env
    assert results["mcp__calc__has_variable"] == "no"
    assert PASSWORD not in done.stdout + done.stderr


def test_a_token_path_in_a_missing_directory_is_made_private(looked: Looked) -> None:
    token = looked.token
    assert looked.done.returncode == 0, looked.done.stderr
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text()) == 64
    assert token.parent.stat().st_mode & 0o777 == 0o700


def test_a_token_path_that_cannot_be_made_is_one_line(place: Place) -> None:
    blocker = place.base / "a-file"
    blocker.write_text("")
    token = blocker / "token"
    done = place.grove(
        "run", "--simulate", "--model", "gpt-6.1-terra", "hi", RAY_AUTH_TOKEN_PATH=str(token)
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"cannot make Ray's token file (RAY_AUTH_TOKEN_PATH={token}): {blocker} is a file\n"
    )
