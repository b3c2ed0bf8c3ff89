"""`grove mcp` reaches only what it was given (finding 2 of the third audit): an MCP client
driving it with the official SDK's stdio client sees, forks and waits for only the agents of
the sessions it made or was granted (`--session`), forks never with approvals beyond the
server's own (`--allow`, `[tools.policy]`), and a tool that would ask comes back refused, saying
how to allow it; on a Grove of its own and on a running service alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from grove.supervisor.tool_rules import refusal_text
from tests.integration.groves import cli_environment, running_grove, sim_call
from tests.integration.services import service_in_process

GROVE = str(Path(sys.executable).with_name("grove"))
MODEL = "claude-sonnet-5-5"
CONFIG = f"""
[defaults]
model = "{MODEL}"
[tools]
default = ["fork", "send", "wait", "todo", "bash"]
"""
# Two sessions a user ran with `--allow bash`, in the store `grove mcp` uses.
USER_SESSIONS = f"""
from grove.supervisor import Grove
with Grove(simulate=True, hosts=1) as grove:
    for _ in range(2):
        root = grove.create_root("{MODEL}", tools=["bash"], allow=["bash"])
        grove.ask(root.uuid, "Remember the word teal.")
        print(root.uuid)
"""
TIMEOUT_S = 240


@dataclass(frozen=True)
class Place:
    base: Path
    env: dict[str, str]
    granted: str  # a session of the user's that the tests grant with --session
    other: str  # one never granted

    def server(self, *options: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=GROVE, args=["mcp", "--simulate", *options], env=self.env, cwd=self.base
        )

    def proof(self, name: str) -> Path:
        """A file a bash call of the tests writes in the workspace, if it ever runs."""
        return self.base / name


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    base = tmp_path_factory.mktemp("mcp-scope")
    config = base / "config.toml"
    config.write_text(CONFIG)
    env = cli_environment(base, config)
    made = subprocess.run(
        [sys.executable, "-c", USER_SESSIONS], capture_output=True, text=True, env=env,
        cwd=base, timeout=TIMEOUT_S, check=True,
    )  # fmt: skip
    granted, other = made.stdout.split()
    return Place(base, env, granted, other)


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return found


def refusal(result: CallToolResult, tool: str) -> str:
    """What the tool's error says (after the SDK's own opening)."""
    assert result.is_error, result.content
    text = "".join(part.text for part in result.content)  # type: ignore[union-attr]
    opening = f"Error executing tool {tool}: "
    assert text.startswith(opening), text
    return text.removeprefix(opening)


def writes(name: str) -> str:
    """A prompt whose model calls bash to write `name` in the workspace."""
    return sim_call("bash", command=f"echo ran > {name}")


async def listed(client: Client) -> set[str]:
    rows = answer(await client.call_tool("grove_agents", {}))["agents"]
    return {row["uuid"] for row in rows}


async def refuses_what_it_was_not_given(client: Client, session: str, proof: Path) -> None:
    """The user's `session` is neither forked nor waited for (by id or prefix) nor listed."""
    for given in (session, session[:8]):
        unknown = f"no agent {given!r} among the sessions of this server"
        forked = await client.call_tool("grove_fork", {"agent": given, "prompts": [writes("x")]})
        assert refusal(forked, "grove_fork") == unknown
        waited = await client.call_tool("grove_wait", {"agents": [given], "timeout_s": 1})
        assert refusal(waited, "grove_wait") == unknown
    assert not await anyio.Path(proof).exists()
    assert session not in await listed(client)


async def test_a_client_reaches_only_the_sessions_it_made(place: Place) -> None:
    async with Client(place.server()) as client:
        await refuses_what_it_was_not_given(client, place.granted, place.proof("x"))
        await refuses_what_it_was_not_given(client, place.other, place.proof("x"))

        # Its own agents it runs, sees and forks; bash asks, and no one can be asked.
        run = answer(await client.call_tool("grove_run", {"prompt": writes("own")}))
        (refused,) = run["tool_results"]
        assert refused["is_error"] and refused["content"] == refusal_text("bash")
        assert not await anyio.Path(place.proof("own")).exists()
        forked = answer(await client.call_tool("grove_fork", {"agent": run["agent"][:8],
                                                              "prompts": ["a"]}))  # fmt: skip
        assert {run["agent"], *forked["children"]} <= await listed(client)


async def test_a_granted_session_forks_without_approvals_the_server_lacks(place: Place) -> None:
    async with Client(place.server("--session", place.granted[:8])) as client:
        assert place.granted in await listed(client)
        await refuses_what_it_was_not_given(client, place.other, place.proof("x"))
        arguments = {"agent": place.granted, "prompts": [writes("y")]}
        forked = refusal(await client.call_tool("grove_fork", arguments), "grove_fork")
        assert forked == (
            f"fork refused: {place.granted} may run bash without asking and this server's agents "
            "may not; to let them, start grove mcp with --allow bash"
        )
        assert not await anyio.Path(place.proof("y")).exists()


async def test_a_session_granted_with_its_approvals_forks_with_them(place: Place) -> None:
    options = ("--session", place.granted, "--allow", "bash")
    async with Client(place.server(*options)) as client:
        forked = answer(
            await client.call_tool("grove_fork", {"agent": place.granted, "prompts": [writes("z")]})
        )
        waited = answer(
            await client.call_tool("grove_wait", {"agents": forked["children"], "timeout_s": 120})
        )
        (result,) = waited["results"].values()
        assert [call["is_error"] for call in result["tool_results"]] == [False]
    assert await anyio.Path(place.proof("z")).read_text() == "ran\n"


def test_an_unknown_session_stops_the_server_before_it_serves(place: Place) -> None:
    for given in ("zzzz", ""):
        done = subprocess.run(
            [GROVE, "mcp", "--simulate", "--session", given], capture_output=True, text=True,
            env=place.env, cwd=place.base, timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr == f"--session: no agent {given!r} among the stored agents\n"


# ----- with a service up ---------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, str]]:
    """A service (over a Grove of this process) holding two sessions a user ran with --allow
    bash: the environment of commands that use it, and the two roots."""
    env = {"GROVE_DEFAULTS__MODEL": MODEL}
    with (
        running_grove(tmp_path, hosts=1, env=env) as grove,
        service_in_process(grove, tmp_path, env=env) as service,
    ):
        granted, other = (grove.create_root(MODEL, tools=["bash"], allow=["bash"]) for _ in "ab")
        for root in (granted, other):
            grove.ask(root.uuid, "Remember the word teal.")
        yield service.env, granted.uuid, other.uuid


def on_service(env: dict[str, str], cwd: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(command=GROVE, args=["mcp", *options], env=env, cwd=cwd)


async def test_on_a_service_a_client_reaches_only_its_own_and_granted_sessions(
    served: tuple[dict[str, str], str, str], tmp_path: Path
) -> None:
    env, granted, other = served
    async with Client(on_service(env, tmp_path)) as client:
        await refuses_what_it_was_not_given(client, granted, tmp_path / "x")
        await refuses_what_it_was_not_given(client, other, tmp_path / "x")
        run = answer(await client.call_tool("grove_run", {"prompt": "Name one prime."}))
        forked = answer(await client.call_tool("grove_fork", {"agent": run["agent"],
                                                              "prompts": ["a"]}))  # fmt: skip
        assert {run["agent"], *forked["children"]} <= await listed(client)
    async with Client(on_service(env, tmp_path, "--session", granted)) as client:
        assert granted in await listed(client)
        await refuses_what_it_was_not_given(client, other, tmp_path / "x")
        arguments = {"agent": granted, "prompts": [writes("y")]}
        refused = refusal(await client.call_tool("grove_fork", arguments), "grove_fork")
        assert refused.startswith(f"fork refused: {granted} may run bash without asking")
    assert not await anyio.Path(tmp_path / "y").exists()
