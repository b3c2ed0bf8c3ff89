"""`grove chat` on a real pseudo-terminal while a reply streams: commands typed then run at once,
prompts typed then queue and run in order, Ctrl+C and Esc cancel with the queue kept, a too long
paste is refused, and the status line counts the turn's tokens; in a Grove of its own and with a
service up.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.supervisor.batch.tasks import MAX_TEXT_BYTES
from grove.supervisor.store import open_store
from tests.integration.services import ONE_HOST, grove_service
from tests.terminal import Terminal, terminal_env

MODEL = "claude-haiku-4-5"
STREAMING_SWITCH_TEXT = (  # the reference's text, spec/commands-model-fork.md
    "Cannot switch model while response is streaming. Wait for completion or press Ctrl+C to "
    "cancel."
)
LONG_TURN = "[[sim tps=10 tokens=2000]] tell me a long story\r"  # streams for minutes
TOKENS = re.compile(r"~([0-9,]+) tokens out")


def streamed_tokens(term: Terminal) -> int:
    found = TOKENS.search(term.shown("tokens out"))
    assert found is not None
    return int(found.group(1).replace(",", ""))


def replies(store: str) -> tuple[list[str], list[str], str | None]:
    """The user prompts and assistant replies of the session's root in order, and its
    model."""
    stored = open_store(store)
    try:
        (agent,) = [record for record in stored.list_agents() if record.role == "root"]
        messages = stored.agent_messages(agent.uuid)
        return (
            [m.content for m in messages if m.kind == "user"],
            [m.content for m in messages if m.kind == "assistant"],
            agent.model,
        )
    finally:
        stored.close()


def wait_for_replies(store: str, count: int, timeout_s: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while len(found := replies(store)[1]) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    return found


def mid_stream_commands(term: Terminal) -> None:
    """During a long turn: the status line counts up, /model is refused and changes nothing,
    /agents lists the tree, a bad command fails alone; a prompt queues, Ctrl+C cancels and
    keeps it, a second Ctrl+C drops it."""
    term.expect(">")
    assert f"{MODEL}/default" in term.shown(MODEL)
    term.type(LONG_TURN)
    first = streamed_tokens(term)
    time.sleep(1.0)
    assert streamed_tokens(term) > first  # the count grows as the reply streams
    assert f"{MODEL}/default" in term.shown("tokens out")
    term.type("/model claude-sonnet-5-5\r")
    term.expect(STREAMING_SWITCH_TEXT)
    term.type("/agents\r")
    term.expect(f"{MODEL}/default  streaming")  # the tree, listed while the reply streams
    term.type('/fork "unclosed\r')
    term.expect("Unclosed quote in prompt")  # the parser's complaint; the turn streams on
    for command, shown in (
        ("/help", "/agents"),
        ("/context", "Context: "),
        ("/usage", "requests"),
        ("/fork", "Forked child"),  # no prompt: the focus stays
        ("/history", "] user"),  # the conversation so far, while the reply streams
        ("/histroy", "Unknown command: /histroy. Type /help for the list."),
    ):
        term.type(f"{command}\r")
        term.expect(shown)
    before = streamed_tokens(term)
    term.type('[[sim reply="never sent"]] held then dropped\r')
    term.expect("Queued #1")
    time.sleep(0.5)
    assert streamed_tokens(term) > before
    term.type("\x03")
    term.expect("Cancelled", 30)
    term.expect("1 queued prompt held: Enter sends them, Ctrl+C drops them")
    term.type("\x03")
    term.expect("Dropped 1 queued prompt")


def queued_in_order(term: Terminal) -> None:
    """Two prompts typed during a turn run after it, in order; Esc cancels a turn."""
    term.type("[[sim tps=25 tokens=60]] a short story\r")
    term.type('[[sim reply="first done"]] first queued\r')
    term.expect("Queued #1")
    term.type('[[sim reply="second done"]] second queued\r')
    term.expect("Queued #2")
    term.expect('Sending: [[sim reply="first done"]] first queued', 60)
    term.expect('Sending: [[sim reply="second done"]] second queued', 60)
    term.expect("second done", 60)
    term.type(LONG_TURN)
    streamed_tokens(term)
    term.type("\x1b")
    term.expect("Cancelled", 30)


def signalled_cancel(term: Terminal) -> None:
    """Ctrl+C as a signal, as the terminal sends it while lines are written above the prompt
    (it is cooked then), cancels the turn as the key does; the chat goes on."""
    term.type(LONG_TURN)
    streamed_tokens(term)  # the prompt is up: its status line shows the turn
    os.kill(term.pid, signal.SIGINT)
    term.expect("Cancelled", 30)


def forked_mid_stream(term: Terminal) -> None:
    """/fork with a prompt during a turn: the child starts at once, its reply is shown after
    the turn streaming (here cancelled), and the focus moves to it."""
    term.type(LONG_TURN)
    streamed_tokens(term)
    term.type("/fork \"[[sim reply='child done']] child task\"\r")
    term.expect("Forked child")
    term.type("\x03")
    term.expect("Cancelled", 30)
    term.expect("child done", 60)


def test_a_live_prompt_while_a_reply_streams(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    env = {**terminal_env(tmp_path), "GROVE_NO_SERVICE": "1"}
    store = env["GROVE_STORE"]
    argv = [
        sys.executable,
        "-m",
        "grove.cli.app",
        "chat",
        "--simulate",
        "--hosts",
        "1",
        "-m",
        MODEL,
    ]
    term = Terminal(argv, env, tmp_path / "workspace")
    try:
        mid_stream_commands(term)
        queued_in_order(term)
        signalled_cancel(term)
        forked_mid_stream(term)
        # The guards only stop a hang: echoing 2 MB took a loaded 2-core machine over a minute.
        pasted = term.paste("x" * (MAX_TEXT_BYTES + 1))
        term.expect(f"over the prompt limit of {MAX_TEXT_BYTES:,}; not sent", 240)
        pasted.join(240)
        term.type("/exit\r")
        assert term.wait() == 0
    finally:
        term.close()
    prompts, answers, model = replies(store)
    assert model == MODEL  # /model was refused, not done later
    assert [p.split("]] ")[-1] for p in prompts] == [
        "tell me a long story", "a short story", "first queued", "second queued",
        "tell me a long story", "tell me a long story", "tell me a long story",
    ]  # fmt: skip
    assert answers[1:] == ["first done", "second done"]  # the cancelled turns keep nothing
    stored = open_store(store)
    try:
        children = [r.uuid for r in stored.list_agents() if r.role == "child"]
        answers_of = [
            [m.content for m in stored.agent_messages(child) if m.kind == "assistant"]
            for child in children
        ]
    finally:
        stored.close()
    assert sorted(answers_of) == [[], ["child done"]]  # /fork alone, /fork with a prompt


@pytest.fixture(scope="module")
def service_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with grove_service(tmp_path_factory.mktemp("service"), env=ONE_HOST) as running:
        yield {**running.env, "TERM": "xterm"}


def test_the_same_with_a_service_up(service_env: dict[str, str], tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "grove.cli.entry", "chat", "-m", MODEL]
    term = Terminal(argv, service_env, tmp_path)
    try:
        mid_stream_commands(term)
        queued_in_order(term)
        term.type("/exit\r")
        assert term.wait() == 0
    finally:
        term.close()
    store = service_env["GROVE_STORE"]
    *_, model = replies(store)
    assert model == MODEL
    assert wait_for_replies(store, 3)[1:] == ["first done", "second done"]
