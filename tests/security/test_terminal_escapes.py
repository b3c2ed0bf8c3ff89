"""A model's text cannot drive the terminal: a reply, its thinking, tool results (a file read,
bash output, file names listed, an MCP server's answer) carrying OSC 0 (window title), CSI 2J
(clear screen), OSC 52 (the clipboard), a C1 CSI and a bidi override reach `grove run`, `grove
chat` (piped and on a terminal) and `grove history` shown, not obeyed; `--json` keeps the exact
text. A model that names its child's model so reaches `grove agents` and `grove usage` shown too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.cli.printable import printable
from tests.integration.groves import Invoked, invoke, sim_call
from tests.security.commands import COMMAND_TIMEOUT_S, Place, make_place
from tests.terminal import Terminal

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
C1_CSI = "\x9b2J"
RIGHT_TO_LEFT = "\u202e"
HOSTILE = f"{TITLE}title {CLEAR}clear {CLIPBOARD}clip {C1_CSI} {RIGHT_TO_LEFT}txt.exe"
SHOWN = "^[]0;pwned^Gtitle ^[[2Jclear ^[]52;c;cHduZWQ=^Gclip <U+009B>2J <U+202E>txt.exe"
# What no byte stream written to the terminal may hold: the sequences' introducers.
RAW = ("\x1b]", "\x1b[2J", "\x07", "\x9b", "\u202e")
EVIL_NAME = "\x1b]0;named\x07.txt"
HOSTILE_SERVER = Path(__file__).resolve().parents[1] / "mcp_servers" / "hostile.py"
MCP_SHOWN = "^[]0;mcp-title^G^[[2J^[]52;c;bWNw^Gmcp done"  # its `escapes` tool's answer
# Step 1 runs bash (its output carries OSC 52), find (it lists EVIL_NAME), the MCP server's
# `escapes` and reads script.txt, whose directive makes step 2's reply and thinking HOSTILE.
BASH = r'printf "\033]52;c;YmFzaA==\007bash done"'
CALLS = [
    {"name": "bash", "args": {"command": BASH}},
    {"name": "find", "args": {"pattern": "*.txt"}},
    {"name": "mcp__hostile__escapes"},
    {"name": "read", "args": {"path": "script.txt"}},
]
PROMPT = f"[[sim calls='{json.dumps(CALLS)}' step=1]] look around"
TOOLS = ("--tools", "bash", "--tools", "find", "--tools", "read", "--allow", "bash")
# A model whose replies carry their thinking text (Claude 5.5 sends thinking blocks without
# it by default), so the hostile thinking is there to show.
MODEL = ("--simulate", "--model", "claude-haiku-4-5/low")


# ----- the one function ----------------------------------------------------------------------


def test_printable_shows_controls_and_keeps_text() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("tab\there\nnew line, crlf\r\nend") == "tab\there\nnew line, crlf\nend"
    assert printable("a\rb\x00c\x7fd\x85e") == "a^Mb^@c^?d<U+0085>e"
    assert (
        printable("naïve 日本語 emoji 🌳 \u200f rtl-mark")
        == "naïve 日本語 emoji 🌳 \u200f rtl-mark"
    )


UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F)]}
UNSAFE |= {chr(c) for c in range(0x2066, 0x206A)}


@given(st.text())
def test_printable_output_holds_no_control_but_newline_and_tab(text: str) -> None:
    shown = printable(text)
    assert set(shown) & UNSAFE <= {"\n", "\t"}
    if not set(text) & UNSAFE:
        assert shown == text  # text without controls is left exactly as it is


# ----- the commands ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scene:
    place: Place
    workspace: Path

    def grove(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "grove.cli.app", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.place.env,
            cwd=self.workspace,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def read(self, *args: str) -> Invoked:
        """A command that only reads the store, in this process (it starts no Ray)."""
        return invoke(self.place.env, *args)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    base = tmp_path_factory.mktemp("escapes")
    workspace = base / "workspace"
    workspace.mkdir()
    (workspace / "script.txt").write_text(f"[[sim reply='{HOSTILE}' thinking='{HOSTILE}']]\n")
    (workspace / EVIL_NAME).write_text("named\n")
    server = f"[mcp.servers.hostile]\ncommand = {json.dumps(sys.executable)}\n"
    (base / "config.toml").write_text(server + f"args = [{json.dumps(str(HOSTILE_SERVER))}]\n")
    for place in make_place(base):
        yield Scene(place, workspace)


def assert_shown_not_obeyed(output: str) -> None:
    assert [raw for raw in RAW if raw in output] == []
    assert "\x1b" not in output
    assert SHOWN in output


@pytest.fixture(scope="module")
def run(scene: Scene) -> subprocess.CompletedProcess[str]:
    return scene.grove("run", *MODEL, *TOOLS, PROMPT)


def test_grove_run_shows_reply_thinking_and_tool_text(
    run: subprocess.CompletedProcess[str],
) -> None:
    assert run.returncode == 0, run.stderr
    assert_shown_not_obeyed(run.stdout)
    assert run.stdout.count(SHOWN) >= 3  # the file read, the thinking, the reply
    assert "^[]52;c;YmFzaA==^Gbash done" in run.stdout  # bash's output
    assert "^[]0;named^G.txt" in run.stdout  # the file name find listed
    assert MCP_SHOWN in run.stdout
    assert "\x1b" not in run.stderr


def test_grove_history_shows_and_its_json_keeps_the_exact_text(
    scene: Scene, run: subprocess.CompletedProcess[str]
) -> None:
    assert run.returncode == 0, run.stderr
    agents = json.loads(scene.read("agents", "--json").stdout)
    agent = agents[-1]["uuid"]
    shown = scene.read("history", agent)
    assert shown.returncode == 0, shown.stderr
    assert_shown_not_obeyed(shown.stdout)
    assert f"(thinking) {SHOWN}" in shown.stdout
    exact = json.loads(scene.read("history", agent, "--json").stdout)
    assert exact["messages"][-1]["content"] == HOSTILE


# `fork` takes `openai:ANY_ID` (a compatible server's own model): the id is the model's.
CHOSEN_MODEL = f"openai:{TITLE}m{CLIPBOARD}"
FORK = {"prompt": "[[sim reply=done]] go on", "model": CHOSEN_MODEL}


def test_piped_grove_chat_shows_it_and_agents_and_usage_a_model_name_a_model_chose(
    scene: Scene,
) -> None:
    """After the hostile turn, the chat forks a child on a model whose name the model chose,
    then waits for the child's result."""
    lines = (PROMPT, sim_call("fork", **FORK), "[[sim tool=wait step=1]] wait for it")
    done = scene.grove(
        "chat", *MODEL, *TOOLS, "--tools", "fork", "--tools", "wait", stdin="\n".join(lines) + "\n"
    )
    assert done.returncode == 0, done.stderr
    assert_shown_not_obeyed(done.stdout)
    assert "^[]0;named^G.txt" in done.stdout
    shown = "openai/^[]0;pwned^Gm^[]52;c;cHduZWQ=^G"
    for command in (("agents",), ("usage", "--by", "model")):
        listed = scene.read(*command)
        assert listed.returncode == 0, listed.stderr
        assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
        assert shown in listed.stdout, listed.stdout


def test_grove_chat_on_a_terminal_shows_it(scene: Scene) -> None:
    argv = [sys.executable, "-m", "grove.cli.app", "chat", *MODEL, *TOOLS]
    terminal = Terminal(argv, {**scene.place.env, "TERM": "xterm"}, scene.workspace)
    try:
        terminal.expect(">")
        terminal.type(PROMPT + "\r")
        terminal.expect("<U+202E>txt.exe", 120)  # the reply's end
        terminal.expect(">")
        terminal.type("/exit\r")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    screen = terminal.screen.decode("utf-8", errors="replace")
    # The terminal gets Grove's own styles and the line editor's cursor moves; never these.
    hostile = (TITLE, CLEAR, CLIPBOARD, "\x1b]52", "\x9b", "\u202e")
    assert [raw for raw in hostile if raw in screen] == []
    assert screen.count("^[]52;c;cHduZWQ=^Gclip") >= 3
