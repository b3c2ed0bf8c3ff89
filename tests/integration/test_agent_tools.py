"""Agents fanning out by themselves: the fork, send and wait tools over real Ray and the
simulator, under the same rules as the commands, with the runaway-forking limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from grove.supervisor import Grove
from grove.supervisor.store.records import MessageRecord
from tests.integration.groves import running_grove

TOOLS = ("fork", "send", "wait")
FAN_OUT_TASKS = ("check the parser", "check the store", "check the CLI")
ORCHESTRATOR_MODEL = "claude-sonnet-5-5"
WORKER_MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_LIMITS__CHILDREN_PER_AGENT": "3", "GROVE_LIMITS__FORK_DEPTH": "2"}
    with running_grove(tmp_path_factory.mktemp("tools"), env=env) as grove:
        assert grove.settings.limits.children_per_agent == 3
        yield grove


def tool_results(history: list[MessageRecord]) -> list[dict[str, object]]:
    return [part for m in history if m.kind == "tool_result" for part in m.data["parts"]]


def fork_directive(prompt: str) -> str:
    return f"[[sim tool=fork args='{json.dumps({'prompt': prompt})}']] fork please"


def test_fork_tool_starts_a_child_that_inherits_the_conversation(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5", tools=TOOLS)
    assert grove.ask(root.uuid, "some shared context").ok
    result = grove.ask(root.uuid, fork_directive("look into part A"))
    assert result.ok and result.text
    (call_result,) = tool_results(grove.history(root.uuid))
    assert call_result["is_error"] is False
    child = json.loads(str(call_result["content"]))["uuid"]
    record = grove.agent(child)
    assert record.parent_uuid == root.uuid and record.metadata["tools"] == list(TOOLS)
    grove.wait_turn(child, 30)
    history = grove.history(child)
    assert [m.content for m in history[:1]] == ["some shared context"]
    assert ("user", "look into part A") in [(m.kind, m.content) for m in history]
    assert history[-1].kind == "assistant"


def test_fork_limits_stop_runaway_forking(grove: Grove) -> None:
    root = grove.create_root("gpt-6.1-terra", tools=TOOLS)
    for index in range(4):
        assert grove.ask(root.uuid, fork_directive(f"task {index}")).ok
    results = tool_results(grove.history(root.uuid))
    assert [r["is_error"] for r in results] == [False, False, False, True]
    assert "fork refused: this agent already has 3 children; the limit is 3" in str(
        results[3]["content"]
    )
    child = json.loads(str(results[0]["content"]))["uuid"]
    grove.wait_turn(child, 30)
    assert grove.ask(child, fork_directive("deeper")).ok
    (grandchild_result,) = tool_results(grove.history(child))[-1:]
    grandchild = json.loads(str(grandchild_result["content"]))["uuid"]
    grove.wait_turn(grandchild, 30)
    assert grove.ask(grandchild, fork_directive("too deep")).ok
    refused = tool_results(grove.history(grandchild))[-1]
    assert refused["is_error"] is True
    assert "3 levels below its root; the limit is 2" in str(refused["content"])


def test_a_model_forks_three_children_and_combines_their_answers_with_wait(
    grove: Grove,
) -> None:
    # An orchestrating model forks three workers on a smaller model in one reply (step 1),
    # then calls `wait` for its children (step 2), then answers from what `wait` returned.
    # The directives name the orchestrator's model: the workers inherit this prompt too.
    calls = [
        {"name": "fork", "args": {"prompt": task, "model": WORKER_MODEL}} for task in FAN_OUT_TASKS
    ]
    fan_out = (
        f"[[sim model={ORCHESTRATOR_MODEL} calls='{json.dumps(calls)}']] "
        f"[[sim model={ORCHESTRATOR_MODEL} step=2 tool=wait args='{{\"timeout\":60}}']] "
        "split this three ways"
    )
    root = grove.create_root(ORCHESTRATOR_MODEL, tools=TOOLS)
    result = grove.ask(root.uuid, fan_out)
    assert result.ok and result.text
    *forks, waited = tool_results(grove.history(root.uuid))
    assert [call["is_error"] for call in [*forks, waited]] == [False] * 4
    children = [json.loads(str(fork["content"]))["uuid"] for fork in forks]
    assert [grove.agent(child).parent_uuid for child in children] == [root.uuid] * 3
    answers = json.loads(str(waited["content"]))
    assert sorted(answers) == sorted(children)
    tasks = []  # the forks' results are stored as each call ends: in any order
    for child in children:
        history = grove.history(child)
        assert [(m.kind, m.content) for m in history[-3:-2]] == [("user", fan_out)]
        assert history[-2].kind == "user"
        tasks.append(history[-2].content)
        assert history[-1].kind == "assistant" and history[-1].content
        assert answers[child] == {"status": "done", "text": history[-1].content}
    assert sorted(tasks) == sorted(FAN_OUT_TASKS)
    assert result.text not in {answers[child]["text"] for child in children}


def test_send_tool_mails_another_agent(grove: Grove) -> None:
    root = grove.create_root("gemini-3.8-flash", tools=TOOLS)
    other = grove.create_root("gemini-3.8-flash")
    args = json.dumps({"uuid": other.uuid, "message": "status please"})
    assert grove.ask(root.uuid, f"[[sim tool=send args='{args}']] tell them").ok
    mails = [m for m in grove.history(other.uuid) if m.kind == "mail"]
    assert [(m.content, m.data["sender"]) for m in mails] == [("status please", root.uuid)]
