"""Numbers from a user or a model are finite and capped: `/wait nan`, `/wait inf`, `/wait 1e308`
and the wait tool's `timeout: 1e999` are clear errors, not a crash or a wait that never ends.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.actors.tools.fanout import WAIT_CAP_S
from grove.providers import wirejson
from grove.supervisor import Grove
from grove.supervisor.commands.parsing import split_command
from grove.supervisor.errors import CommandError
from grove.supervisor.rules import checked_seconds
from tests.integration.groves import cli_environment

NON_FINITE_WAITS = ("nan", "inf", "-inf", "1e308", "1e999", "NaN", "-nan")
CHAT_TIMEOUT_S = 240


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.text(max_size=30))
def test_checked_seconds_is_a_bounded_number_or_a_command_error(value: object) -> None:
    try:
        seconds = checked_seconds(value, "TIMEOUT")
    except CommandError as exc:
        assert str(exc).startswith("TIMEOUT ")
    else:
        assert math.isfinite(seconds) and 0 <= seconds <= WAIT_CAP_S


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("nan", "TIMEOUT must be a number of seconds, not nan"),
        ("soon", "TIMEOUT must be a number of seconds, not soon"),
        ("-1", "TIMEOUT must not be negative"),
        ("inf", "TIMEOUT may be at most 86400 seconds (a day), not inf"),
        ("1e308", "TIMEOUT may be at most 86400 seconds (a day), not 1e308"),
        (float("inf"), "TIMEOUT may be at most 86400 seconds (a day), not inf"),
        (10**400, "TIMEOUT may be at most 86400 seconds (a day), not " + str(10**400)),
        (True, "TIMEOUT must be a number of seconds, not True"),
        ([1], "TIMEOUT must be a number of seconds, not [1]"),
    ],
)
def test_bad_seconds_say_what_is_wrong(value: object, text: str) -> None:
    with pytest.raises(CommandError) as caught:
        checked_seconds(value, "TIMEOUT")
    assert str(caught.value) == text


@given(st.text(max_size=40))
def test_split_command_never_fails_but_with_a_command_error(line: str) -> None:
    try:
        name, _ = split_command(line)
    except CommandError:
        return
    assert name == name.lower()


def test_piped_chat_reports_every_bad_wait_and_runs_the_next_lines(tmp_path: Path) -> None:
    lines = [f"/wait {value}" for value in NON_FINITE_WAITS] + ["/wait 0", "/agents"]
    env = cli_environment(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "chat", "--simulate", "--model", "gpt-5-mini"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=CHAT_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert done.returncode == 1, output
    assert f"{len(NON_FINITE_WAITS)} of the lines read were rejected" in done.stderr
    assert output.count("TIMEOUT must be a number of seconds, not") == 3
    assert output.count("TIMEOUT may be at most 86400 seconds (a day)") == 3
    assert output.count("TIMEOUT must not be negative") == 1  # -inf
    assert "Nothing arrived" in done.stdout  # /wait 0 ran after the bad lines
    assert "root  running" in done.stdout  # and so did /agents


@pytest.mark.parametrize("timeout", ["1e999", "-1e999", "1e308", "-5"])
def test_the_wait_tool_refuses_a_timeout_that_is_not_a_bounded_number(
    grove: Grove, timeout: str
) -> None:
    root = grove.create_root("claude-haiku-4-5", tools=("wait",))
    # The model's arguments are JSON text: 1e999 parses to infinity.
    directive = f"[[sim tool=wait args='{{\"timeout\": {timeout}}}']] waiting"
    result = grove.ask(root.uuid, directive, timeout_s=60)
    assert result.ok, result.error
    (call,) = [
        part
        for message in grove.history(root.uuid)
        if message.kind == "tool_result"
        for part in message.data["parts"]
    ]
    assert call["is_error"] is True
    assert "wait's `timeout`" in str(call["content"])
    assert json.dumps(call)  # stored as plain JSON, no infinity left in it


def test_provider_json_keeps_an_overflowing_number_as_its_text_and_refuses_nan() -> None:
    assert wirejson.loads('{"timeout": 1e999, "n": 2.5}') == {"timeout": "1e999", "n": 2.5}
    for text in ('{"t": NaN}', '{"t": Infinity}', '{"t": -Infinity}'):
        with pytest.raises(ValueError, match="is not JSON"):
            wirejson.loads(text)
