"""Stored agents whose models retired or are retiring, as a user meets them: `grove doctor`
lists them from a real store with what to do, and `grove chat --resume` of one says its model
retired and which `/model` to switch to; after that switch the agent answers again.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

from grove.providers.lifecycle import TODAY_ENV
from grove.supervisor.store import open_store
from grove.supervisor.store.records import AgentRecord, NewMessage
from tests.integration.groves import cli_environment

RETIRED = "claude-sonnet-4-5"
DEPRECATED = "gpt-5-mini"
TIMEOUT_S = 240


def stored_roots(store_url: str, models: list[str]) -> list[str]:
    """A root agent per model, each with one exchange, written to the store as a Grove that
    has exited left them (running in the store, stopped to every reader)."""
    store = open_store(store_url)
    try:
        roots = []
        for model in models:
            provider = "openai" if model.startswith("gpt-") else "anthropic"
            record = AgentRecord(
                uuid=str(uuid.uuid4()), role="root", provider=provider, model=model,
                created_at=time.time(),
            )  # fmt: skip
            store.create_agents(
                [record], [NewMessage(agent_uuid=record.uuid, kind="user", content="hello")]
            )
            roots.append(record.uuid)
        return roots
    finally:
        store.close()


def grove(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grove.cli.app", *args], capture_output=True, text=True, env=env,
        input=stdin, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def test_doctor_lists_the_stored_agents_on_retired_or_retiring_models(tmp_path: Path) -> None:
    env = cli_environment(tmp_path)
    assert env[TODAY_ENV] == "2026-12-04"  # the suite's day, which the texts below assume
    retired, current, deprecated = stored_roots(
        env["GROVE_STORE"], [RETIRED, "claude-sonnet-5-5", DEPRECATED]
    )
    done = grove(env, "doctor")
    lines = done.stdout.splitlines()
    found = {
        line.split()[3].rstrip(":"): (
            line.split()[0],
            line.split(": ", 1)[1],
            lines[index + 1].strip(),
        )
        for index, line in enumerate(lines)
        if line.split()[1:2] == ["models"]
    }
    assert found == {
        retired: (
            "warn",
            "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5",
            f"fix: in `grove chat --resume {retired}`: /switch {retired}, then "
            "/model claude-sonnet-5-5",
        ),
        deprecated: (
            "warn",
            "Warning: gpt-5-mini is deprecated and shuts down on 2026-12-11; use gpt-6.1-terra",
            f"fix: in `grove chat --resume {deprecated}`: /switch {deprecated}, then "
            "/model gpt-6.1-terra",
        ),
    }, done.stdout
    assert current not in done.stdout
    # A week later the deprecated model has shut down too.
    later = grove({**env, TODAY_ENV: "2026-12-11"}, "doctor")
    assert f"agent {deprecated}: gpt-5-mini was retired on 2026-12-11; use gpt-6.1-terra" in (
        later.stdout
    )


def test_resuming_an_agent_on_a_retired_model_says_which_model_to_switch_to(
    tmp_path: Path,
) -> None:
    env = cli_environment(tmp_path)
    (root,) = stored_roots(env["GROVE_STORE"], [RETIRED])
    script = "/model claude-sonnet-5-5/low\n[[sim reply=back]] still there?\n/exit\n"
    done = grove(env, "chat", "--simulate", "--hosts", "1", "--resume", root[:8], stdin=script)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "This agent's model claude-sonnet-4-5 was retired on 2026-11-30; switch it with "
        "/model claude-sonnet-5-5"
    )
    assert "Switched to Anthropic claude-sonnet-5-5" in done.stdout
    assert "back" in done.stdout
    # Named with --model, the switch happens as it resumes: nothing to warn about.
    again = grove(
        env, "chat", "--simulate", "--hosts", "1", "--resume", root, "--model",
        "claude-haiku-5-5", stdin="/exit\n",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "retired" not in again.stderr
