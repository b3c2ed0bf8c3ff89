"""`grove chat --simulate` fed a stdin script (each line run when the one before it is done),
then `grove agents`, `grove history` and `grove events` over the same SQLite store. Real Ray,
real simulator.

The chat and its resumption run in this process on a Grove of the module's (a command finds
Ray started and joins its supervisor), closed before the tests read what they left: its trees
show `stopped`, as after a chat of its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from grove.providers.catalog import unknown_model_text
from grove.supervisor.rules import NO_MODEL_TEXT as NO_MODEL_CONFIGURED
from grove.supervisor.store import AgentRecord, Store, open_store
from tests.integration.groves import Invoked, invoke, running_grove

# The reference's texts (spec/commands-model-fork.md), word for word, naming today's models.
UNKNOWN_MODEL_TEXT = unknown_model_text("unknown-model") + "\n"
INVALID_THINKING_TEXT = """Invalid thinking level: maximum
Valid levels: none, low, med, high
"""
NO_MODEL_TEXT = NO_MODEL_CONFIGURED + "\n"
RETIRED_TEXT = "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5\n"
SWITCHED_TEXT = "Switched to Anthropic claude-haiku-4-5\n  Thinking: med (budget 43,008 tokens)\n"
SWITCHED_AFTER_SLOW_TEXT = "\nSwitched to OpenAI gpt-6-sol\n"

SCRIPT = [
    "never saved",
    "/model unknown-model",
    "/model claude-sonnet-4-5/med",  # retired: refused, nothing changes
    "/model claude-haiku-4-5/maximum",
    "/model claude-haiku-4-5/med",
    "hello there",
    "/fork",
    '/fork "task one"',
    '/fork --model gpt-6-sol/high "sub task"',
    '/fork "unclosed',
    "[[sim ttft_ms=1000]] slow",
    "/model gpt-6-sol",  # runs once the slow reply is done: piped lines wait for their turns
    "/wait 3600",  # nothing below is at work: returns at once, not after an hour
]
FORKED = re.compile(r"^Forked child (\S+) \((\S+)\)$", re.MULTILINE)


@dataclass(frozen=True)
class ChatRun:
    env: dict[str, str]
    store_url: str
    stdout: str
    stderr: str
    returncode: int
    resumed: Invoked  # `--resume` of the grandchild by a prefix, `/agents`, `/exit`
    last_before_resume: int | None  # the store's last message id before it


def grove(env: dict[str, str], *args: str) -> Invoked:
    return invoke(env, *args)


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory: pytest.TempPathFactory) -> ChatRun:
    base = tmp_path_factory.mktemp("chat")
    config = base / "config.toml"
    config.write_text("[models]\naliases = {}\n")
    store_url = f"sqlite:///{base / 'g.sqlite3'}"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GROVE_", "RAY_")) and not key.endswith("_API_KEY")
    }
    env.update(
        GROVE_STORE=store_url,
        GROVE_CONFIG_FILE=str(config),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_DATA_HOME=str(base / "data"),
    )
    with running_grove(base, store_url=store_url, env={"GROVE_MODELS__ALIASES": "{}"}):
        done = invoke(env, "chat", "--simulate", "--hosts", "2", stdin="\n".join(SCRIPT) + "\n")
        grandchild = FORKED.findall(done.stdout)[2][0]
        store = open_store(store_url)
        try:
            before = store.last_message_id()
        finally:
            store.close()
        resumed = invoke(
            env,
            "chat",
            "--simulate",
            "--hosts",
            "1",
            "--resume",
            grandchild[:10],
            stdin="/agents\n/exit\nnever sent\n",
        )
    return ChatRun(env, store_url, done.stdout, done.stderr, done.returncode, resumed, before)


@pytest.fixture
def store(chat_run: ChatRun) -> Iterator[Store]:
    opened = open_store(chat_run.store_url)
    yield opened
    opened.close()


def root_of(chat_run: ChatRun) -> str:
    match = re.match(r"Agent (\S+)\n", chat_run.stdout)
    assert match, chat_run.stdout + chat_run.stderr
    return match.group(1)


def forks(chat_run: ChatRun) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FORKED.finditer(chat_run.stdout)]


def test_chat_ends_with_status_1_after_rejected_lines(chat_run: ChatRun) -> None:
    # The script has refused lines (an unclosed quote, a switch while streaming, ...): a
    # script reading the exit status learns of them; every line was still run.
    assert chat_run.returncode == 1, chat_run.stdout + chat_run.stderr
    assert re.search(r"^\d+ of the lines read were rejected$", chat_run.stderr, re.MULTILINE)
    assert "Traceback" not in chat_run.stderr
    assert "\x1b[" not in chat_run.stdout


def test_reference_texts_are_printed_exactly(chat_run: ChatRun) -> None:
    for text in (
        UNKNOWN_MODEL_TEXT,
        RETIRED_TEXT,
        INVALID_THINKING_TEXT,
        NO_MODEL_TEXT,
        SWITCHED_TEXT,
    ):
        assert f"\n{text}" in chat_run.stdout, text


def test_prompt_without_model_is_not_saved_and_the_repl_goes_on(
    chat_run: ChatRun, store: Store
) -> None:
    root = root_of(chat_run)
    contents = [m.content for m in store.agent_messages(root)]
    assert "never saved" not in contents
    assert contents[0] == "hello there"
    assert chat_run.stdout.index(NO_MODEL_TEXT) < chat_run.stdout.index(UNKNOWN_MODEL_TEXT)


def test_prompt_after_model_switch_streams_its_reply(chat_run: ChatRun, store: Store) -> None:
    root = root_of(chat_run)
    kinds = [(m.kind, m.content) for m in store.agent_messages(root)]
    assert [kind for kind, _ in kinds] == ["user", "assistant"]
    reply = kinds[1][1]
    assert reply and reply in chat_run.stdout
    assert chat_run.stdout.index(SWITCHED_TEXT) < chat_run.stdout.index(reply)


def test_forks_store_the_reference_fields(chat_run: ChatRun, store: Store) -> None:
    root = root_of(chat_run)
    created = forks(chat_run)
    assert [described for _, described in created] == [
        "anthropic/claude-haiku-4-5/med",
        "anthropic/claude-haiku-4-5/med",
        "openai/gpt-6-sol/high",
    ]
    records = [store.get_agent(uuid) for uuid, _ in created]
    assert all(isinstance(r, AgentRecord) for r in records)
    plain, tasked, grandchild = (r for r in records if r is not None)
    # The root's reply may still be streaming when /fork runs: the fork point is then the
    # prompt, else the reply; either way the root's last stored message at that moment.
    root_ids = [m.id for m in store.agent_messages(root)]
    for child in (plain, tasked):
        assert child.parent_uuid == root
        assert child.fork_message_id in root_ids
        assert (child.provider, child.model, child.thinking_level) == (
            "anthropic",
            "claude-haiku-4-5",
            "med",
        )
        assert child.status == "running"
        assert child.role == "child"
    assert store.agent_messages(plain.uuid) == []
    task_messages = store.agent_messages(tasked.uuid)
    assert [(m.kind, m.content) for m in task_messages[:1]] == [("user", "task one")]
    assert grandchild.parent_uuid == tasked.uuid
    assert grandchild.fork_message_id in {m.id for m in task_messages}
    # `/model gpt-6-sol` ran after the slow turn ended, so it switched (to the default thinking);
    # a switch refused while a turn streams is shown in test_service.py.
    assert (grandchild.provider, grandchild.model, grandchild.thinking_level) == (
        "openai",
        "gpt-6-sol",
        None,
    )
    assert grandchild.status == "running"


def test_a_fork_with_a_task_streams_the_childs_reply(chat_run: ChatRun, store: Store) -> None:
    _, (tasked, _), (grandchild, _) = forks(chat_run)
    for child, task in ((tasked, "task one"), (grandchild, "sub task")):
        messages = [(m.kind, m.content) for m in store.agent_messages(child)]
        assert messages[0] == ("user", task)
        replies = [content for kind, content in messages if kind == "assistant"]
        assert replies and replies[0] in chat_run.stdout


def test_unclosed_quote_is_an_error_that_creates_nothing(chat_run: ChatRun, store: Store) -> None:
    assert "\nUnclosed quote in prompt\n" in chat_run.stdout
    assert len(store.list_agents(include_ended=True)) == 4


def test_a_prompt_line_ends_its_turn_before_the_next_line_runs(
    chat_run: ChatRun, store: Store
) -> None:
    assert SWITCHED_AFTER_SLOW_TEXT in chat_run.stdout, chat_run.stdout + chat_run.stderr
    grandchild = forks(chat_run)[2][0]
    contents = [(m.kind, m.content) for m in store.agent_messages(grandchild)]
    assert ("user", "[[sim ttft_ms=1000]] slow") in contents
    slow_reply = contents[-1]
    assert slow_reply[0] == "assistant" and slow_reply[1] in chat_run.stdout
    # The whole slow reply was printed before the next line (the switch) ran.
    assert chat_run.stdout.index(slow_reply[1]) < chat_run.stdout.index(SWITCHED_AFTER_SLOW_TEXT)
    # `/wait` with nothing at work below said so at once (the fixture would time out else).
    assert chat_run.stdout.rstrip().endswith("Nothing arrived")


def test_agents_shows_the_tree_with_models_and_counts(chat_run: ChatRun, store: Store) -> None:
    done = grove(chat_run.env, "agents")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    root = root_of(chat_run)
    plain, tasked, grandchild = (uuid for uuid, _ in forks(chat_run))
    count = len(store.agent_messages(grandchild))
    assert lines == [
        f"{root}  root  stopped  anthropic/claude-haiku-4-5/med  2 messages",
        f"  {plain}  child  stopped  anthropic/claude-haiku-4-5/med  0 messages",
        f"  {tasked}  child  stopped  anthropic/claude-haiku-4-5/med  2 messages",
        f"    {grandchild}  child  stopped  openai/gpt-6-sol/default  {count} messages",
    ]


def test_history_of_the_grandchild_is_the_assembled_conversation(
    chat_run: ChatRun, store: Store
) -> None:
    grandchild = forks(chat_run)[2][0]
    done = grove(chat_run.env, "history", grandchild[:13])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Agent {grandchild}\n")
    conversation = store.conversation(grandchild)
    headers = re.findall(r"^\[(\d+)\] (\w+)", done.stdout, re.MULTILINE)
    assert headers == [(str(m.id), m.kind) for m in conversation]
    positions = [done.stdout.index(m.content) for m in conversation]
    assert positions == sorted(positions)
    assert conversation[0].content == "hello there"
    assert f"[{conversation[0].id}] user  from {root_of(chat_run)}" in done.stdout


def test_history_of_an_unknown_agent_fails(chat_run: ChatRun) -> None:
    done = grove(chat_run.env, "history", "zzzz")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "zzzz" in done.stderr


def test_events_are_json_lines_and_after_filters(chat_run: ChatRun) -> None:
    done = grove(chat_run.env, "events")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["kind"] for event in events]
    assert kinds.count("AgentForked") == 3
    assert kinds.count("ModelSwitched") == 2
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    middle = events[len(events) // 2]["id"]
    later = grove(chat_run.env, "events", "--after", str(middle))
    assert [json.loads(line)["id"] for line in later.stdout.splitlines()] == [
        e["id"] for e in events if e["id"] > middle
    ]


def test_resume_by_prefix_joins_the_session_and_exit_ends_it(
    chat_run: ChatRun, store: Store
) -> None:
    grandchild = forks(chat_run)[2][0]
    done = chat_run.resumed
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Agent {root_of(chat_run)}\n")
    assert grandchild in done.stdout
    assert done.stdout.rstrip().endswith("Bye")
    assert store.last_message_id() == chat_run.last_before_resume
