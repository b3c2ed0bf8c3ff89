"""User Python tools end to end over Ray and the simulator: a function, a module from a local
file and a `package.module:attr` spec go with the agent to its host; validation errors and
exceptions come back as error results; one step's calls run at once; bad tools fail early.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.supervisor import Grove
from grove.supervisor.approvals import ApprovalRequest
from grove.supervisor.errors import CommandError
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove
from tests.integration.groves import sim_call as call
from tests.integration.groves import tool_results as results

MODEL = "claude-haiku-4-5"
LOCAL_MODULE = '''
"""A user's tools, in a file no installed package has."""
import os
import time
from pathlib import Path

SUFFIX = "(from a local file)"
LOG = Path("@LOG@")  # what the tools did, a line each, in order (the fixture says where)


def log(line: str) -> None:
    with LOG.open("a") as happened:
        happened.write(line + "\\n")


def forecast(city: str, days: int = 1) -> str:
    """The weather in a city.

    Args:
        city: Where.
        days: How far ahead.
    """
    return f"{city}: sunny for {days} day(s) {SUFFIX}"


def nap(label: str) -> str:
    """Sleep a moment and say which call it was."""
    log(f"begin {label}")
    time.sleep(1.5)
    log(f"end {label}")
    return label


def hold(release: str) -> str:
    """Block the calling thread until the file `release` exists (a minute at most)."""
    log("hold began")
    deadline = time.monotonic() + 60
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    log("hold ended")
    return "held"
'''


def shout(text: str) -> str:
    """Say it louder."""
    if text == "boom":
        raise ValueError("cannot shout that")
    return text.upper() + "!"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the local tool module and of the log its tools write."""
    workspace = tmp_path_factory.mktemp("tools")
    module = LOCAL_MODULE.replace("@LOG@", str(workspace / "happened.log"))
    (workspace / "weather_tools.py").write_text(module)
    return workspace


def happened(workspace: Path) -> list[str]:
    """What the local module's tools logged so far, in order; the log is emptied."""
    log = workspace / "happened.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


@pytest.fixture(scope="module")
def grove(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workspace)
        with running_grove(tmp_path_factory.mktemp("store")) as grove:
            yield grove


def test_a_function_and_a_local_module_run_on_the_host(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=[shout, "weather_tools:forecast"]).uuid
    assert grove.ask(root, call("shout", text="hello")).ok
    assert grove.ask(root, call("forecast", city="Oslo", days=2)).ok
    shouted, forecast = results(grove, root)
    assert (shouted["content"], shouted["is_error"]) == ("HELLO!", False)
    assert forecast["content"] == "Oslo: sunny for 2 day(s) (from a local file)"
    assert grove.agent(root).metadata["tools"] == ["shout", "forecast"]


def test_bad_arguments_and_exceptions_are_error_results_and_the_agent_goes_on(
    grove: Grove,
) -> None:
    root = grove.create_root(MODEL, tools=[shout]).uuid
    assert grove.ask(root, call("shout", words="x")).ok
    assert grove.ask(root, call("shout", text="boom")).ok
    assert grove.ask(root, call("shout", text="fine")).ok
    invalid, failed, fine = results(grove, root)
    assert invalid["is_error"] and invalid["content"].startswith("Invalid arguments for shout: ")
    assert "text: Field required" in invalid["content"]
    assert "words: Extra inputs are not permitted" in invalid["content"]
    assert (failed["content"], failed["is_error"]) == ("ValueError: cannot shout that", True)
    assert fine["content"] == "FINE!"


def test_the_calls_of_one_step_run_at_once(grove: Grove, workspace: Path) -> None:
    """Both calls have begun before either ends (one after the other would end the first
    before the second began)."""
    root = grove.create_root(MODEL, tools=["weather_tools:nap"]).uuid
    calls = json.dumps([{"name": "nap", "args": {"label": label}} for label in "ab"])
    happened(workspace)
    assert grove.ask(root, f"[[sim calls='{calls}' step=1]] both").ok
    # each result is stored as its call ends: in the order they ended
    assert sorted(r["content"] for r in results(grove, root)) == ["a", "b"]
    order = happened(workspace)
    assert sorted(order[:2]) == ["begin a", "begin b"], order
    assert sorted(order[2:]) == ["end a", "end b"], order


def test_a_blocking_sync_tool_does_not_stop_another_agent_streaming_on_its_host(
    grove: Grove, workspace: Path
) -> None:
    """A tool blocks its thread until the test releases it; meanwhile another agent on the
    same host streams its whole reply. Were the host's loop blocked, that reply could not end
    before the release."""

    def started(tools: list[str]) -> str:
        uuid = grove.create_root(MODEL, tools=tools).uuid
        assert grove.ask(uuid, "hello").ok  # placed on a host and active there
        return uuid

    holder = started(["weather_tools:hold"])
    host_pid = grove.provider_identity(holder)["pid"]
    for _ in range(4):  # placement is least-loaded: within a few, one lands on the same host
        streamer = started([])
        if grove.provider_identity(streamer)["pid"] == host_pid:
            break
    assert grove.provider_identity(streamer)["pid"] == host_pid
    release = workspace / "release"
    happened(workspace)
    held = grove.send(holder, call("hold", release=str(release)))
    deadline = time.monotonic() + 60
    log = workspace / "happened.log"
    while not log.exists() or "hold began" not in log.read_text():
        assert time.monotonic() < deadline, "the hold never began"
        time.sleep(0.05)
    streamed = list(grove.send(streamer, "[[sim tps=20 tokens=50]] stream while the other waits"))
    assert happened(workspace) == ["hold began"]  # the whole reply came while it held
    release.touch()
    assert held.result().ok and results(grove, holder)[-1]["content"] == "held"
    assert happened(workspace) == ["hold ended"]
    assert len(streamed) > 10  # streamed, not sent whole


def test_tools_that_cannot_be_given_fail_at_create_root(grove: Grove) -> None:
    def untyped(*args: int) -> str:
        return ""

    cases = {
        "no_such_tool": "unknown tool 'no_such_tool': the built-in tools are",
        "weather_tools:missing": "tool spec 'weather_tools:missing': weather_tools has no missing",
        "not a spec:x": "tool spec 'not a spec:x' is not 'package.module:attr'",
        "nowhere_module:f": "cannot import nowhere_module",
    }
    for spec, text in cases.items():
        with pytest.raises(CommandError) as caught:
            grove.create_root(MODEL, tools=[spec])
        assert text in str(caught.value), spec
    with pytest.raises(CommandError, match=r"tool untyped: \*args and \*\*kwargs"):
        grove.create_root(MODEL, tools=[untyped])
    with pytest.raises(CommandError, match="two tools are named shout"):
        grove.create_root(MODEL, tools=[shout, shout])


def test_workspace_tools_follow_the_policy_where_nobody_can_answer(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=["write", "bash", "read"], allow=["bash"]).uuid
    policy = grove.agent(root).metadata["tool_policy"]
    assert policy == {"write": "ask", "bash": "allow", "read": "allow"}
    assert grove.ask(root, call("write", path="out.txt", content="hello")).ok
    assert grove.ask(root, call("bash", command="echo made > out.txt; cat out.txt")).ok
    assert grove.ask(root, call("read", path="out.txt")).ok
    refused, ran, read = results(grove, root)
    assert refused["is_error"] is True
    assert refused["content"] == (
        "Tool write needs approval and nobody can give it here. To allow it, pass "
        '--allow write or set [tools.policy] write = "allow" in the config.'
    )
    assert (ran["content"], ran["is_error"]) == ("exit code 0\nmade\n", False)
    assert read["content"] == "1\tmade"


def test_a_fork_narrows_the_tools_it_inherits_and_never_widens_them(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=[shout, "fork", "wait"]).uuid
    task = json.dumps({"prompt": call("shout", text="child"), "tools": ["shout"]})
    escaped = task.replace("'", "\\'")  # a quote inside a quoted directive value
    assert grove.ask(root, f"[[sim tool=fork args='{escaped}' step=1]] go").ok
    assert grove.ask(root, call("fork", prompt="more", tools=["shout", "bash"])).ok
    forked, widened = results(grove, root)
    assert widened["is_error"] is True
    assert (
        "fork refused: the parent has no tool bash; a child gets only tools its parent has"
        in (widened["content"])
    )
    child = json.loads(forked["content"])["uuid"]
    assert grove.agent(child).metadata["tools"] == ["shout"]
    grove.wait_turn(child, 60)
    (shouted,) = results(grove, child)[-1:]
    assert (shouted["content"], shouted["is_error"]) == ("CHILD!", False)
    assert len(grove.agent(root).metadata.get("tool_sources", {})) == 1
    assert "tool_sources" not in grove.agent(child).metadata  # the code stays with the root


def test_the_todo_tool_keeps_each_agents_list_in_the_store(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=["todo", "fork"]).uuid
    plan = [{"phase": "Build", "items": ["parse", "store"]}, {"phase": "Ship", "items": ["tag"]}]
    assert grove.ask(root, call("todo", ops=[{"op": "init", "list": plan}])).ok
    assert grove.ask(root, call("todo", ops=[{"op": "done", "task": "parse"}])).ok
    assert grove.ask(root, call("todo", ops=[{"op": "rm", "task": "ghost"}])).ok
    created, done, failed = results(grove, root)
    assert created["content"].startswith("Remaining: 3 of 3 tasks\n- [/] parse")
    assert "Current phase: Build (1/2 done)" in done["content"]
    assert failed["is_error"] and failed["content"].startswith('Errors: Task "ghost" not found')
    store = open_store(grove.settings.store)
    try:
        events = store.events(after_id=0, limit=100_000)
    finally:
        store.close()
    completed = [
        e.payload["completed_tasks"]
        for e in events
        if e.kind == "TodoUpdated" and e.payload["agent"] == root
    ]
    assert completed[:2] == [[], [{"content": "parse", "phase": "Build"}]]  # completedTasks
    shown = grove.dispatch(root, "/todo")
    assert shown.text == "# Build\n- [x] parse\n- [/] store\n\n# Ship\n- [ ] tag"
    assert grove.ask(root, call("fork", prompt="help out")).ok
    child = json.loads(results(grove, root)[-1]["content"])["uuid"]
    grove.dispatch(root, f"/switch {child}")
    assert grove.dispatch(root, "/todo").text == "The todo list is empty"


def test_tool_calls_and_results_are_events_with_durations_and_details(grove: Grove) -> None:
    root = grove.create_root(MODEL, tools=[shout]).uuid
    assert grove.ask(root, call("shout", text="boom")).ok
    (failed,) = results(grove, root)
    store = open_store(grove.settings.store)
    try:
        kinds = [
            (event.kind, event.payload)
            for event in store.events(after_id=0, limit=100_000)
            if event.payload.get("agent") == root and event.kind.startswith("Tool")
        ]
    finally:
        store.close()
    (called, resulted) = kinds
    assert called == ("ToolCalled", {"agent": root, "tool": "shout", "call_id": failed["call_id"]})
    assert resulted[0] == "ToolResulted"
    assert resulted[1]["is_error"] is True and resulted[1]["duration_ms"] >= 0
    assert "ValueError: cannot shout that" in resulted[1]["detail"]  # the traceback
    assert "Traceback" not in failed["content"]


def test_an_approver_answers_for_the_tools_to_ask_about(grove: Grove) -> None:
    asked: list[tuple[str, str]] = []
    answers = iter(["n", "a"])

    def approver(request: ApprovalRequest) -> str:
        asked.append((request.tool, request.arguments))
        return next(answers)

    root = grove.create_root(MODEL, tools=["write"], approver=approver).uuid
    for content in ("one", "two", "three"):
        assert grove.ask(root, call("write", path=f"{content}.txt", content=content)).ok
    refused, approved, remembered = results(grove, root)
    assert (refused["content"], refused["is_error"]) == (
        "The user did not allow write this time.",
        True,
    )
    assert approved["content"] == "created two.txt (3 bytes)"
    assert remembered["content"] == "created three.txt (5 bytes)"  # "a": not asked again
    assert [tool for tool, _ in asked] == ["write", "write"]
    assert json.loads(asked[0][1]) == {"path": "one.txt", "content": "one"}
    assert Path("two.txt").read_text() == "two" and not Path("one.txt").exists()
