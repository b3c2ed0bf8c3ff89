"""Preserved thinking end to end: Claude 5.5 agents on real Ray against the simulator over
HTTP, which signs every thinking block over its model and prefix and refuses one sent back
under another (the API's 400). Each move Grove makes (a tool loop, /model, compaction, forks
onto other models, system prompts, tools or worktrees, a reviewer, a resumed conversation,
a batch with a shared context) is refused nothing, and keeps the thinking where the
conversation only grew; a fork with its own instructions reads the parent's cached prefix.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grove.actors.agent.metering import reply_data
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import Message, Request, TextPart, ThinkingPart
from grove.providers.factory import wire_for
from grove.providers.http import Endpoint, HTTPProvider
from grove.providers.preserved_thinking import bound, dropped_text
from grove.providers.stream_events import Finished, ProviderWarning
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.anthropic.thinking_blocks import bound_text, check_request
from grove.simulator.wire import InvalidRequest
from grove.supervisor import Grove
from grove.supervisor.config_tools import McpSection, McpServerSection
from grove.supervisor.store import open_store
from grove.supervisor.turns import step_events
from tests.integration.groves import (
    cli_environment,
    invoke,
    running_grove,
    sim_call,
    tool_results,
)

KEY = "sim-preserved-thinking-key-7c1d"
CALC = Path(__file__).resolve().parents[1] / "mcp_servers" / "calc.py"
SONNET = "claude-sonnet-5-5/med"
OPUS = "claude-opus-5-5/med"


def now() -> str:
    """The time of day."""
    return "noon"


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(simulator: SimulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    env = {"GROVE_ADVISOR__MODEL": SONNET}  # a Claude 5.5 reviewer
    with running_grove(tmp_path_factory.mktemp("preserved"), endpoint=endpoint, env=env) as grove:
        yield grove


@pytest.fixture
def sent(simulator: SimulatorThread) -> Iterator[list[dict[str, Any]]]:
    """The Messages request bodies this test sent, in order."""
    received = simulator.simulator.received
    received.clear()
    bodies: list[dict[str, Any]] = []

    class Seen(list[dict[str, Any]]):
        def __iter__(self) -> Any:
            bodies[:] = [body for body in received if "messages" in body]
            return iter(bodies)

    yield Seen()


def answered(result: TurnResult | None) -> TurnResult:
    """A turn that ended well; else its error (the API's refusal) says why."""
    assert result is not None and result.ok, result and result.error
    return result


def refusals(bodies: list[dict[str, Any]]) -> list[str]:
    """What the API would refuse in these requests (the simulator's own checks)."""
    refused = []
    for body in bodies:
        try:
            check_request(body["model"], body, body.get("thinking") is not None)
        except InvalidRequest as exc:
            refused.append(str(exc))
    return refused


def thinking(body: dict[str, Any]) -> list[tuple[int, str]]:
    """Where a request sends thinking back: (message index, model the signature names)."""
    return [
        (index, block["signature"])
        for index, message in enumerate(body["messages"])
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]


def dropped_events(grove: Grove) -> list[dict[str, Any]]:
    store = open_store(grove.settings.store)
    try:
        return [e.payload for e in store.events(limit=100_000) if e.kind == "ThinkingDropped"]
    finally:
        store.close()


def clean(grove: Grove, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests, once checked: none the API would refuse, no retry after a refusal."""
    requests = list(bodies)
    assert requests
    assert refusals(requests) == []
    assert dropped_events(grove) == []
    return requests


def test_a_tool_loop_sends_its_thinking_back(grove: Grove, sent: list[dict[str, Any]]) -> None:
    root = grove.create_root(SONNET, tools=[now]).uuid
    answered(grove.ask(root, sim_call("now")))
    first, second = clean(grove, sent)
    assert thinking(first) == []
    assert [index for index, _ in thinking(second)] == [1]
    assert second["messages"][1]["content"][0]["thinking"] == ""


def test_a_chat_switches_models_compacts_and_grows(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    root = grove.create_root(SONNET).uuid
    answered(grove.ask(root, "one"))
    answered(grove.ask(root, "two"))
    assert grove.dispatch(root, f"/model {OPUS}").ok
    answered(grove.ask(root, "three"))
    answered(grove.ask(root, "four"))
    assert grove.dispatch(root, "/compact").ok
    answered(grove.ask(root, "five"))
    answered(grove.ask(root, "six"))
    requests = clean(grove, sent)
    asked = [r for r in requests if r["messages"][-1]["content"][-1].get("text") in WORDS]
    by_word = {r["messages"][-1]["content"][-1]["text"]: r for r in asked}
    assert len(thinking(by_word["two"])) == 1  # Sonnet's, on Sonnet
    assert thinking(by_word["three"]) == []  # Sonnet's, not sent to Opus
    assert len(thinking(by_word["four"])) == 1  # Opus's own, kept
    assert thinking(by_word["five"]) == []  # the summary changed every block's prefix
    assert len(thinking(by_word["six"])) == 1  # grown again: kept


WORDS = ("one", "two", "three", "four", "five", "six")


def parent_with_thinking(grove: Grove, tools: list[Any] | None = None) -> str:
    """A Sonnet 5.5 root with two answers (and their thinking), over a long first prompt."""
    root = grove.create_root(SONNET, tools=tools).uuid
    notes = " ".join(f"note-{n}" for n in range(1_200))
    answered(grove.ask(root, f"Read these notes: {notes}"))
    answered(grove.ask(root, "Summarise them."))
    return root


def first_request(requests: list[dict[str, Any]], prompt: str) -> dict[str, Any]:
    return next(r for r in requests if prompt in json.dumps(r["messages"][-1]))


def test_forks_on_the_same_model_keep_the_parents_thinking(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    parent = parent_with_thinking(grove)
    child = grove.fork(parent, "Child on the same model.")
    answered(grove.wait_turn(child, 60))
    request = first_request(clean(grove, sent), "Child on the same model.")
    assert len(thinking(request)) == 2


def test_forks_onto_another_model_or_with_fewer_tools_send_no_invalid_thinking(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    parent = parent_with_thinking(grove, tools=[now, shout])
    other = grove.fork(parent, "Child on Opus.", model=OPUS)
    fewer = grove.fork(parent, "Child with fewer tools.", tools=["now"])
    for child in (other, fewer):
        answered(grove.wait_turn(child, 60))
    requests = clean(grove, sent)
    assert thinking(first_request(requests, "Child on Opus.")) == []
    narrowed = first_request(requests, "Child with fewer tools.")
    assert [tool["name"] for tool in narrowed["tools"]] == ["now"]
    assert thinking(narrowed) == []


def test_a_fork_with_fewer_tools_in_the_middle_of_a_tool_loop_closes_the_loop(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    """The `fork` tool called in a turn's second step: the child inherits the first step, a
    tool loop whose leading thinking its narrower tools invalidate. Opus 5.5 always
    thinks, and a tool loop must then start with thinking: the child gets the loop's call and
    result told as text instead."""
    parent = grove.create_root(OPUS, tools=[now, shout, "fork"]).uuid
    fork = json.dumps({"prompt": "Child mid-loop.", "tools": ["now"]})
    script = f"[[sim tool=now args='{{}}' step=1]] [[sim tool=fork args='{fork}' step=2]] go"
    answered(grove.ask(parent, script))
    (made,) = [r for r in tool_results(grove, parent) if r["name"] == "fork"]
    answered(grove.wait_turn(json.loads(made["content"])["uuid"], 60))
    (request, *_) = [r for r in clean(grove, sent) if len(r["tools"]) == 1]
    assert [tool["name"] for tool in request["tools"]] == ["now"]
    assert thinking(request) == []
    last = request["messages"][-1]["content"]
    assert [block["type"] for block in last] == ["text", "text"]
    assert last[0]["text"] == "[now returned] noon"


def test_a_fork_with_its_own_instructions_stays_append_only_and_reads_the_cache(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    parent = parent_with_thinking(grove)
    children = grove.fork_many(parent, ["First task.", "Second task."], system="Be terse.")
    results = [answered(grove.wait_turn(child, 60)) for child in children]
    requests = clean(grove, sent)
    parent_system = requests[0].get("system")
    for prompt, result in zip(("First task.", "Second task."), results, strict=True):
        request = first_request(requests, prompt)
        assert request.get("system") == parent_system
        assert len(thinking(request)) == 2
        last = request["messages"][-1]["content"][-1]["text"]
        assert last == f"<instructions>\nBe terse.\n</instructions>\n\n{prompt}"
        assert result.usage.cache_read_tokens > 0


def test_a_fork_into_a_worktree_is_refused_nothing(
    grove: Grove, sent: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The parent works in a repository of the test's own (its record's workspace): the
    child works in a worktree of it, on the parent's conversation and thinking."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("hello\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    parent = parent_with_thinking(grove)
    store = open_store(grove.settings.store)
    try:
        record = store.get_agent(parent)
        assert record is not None
        store.update_agent(parent, metadata={**record.metadata, "workspace": str(repo)})
    finally:
        store.close()
    (child,) = grove.fork_many(parent, ["Work in a worktree."], workspace="worktree")
    result = answered(grove.wait_turn(child, 60))
    assert result.worktree is not None
    request = first_request(clean(grove, sent), "Work in a worktree.")
    assert len(thinking(request)) == 2
    branches = subprocess.run([*git, "branch"], check=True, capture_output=True, text=True)
    assert f"grove/{child[:8]}" in branches.stdout


def test_an_advisor_reviews_a_5_5_agent_without_refusals(
    grove: Grove, sent: list[dict[str, Any]]
) -> None:
    root = grove.create_root(SONNET).uuid
    assert grove.dispatch(root, "/advisor on").ok
    for prompt in ("first step", "second step", "third step"):
        answered(grove.ask(root, prompt))
        assert grove.wait_reviews(root, 60) == 0
    requests = clean(grove, sent)
    reviews = [r for r in requests if "advise" in [t["name"] for t in r.get("tools", [])]]
    assert len(reviews) >= 3
    assert {r["model"] for r in reviews} == {SONNET.split("/")[0]}
    assert any(thinking(r) for r in reviews)  # the reviewer's own conversation grew


def test_an_mcp_server_that_connects_mid_conversation_changes_no_prefix(
    grove: Grove, sent: list[dict[str, Any]], tmp_path: Path
) -> None:
    """A root made while its MCP server cannot start goes on without its tools; once the
    server starts (another root lists and calls it), the first root's requests keep the
    tools they began with, and so their thinking."""
    server = tmp_path / "late.py"  # not there yet: the server cannot start
    configured = grove.settings
    late = McpServerSection(command=sys.executable, args=[str(server)])
    grove.settings = configured.model_copy(update={"mcp": McpSection(servers={"late": late})})
    try:
        root = grove.create_root(SONNET, tools=[now, "mcp__late"]).uuid
        answered(grove.ask(root, "before the server"))
        shutil.copy(CALC, server)
        other = grove.create_root(SONNET, tools=["mcp__late"]).uuid
        answered(grove.ask(other, sim_call("mcp__late__add", a=1, b=2)))
        answered(grove.ask(root, "after the server"))
    finally:
        grove.settings = configured
    requests = clean(grove, sent)
    added = [r for r in requests if "mcp__late__add" in [t["name"] for t in r["tools"]]]
    assert len(added) == 2  # the other root's call and its answer
    before, after = [
        r for r in requests if r["messages"][0]["content"][0]["text"] == "before the server"
    ]
    assert after["tools"] == before["tools"] == [before["tools"][0]]
    assert [index for index, _ in thinking(after)] == [1]


def test_a_conversation_resumed_by_a_new_process_keeps_its_thinking(
    simulator: SimulatorThread, sent: list[dict[str, Any]], tmp_path: Path
) -> None:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    store = f"sqlite:///{tmp_path / 'resumed.sqlite3'}"
    with running_grove(tmp_path / "a", store_url=store, endpoint=endpoint) as first:
        root = first.create_root(SONNET, tools=[now]).uuid
        answered(first.ask(root, sim_call("now")))
    with running_grove(tmp_path / "b", store_url=store, endpoint=endpoint) as second:
        answered(second.ask(root, "And after that?"))
        requests = clean(second, sent)
    assert [index for index, _ in thinking(requests[-1])] == [1, 3]


def test_a_batch_with_a_shared_context_is_refused_nothing(
    grove: Grove, simulator: SimulatorThread, sent: list[dict[str, Any]], tmp_path: Path
) -> None:
    context = tmp_path / "context.md"
    context.write_text(" ".join(f"fact-{n}" for n in range(1_000)))
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {"id": "a", "prompt": "First task."},
        {"id": "b", "prompt": "Second task.", "system": "Answer in French."},
        {"id": "c", "prompt": "Third task.", "model": OPUS},
    ]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {
        **cli_environment(tmp_path),
        "GROVE_STORE": str(grove.settings.store),
        "ANTHROPIC_BASE_URL": simulator.base_url,
        "ANTHROPIC_API_KEY": KEY,
    }
    out = tmp_path / "out.jsonl"
    args = ["batch", str(tasks), "--context", str(context), "--model", SONNET, "-o", str(out)]
    done = invoke(env, *args)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {record["status"] for record in records} == {"ok"}, records
    clean(grove, sent)


def test_a_refusal_that_still_comes_is_sent_again_without_the_block_once(
    simulator: SimulatorThread, sent: list[dict[str, Any]]
) -> None:
    """A block Grove holds bound to this prefix that the API refuses all the same (here: one
    whose signature the simulator did not make) costs one more request, not the turn: the
    reply says where thinking was left out, which the supervisor records as an event."""
    model = SONNET.split("/")[0]
    provider = HTTPProvider(
        wire_for("anthropic"), lambda: Endpoint(base_url=simulator.base_url, api_key=KEY)
    )
    question = Request(model=model, messages=(Message.user("one"),), system="Be brief.")
    _, prefix = bound("anthropic", question)
    assert prefix is not None
    forged = base64.b64encode(f"simthink1:{model}:{'0' * 64}".encode()).decode()
    block = ThinkingPart(
        text="", signature=forged, provider="anthropic", model=model, prefix=prefix.digest
    )
    answer = Message(role="assistant", parts=(block, TextPart(text="1")))
    request = replace(question, messages=(*question.messages, answer, Message.user("two")))

    async def run() -> list[Any]:
        try:
            return [event async for event in provider.stream(request)]
        finally:
            await provider.aclose()

    events = asyncio.run(run())
    warnings = [e.text for e in events if isinstance(e, ProviderWarning)]
    (finished,) = [e for e in events if isinstance(e, Finished)]
    assert finished.turn.thinking_dropped == "messages.1.content.0"
    assert warnings == [dropped_text("messages.1.content.0")]
    refused, again = sent
    assert refusals([refused]) == [bound_text("messages.1.content.0")]
    assert thinking(again) == [] and refusals([again]) == []
    stored = NewEntry(kind="assistant", content="", data=reply_data(finished.turn))
    assert ("ThinkingDropped", {"agent": "a", "at": "messages.1.content.0"}) in step_events(
        "a", stored
    )
