"""The Grove interface does over HTTP what it does locally: what RemoteGrove once lacked
(fork_many's system prompt, advisor, keys and output type; typed send and ask; seed's
messages; create_root's isolation; advice, watch and approvals) reaches the service and gives
what a local Grove gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from grove.providers.errors import GroveError
from grove.server.client import RemoteGrove
from grove.supervisor import Grove
from grove.supervisor.batch.tasks import Task
from grove.supervisor.contract import GroveAPI
from grove.supervisor.store import open_store
from grove.supervisor.store.records import AgentRecord
from tests.integration.groves import running_grove
from tests.integration.services import TIMEOUT_S, Service, service_in_process

MODEL = "claude-haiku-4-5"
VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    with running_grove(tmp_path_factory.mktemp("grove")) as grove:
        yield grove


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, grove: Grove) -> Iterator[Service]:
    with service_in_process(grove, tmp_path_factory.mktemp("served")) as running:
        yield running


@pytest.fixture
def remote(service: Service, monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteGrove]:
    monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
    with RemoteGrove.running() as remote:
        yield remote


def forked(grove: Grove, via: GroveAPI, key: str) -> dict[str, Any]:
    """What `via` makes of a root seeded and forked with every option fork_many has, read
    back from the (shared) store through the local Grove."""
    root = via.create_root(MODEL, isolation="process").uuid
    seeded = via.seed(root, [("user", "The door is red."), ("assistant", "Noted.")])
    options: dict[str, Any] = {
        "system": "Answer as JSON.",
        "advisor": MODEL,
        "keys": [key],
        "workspace": "shared",
        "output_type": VERDICT,
        "output_retries": 1,
    }
    children = via.fork_many(root, ["Is the door red?"], MODEL, **options)
    assert via.fork_many(root, ["Is the door red?"], MODEL, **options) == children  # its key
    (child,) = children
    result = via.wait_turn(child, TIMEOUT_S)
    assert result is not None and result.ok, result
    grove.wait_reviews(child, TIMEOUT_S)
    return {
        "isolation": grove.agent(root).metadata.get("isolation"),
        "seeded": [(message.kind, message.content) for message in seeded],
        "seeded_ids": [message.id for message in grove.history(root)] == [m.id for m in seeded],
        "child_of": grove.agent(child).parent_uuid == root,
        "system": grove.agent(child).metadata.get("system"),
        "reviewers": [agent.role for agent in watchers(grove, child)],
        "advice": [(card.kind, card.content) for card in via.advice(child)],
        "advice_here": [(card.kind, card.content) for card in grove.advice(child)],
        "output": sorted(result.output or {}),
        "output_type": type(result.output).__name__,
    }


def watchers(grove: Grove, agent: str) -> list[AgentRecord]:
    """The reviewers watching `agent`."""
    store = open_store(grove.settings.store)
    try:
        return [
            found for found in store.list_agents(include_ended=True) if found.watched_uuid == agent
        ]
    finally:
        store.close()


def test_fork_many_takes_every_option_through_the_service_as_locally(
    grove: Grove, remote: RemoteGrove
) -> None:
    local = forked(grove, grove, "interface-local")
    served = forked(grove, remote, "interface-served")
    assert {**served, "advice": None, "advice_here": None} == {
        **local,
        "advice": None,
        "advice_here": None,
    }
    for made in (local, served):
        assert made["advice"] == made["advice_here"]  # what the service says is what it holds
    assert local["isolation"] == "process" and local["seeded_ids"] and local["child_of"]
    assert local["seeded"] == [("user", "The door is red."), ("assistant", "Noted.")]
    assert local["system"] == "Answer as JSON." and local["reviewers"] == ["advisor"]
    assert local["output"] == ["ok"] and local["output_type"] == "dict"


def test_a_typed_prompt_answers_typed_through_the_service_as_locally(
    grove: Grove, remote: RemoteGrove
) -> None:
    answers = []
    for via in (grove, remote):
        root = via.create_root(MODEL).uuid
        sent = via.send(root, "Is it fine?", output_type=VERDICT).result(TIMEOUT_S)
        asked = via.ask(root, "And now?", TIMEOUT_S, output_type=VERDICT, output_retries=0)
        plain = via.ask(root, "Say anything.", TIMEOUT_S)
        answers.append([sorted(sent.output), sorted(asked.output), plain.output])
    assert answers == [[["ok"], ["ok"], None]] * 2


def test_watching_and_approvals_answer_through_the_service_as_locally(
    grove: Grove, remote: RemoteGrove
) -> None:
    said = []
    for via in (grove, remote):
        root = via.create_root(MODEL).uuid
        via.attend_approvals(root, True)
        via.attend_approvals(root, False)
        idle = list(via.watch(root))  # no turn in flight: nothing to watch
        grove.send(root, "[[sim tokens=30 tps=30]] Go on.")  # under way, whoever watches
        watched = "".join(text for kind, text in via.watch(root) if kind == "text")
        ended = via.wait_turn(root, TIMEOUT_S)
        assert ended is not None and watched == ended.text != ""
        said.append((idle, via.answer_approval("not-a-request", "y")))
    assert said == [([], "That request is no longer waiting")] * 2


def test_a_forked_childs_turn_is_watched_as_a_roots(grove: Grove, remote: RemoteGrove) -> None:
    """A child that fork_many started streams to whoever watches it, as a root's turn does
    (the supervisor knew its turn had begun only for turns begun one by one)."""
    for via in (grove, remote):
        root = via.create_root(MODEL).uuid
        (child,) = via.fork_many(root, ["[[sim tokens=30 tps=30]] Go on."], MODEL)
        watched = "".join(text for kind, text in via.watch(child) if kind == "text")
        ended = via.wait_turn(child, TIMEOUT_S)
        assert ended is not None and watched == ended.text != ""


def test_fork_options_reach_every_child_as_they_are_both_ways(
    grove: Grove, remote: RemoteGrove
) -> None:
    """ForkOptions' `tools` (the option added last) narrows the children's tools through
    fork_many and run_batch, locally and through the service; a name the parent lacks is
    refused with the fork's own words before any child is stored."""
    kept = []
    vias: tuple[GroveAPI, ...] = (grove, remote)
    for index, via in enumerate(vias):
        root = via.create_root(MODEL, tools=["todo", "fork", "wait"]).uuid
        (child,) = via.fork_many(root, ["Go on."], MODEL, tools=["todo"])
        task = Task(id=1, key="1", line=1, prompt="Go on.")
        steps = via.run_batch(root, [task], key=f"narrowed-{index}", tools=["todo"])
        (record,) = [step for step in steps if step is not None]
        children = [agent for agent in grove_children(grove, root) if agent.uuid != child]
        kept.append((grove.agent(child).metadata["tools"], [c.metadata["tools"] for c in children]))
        before = len(grove_children(grove, root))
        with pytest.raises(GroveError, match="fork refused: the parent has no tool nope"):
            via.fork_many(root, ["Go on."], MODEL, tools=["nope"])
        assert record["status"] == "ok", record["error"]
        assert len(grove_children(grove, root)) == before
    assert kept == [(["todo"], [["todo"]])] * 2


def grove_children(grove: Grove, parent: str) -> list[AgentRecord]:
    store = open_store(grove.settings.store)
    try:
        return [
            found for found in store.list_agents(include_ended=True) if found.parent_uuid == parent
        ]
    finally:
        store.close()
