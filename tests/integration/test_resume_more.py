"""Durable turns, more of SPEC section 14 over a real Ray and the simulator: a built-in read-only
tool cut off by its host's death runs again; a supervisor restart in the middle of a tool step
settles both kinds of call; compaction, a turn budget and an advisor keep working across a
resume. The tool calls that are cut off block until the test lets them go (no fixed sleeps).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import ray

from grove.actors.agent.steps import interrupted_text
from grove.actors.tools.python import tool
from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Budget, Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.store import Store, open_store
from grove.supervisor.store.kinds import SPENT_KIND
from grove.supervisor.usage import subtree, usage_report
from tests.integration.groves import compactions, running_grove, tool_results
from tests.integration.host_kills import events, finish_all, kill_host

KEY = "sim-resume-more-5d2e"
MODEL = "gemini-3.8-flash"  # a window far past the compaction threshold of this module
SMALL_WINDOW_MODEL = "claude-haiku-4-5"  # 200,000 tokens: 0.002 of it is 400
SEARCHED_LINES = 300_000  # a search of them takes a second or more: long enough to be cut off
WAIT = "wait"  # a label ending so blocks its call until the test lets it go


def mark(path: str, label: str) -> str:
    """Record a side effect: append the label to the file; a label ending in WAIT then
    blocks until the file `path` + ".go" exists.

    Args:
        path: the file counting side effects.
        label: which call this is.
    """
    with open(path, "a") as counted:
        counted.write(label + "\n")
    if label.endswith(WAIT):
        deadline = time.monotonic() + 120
        while not os.path.exists(path + ".go") and time.monotonic() < deadline:
            time.sleep(0.02)
    return f"marked {label}"


@tool(idempotent=True)
def mark_again(path: str, label: str) -> str:
    """`mark`, from a tool that declares it safe to run twice."""
    return mark(path, label)


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as running:
        yield running


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hosts' workspace (Grove's working directory when it starts): one large text file
    for `search` to take its time over."""
    root = tmp_path_factory.mktemp("workspace")
    (root / "tree").mkdir()
    (root / "tree" / "lines.txt").write_text("x\n" * SEARCHED_LINES)
    return root


@pytest.fixture(scope="module")
def grove(
    tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorThread, workspace: Path
) -> Iterator[Grove]:
    """One host, so that a reviewer dies with the agent it watches."""
    env = {
        "GROVE_ADVISOR__MODEL": MODEL,
        "GROVE_COMPACTION__THRESHOLD": "0.002",
        "GROVE_COMPACTION__KEEP_RECENT_TOKENS": "100",
        "GROVE_COMPACTION__MODEL": "claude-sonnet-5-5",
        "GROVE_HOSTS__MAX_RESTARTS": "20",
    }
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with ExitStack() as stack:
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(workspace)
            started = running_grove(
                tmp_path_factory.mktemp("grove"), hosts=1, env=env, endpoint=endpoint
            )
            running = stack.enter_context(started)
        yield running


@pytest.fixture
def store(grove: Grove) -> Iterator[Store]:
    opened = open_store(grove.settings.store)
    yield opened
    opened.close()


def three_calls(path: Path, model: str = MODEL) -> str:
    """A task whose replies on `model` call `mark` at steps 1, 2 (blocking) and 3, then
    answer (a summary of it, on `[compaction] model`, is not asked for calls)."""
    calls = [
        f"[[sim tool=mark args='{json.dumps({'path': str(path), 'label': label})}' "
        f"step={step} model={model}]]"
        for step, label in enumerate(("1", f"2{WAIT}", "3"), 1)
    ]
    return f"{' '.join(calls)} Mark three times, then say done."


def wait_for_labels(path: Path, *labels: str) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() or not set(labels) <= set(path.read_text().split()):
        assert time.monotonic() < deadline, f"calls {labels} never started"
        time.sleep(0.02)


def kill_in_the_call(grove: Grove, agent: str, path: Path, label: str) -> None:
    """SIGKILL the agent's host while its call `label` blocks, then let calls go on."""
    wait_for_labels(path, label)
    kill_host(grove, grove.provider_identity(agent)["host"])
    Path(f"{path}.go").touch()


def own_events(store: Store, kind: str, agent: str) -> list[dict[str, Any]]:
    return [e for e in events(store, kind) if e["agent"] == agent]


def sent_with(simulator: SimulatorThread, *texts: str) -> list[dict[str, Any]]:
    """The request bodies the simulator received lately that carry each of `texts`."""
    received = [json.dumps(body) for body in simulator.simulator.received]
    return [json.loads(body) for body in received if all(text in body for text in texts)]


def wait_for_open_file(pid: int, path: Path) -> None:
    """Until the process `pid` has `path` open (a tool call of its is reading it)."""
    deadline = time.monotonic() + 60
    while True:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return
            except OSError:
                continue
        assert time.monotonic() < deadline, f"{path} was never opened"
        time.sleep(0.005)


def test_a_search_cut_off_by_its_hosts_death_runs_again(
    grove: Grove, simulator: SimulatorThread, store: Store, workspace: Path
) -> None:
    """`search` (idempotent, as `read` and `find`) killed while it reads: the resumed turn
    runs it again instead of reporting it interrupted, and sends no answered request again."""
    billed = simulator.simulator.billed["requests"]
    root = grove.create_root(MODEL, tools=["search"]).uuid
    args = json.dumps({"pattern": "needle", "path": "tree"})
    (child,) = grove.fork_many(root, [f"[[sim tool=search args='{args}' step=1]] Look."])
    host = grove.provider_identity(child)["host"]
    wait_for_open_file(grove.host_pids()[host], (workspace / "tree" / "lines.txt").resolve())
    kill_host(grove, host)
    (result,) = finish_all(grove, [child]).values()
    assert result is not None and result.ok, result
    (searched,) = tool_results(grove, child)
    assert (searched["content"], searched["is_error"]) == ("no matches for 'needle' in tree", False)
    assert not own_events(store, "ToolInterrupted", child)
    (called,) = own_events(store, "ToolCalled", child)
    (resulted,) = own_events(store, "ToolResulted", child)
    assert called["tool"] == resulted["tool"] == "search" and resulted.get("rerun") is True
    assert simulator.simulator.billed["requests"] - billed == 2  # the call's reply, the answer


def test_a_resumed_turn_is_not_a_new_turn_of_its_budget(
    grove: Grove, simulator: SimulatorThread, store: Store, tmp_path: Path
) -> None:
    """A tree allowed one turn: its turn, killed in its second call, resumes and finishes (it
    is the same turn, not a second one), a second turn is refused; the tree's usage is what
    was billed, each request once."""
    path = tmp_path / "effects.txt"
    billed = dict(simulator.simulator.billed)
    root = grove.create_root(MODEL, tools=[mark], budget=Budget(turns=1, tokens=100_000)).uuid
    turn = grove.send(root, three_calls(path))
    kill_in_the_call(grove, root, path, f"2{WAIT}")
    result = turn.result(120)
    assert result.ok, result.error
    assert path.read_text().split() == ["1", f"2{WAIT}", "3"]
    with pytest.raises(CommandError, match=r"^Budget exhausted: turns 1/1$"):
        grove.send(root, "another turn")
    record = store.get_agent(root)
    assert record is not None
    recorded = usage_report(store, subtree(store, record)).total
    now = simulator.simulator.billed
    assert (recorded.requests, recorded.input_tokens, recorded.output_tokens) == (
        now["requests"] - billed["requests"],
        now["input_tokens"] - billed["input_tokens"],
        now["output_tokens"] - billed["output_tokens"],
    )
    assert recorded.requests == 4


def message_texts(body: dict[str, Any]) -> list[str]:
    """The text of each message of an Anthropic request (its blocks' texts and results)."""
    texts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        texts.append(
            "\n".join(str(block.get("text") or block.get("content") or "") for block in content)
        )
    return texts


def test_compaction_before_and_at_the_end_of_a_resumed_turn(
    grove: Grove, simulator: SimulatorThread, tmp_path: Path
) -> None:
    """A compacted conversation whose next turn is killed in its second call: the resumed turn
    is sent the summary, the kept messages and the turn's stored steps (spec/compaction.md:
    what the model sees), and its end, past the threshold again, compacts once more, cutting
    before a whole step, never at a tool result."""
    path = tmp_path / "effects.txt"
    root = grove.create_root(SMALL_WINDOW_MODEL, tools=[mark]).uuid
    for n in range(3):
        assert grove.ask(root, f"[[sim tokens=60]] question {n}: " + "words " * 80).ok
    summary, *kept = grove.history(root)
    assert summary.kind == "compaction" and kept
    compacted = len(compactions(grove, root))
    turn = grove.send(root, three_calls(path, SMALL_WINDOW_MODEL))
    kill_in_the_call(grove, root, path, f"2{WAIT}")
    result = turn.result(120)
    assert result.ok, result.error
    assert path.read_text().split() == ["1", f"2{WAIT}", "3"]
    resumed, *_ = sent_with(simulator, interrupted_text("mark"), str(path))
    texts = message_texts(resumed)
    assert not any("question 0" in text for text in texts)  # summarised away
    prompt = texts.index(three_calls(path, SMALL_WINDOW_MODEL))
    context = "\n".join(texts[:prompt])  # the wire merges a summary and a user message
    places = [context.index(message.content) for message in (summary, *kept)]
    assert places == sorted(places)  # the summary, then the kept messages, word for word
    assert texts[prompt + 1 :] == ["", "marked 1", "", interrupted_text("mark")]
    after = compactions(grove, root)[compacted:]
    assert [c["reason"] for c in after] == ["threshold"]
    again, first_kept, *_ = grove.history(root)
    assert again.kind == "compaction" and again.data["first_kept_message_id"] == first_kept.id
    assert first_kept.kind in ("user", "assistant")
    assert grove.ask(root, f"[[sim tokens=5]] and now, {root}?").ok
    (sent,) = sent_with(simulator, f"and now, {root}?")
    assert again.content in message_texts(sent)[0]


def reviewed(grove: Grove, agent: str) -> list[str]:
    """What the agent's reviewer was sent to review, each turn's delta (after its reviews)."""
    assert grove.wait_reviews(agent, 60) == 0
    dump = grove.dispatch(agent, "/advisor dump").text
    return dump.split("[user] New activity in the session you are watching:")[1:]


def test_an_advisor_reviews_a_resumed_turn_once(grove: Grove, tmp_path: Path) -> None:
    """A watched agent's turn killed in its second call, with its reviewer (on the same host):
    the resumed turn finishes, the reviewer, started again, reviews the whole turn once (each
    step once, the cut-off call as interrupted), and its advice is delivered."""
    path = tmp_path / "effects.txt"
    root = grove.create_root(MODEL, tools=[mark]).uuid
    assert grove.dispatch(root, "/advisor on").ok
    advise = json.dumps({"note": "count the marks", "severity": "nit"})
    turn = grove.send(root, f"[[sim@reviewer tool=advise args='{advise}']] {three_calls(path)}")
    kill_in_the_call(grove, root, path, f"2{WAIT}")
    result = turn.result(120)
    assert result.ok, result.error
    (prompt,) = reviewed(grove, root)
    assert prompt.count("Mark three times, then say done.") == 1
    assert prompt.count("**Agent calls `mark`:**") == 3
    assert [prompt.count(f"marked {label}") for label in ("1", "3")] == [1, 1]
    assert prompt.count(interrupted_text("mark")) == 1
    (row,) = grove.dispatch(root, "/advisor status").data["reviewers"]
    assert row["reviews"] == 1
    (card,) = grove.advice(root)
    assert card.content.endswith("- [nit] count the marks")


def test_a_supervisor_restart_in_the_middle_of_a_tool_step(
    grove: Grove, simulator: SimulatorThread, store: Store, tmp_path: Path
) -> None:
    """The supervisor is killed (its hosts go with it) while one step runs two calls: the turn
    resumes after its restart; the call of a tool that is not idempotent gets the interrupted
    result and a ToolInterrupted event, the idempotent one runs again; the agent's reviewer
    watches again and reviews the turn once. (Last in the module: the restart is the whole
    Grove's.)"""
    path = tmp_path / "effects.txt"
    calls = [
        {"name": name, "args": {"path": str(path), "label": label}}
        for name, label in (("mark", f"once-{WAIT}"), ("mark_again", f"again-{WAIT}"))
    ]
    prompt = f"[[sim calls='{json.dumps(calls)}' step=1]] Mark twice at once, then say done."
    root = grove.create_root(MODEL, tools=[mark, mark_again]).uuid
    (child,) = grove.fork_many(root, [prompt], advisor=MODEL)
    wait_for_labels(path, f"once-{WAIT}", f"again-{WAIT}")
    hosts = grove.host_pids().values()
    ray.kill(grove.supervisor, no_restart=False)
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for pid in hosts):
        assert time.monotonic() < deadline, "the hosts outlived their supervisor"
        time.sleep(0.05)
    Path(f"{path}.go").touch()
    (result,) = finish_all(grove, [child]).values()
    assert result is not None and result.ok, result
    assert sorted(path.read_text().split()) == [f"again-{WAIT}", f"again-{WAIT}", f"once-{WAIT}"]
    assert [m.kind for m in store.agent_messages(child) if m.kind != SPENT_KIND] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    results = {part["name"]: part for part in tool_results(grove, child)}
    assert results["mark"]["content"] == interrupted_text("mark") and results["mark"]["is_error"]
    assert results["mark_again"]["content"] == f"marked again-{WAIT}"
    assert [e["tool"] for e in own_events(store, "ToolInterrupted", child)] == ["mark"]
    (rerun,) = own_events(store, "ToolResulted", child)
    assert rerun["tool"] == "mark_again" and rerun.get("rerun") is True
    asked = [b for b in sent_with(simulator, str(path)) if '"name": "advise"' not in json.dumps(b)]
    assert len(asked) == 2  # the step's request and the answer's: none answered sent again
    (review,) = reviewed(grove, child)
    assert review.count("Mark twice at once") == review.count(interrupted_text("mark")) == 1
