"""OpenTelemetry traces over real Ray and the simulator, received by a real OTLP/HTTP receiver
(tests/otlp.py): a root's whole tree is one trace with the right parent links and the GenAI
attributes, a batch is one trace, and a killed host's retried turns stay in their trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from grove.cli.context import NO_SERVICE_ENV
from grove.server.files import ServiceState, remove_state, service_token, write_state
from grove.supervisor import Grove
from grove.supervisor.store import open_store
from tests.integration.groves import cli_environment, running_grove
from tests.integration.host_kills import events, finish_all, kill_host
from tests.integration.services import app_served
from tests.otlp import ReceivedSpan, Receiver, otlp_receiver

ROOT_MODEL = "claude-sonnet-5-5"
CHILD_TASKS = ("alpha", "beta")
CLIENT, INTERNAL = 3, 1  # OTLP span kinds


def lookup(key: str) -> str:
    """Look a key up in the inventory."""
    return f"{key}: 3 in stock"


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as received:
        yield received


@pytest.fixture(scope="module")
def grove(receiver: Receiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_TELEMETRY__OTLP_ENDPOINT": receiver.endpoint, "GROVE_HOSTS__MAX_RESTARTS": "20"}
    with running_grove(tmp_path_factory.mktemp("tracing"), env=env) as grove:
        assert grove.traced
        yield grove


def in_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.trace_id == trace_id]


def named(spans: list[ReceivedSpan], name: str, agent: str | None = None) -> list[ReceivedSpan]:
    return [
        span
        for span in spans
        if span.name == name and agent in (None, span.attributes.get("grove.agent.id"))
    ]


def root_span(receiver: Receiver, root: str) -> ReceivedSpan:
    """The root's `create_agent` span (sent once the supervisor flushed)."""
    spans = receiver.wait_for(lambda spans: bool(named(spans, "create_agent", root)))
    (created,) = named(spans, "create_agent", root)
    return created


def fan_out_prompt() -> str:
    """The root forks one child per task in one reply; each child calls `lookup` first."""
    calls = [
        {
            "name": "fork",
            "args": {
                "prompt": f"[[sim tool=lookup args='{json.dumps({'key': task})}' step=1]] {task}"
            },
        }
        for task in CHILD_TASKS
    ]
    quoted = json.dumps(calls).replace("'", "\\'")
    return f"[[sim calls='{quoted}' step=1]] split the work"


def test_a_tree_of_forked_children_calling_tools_is_one_trace(
    grove: Grove, receiver: Receiver
) -> None:
    root = grove.create_root(ROOT_MODEL, tools=["fork", lookup])
    assert grove.ask(root.uuid, fan_out_prompt()).ok
    children = [json.loads(part["content"])["uuid"] for part in _tool_parts(grove, root.uuid)]
    assert len(children) == len(CHILD_TASKS)
    for child in children:
        result = grove.wait_turn(child, 60)
        assert result is not None and result.ok
    grove.flush_telemetry()
    created = root_span(receiver, root.uuid)
    spans = receiver.wait_for(
        lambda spans: len(named(in_trace(spans, created.trace_id), "execute_tool lookup")) == 2
    )
    tree = in_trace(spans, created.trace_id)
    by_id = {span.span_id: span for span in tree}
    assert created.parent == "" and created.service == "grove"
    assert created.attributes["gen_ai.operation.name"] == "create_agent"
    assert created.attributes["grove.root.id"] == root.uuid

    (root_turn,) = named(tree, "invoke_agent", root.uuid)
    assert root_turn.parent == created.span_id
    forks = named(tree, "execute_tool fork", root.uuid)
    assert len(forks) == 2 and {fork.parent for fork in forks} == {root_turn.span_id}
    root_chats = named(tree, f"chat {ROOT_MODEL}", root.uuid)
    assert len(root_chats) == 2 and {chat.parent for chat in root_chats} == {root_turn.span_id}

    child_turns = [span for child in children for span in named(tree, "invoke_agent", child)]
    assert len(child_turns) == 2
    assert sorted(turn.parent for turn in child_turns) == sorted(fork.span_id for fork in forks)
    for turn in child_turns:
        agent = turn.attributes["grove.agent.id"]
        (tool,) = named(tree, "execute_tool lookup", agent)
        assert tool.parent == turn.span_id and tool.kind == INTERNAL
        assert tool.attributes["gen_ai.tool.name"] == "lookup"
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.call.id"]
        chats = named(tree, f"chat {ROOT_MODEL}", agent)
        assert len(chats) == 2 and {chat.parent for chat in chats} == {turn.span_id}

    for span in tree:
        assert span.attributes["grove.root.id"] == root.uuid
        parent = by_id.get(span.parent)
        assert span is created or parent is not None, f"{span.name} has no parent in the trace"
    for chat in named(tree, f"chat {ROOT_MODEL}"):
        attributes = chat.attributes
        assert chat.kind == CLIENT and chat.status_code != 2
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "anthropic"
        assert attributes["gen_ai.request.model"] == ROOT_MODEL
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.usage.cache_read.input_tokens" in attributes
        assert "gen_ai.usage.cache_creation.input_tokens" in attributes
        assert attributes["gen_ai.response.finish_reasons"]
    assert root_turn.attributes["gen_ai.usage.input_tokens"] == sum(
        chat.attributes["gen_ai.usage.input_tokens"] for chat in root_chats
    )


def test_a_root_made_inside_a_callers_span_joins_its_trace(
    grove: Grove, receiver: Receiver
) -> None:
    trace_id, span_id = 0x5EED << 64 | 0xC0FFEE, 0xFEED
    caller = SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(caller)):
        root = grove.create_root("gpt-6.1-terra")
    assert grove.ask(root.uuid, "hello").ok
    grove.flush_telemetry()
    created = root_span(receiver, root.uuid)
    assert (created.trace_id, created.parent) == (f"{trace_id:032x}", f"{span_id:016x}")
    spans = receiver.wait_for(lambda spans: bool(named(spans, "chat gpt-6.1-terra", root.uuid)))
    (chat,) = named(spans, "chat gpt-6.1-terra", root.uuid)
    assert chat.trace_id == created.trace_id
    assert chat.attributes["gen_ai.provider.name"] == "openai"


def test_a_killed_hosts_retried_turns_stay_in_their_trace(grove: Grove, receiver: Receiver) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    prompts = [f"[[sim tps=20 tokens=40]] slow {index}" for index in range(20)]
    restarts = len(_events(grove, "HostRestarted"))
    children = grove.fork_many(root, prompts)
    victim = grove.provider_identity(children[0])["host"]
    time.sleep(1.0)
    kill_host(grove, victim)
    results = finish_all(grove, children)
    assert all(result is not None and result.ok for result in results.values())
    assert len(_events(grove, "HostRestarted")) > restarts
    interrupted = {e["agent"] for e in _events(grove, "TurnInterrupted")} & set(children)
    assert children[0] in interrupted
    grove.flush_telemetry()
    created = root_span(receiver, root)

    def every_child_answered(spans: list[ReceivedSpan]) -> bool:
        ended = {s.attributes["grove.agent.id"] for s in named(spans, "invoke_agent")}
        return set(children) <= ended

    spans = receiver.wait_for(every_child_answered)
    turns = [s for s in named(spans, "invoke_agent") if s.attributes["grove.agent.id"] in children]
    assert {turn.trace_id for turn in turns} == {created.trace_id}
    assert {turn.parent for turn in turns} == {created.span_id}
    retried = [turn for turn in turns if turn.attributes["grove.agent.id"] in interrupted]
    assert retried and all(turn.status_code != 2 for turn in retried)


def test_a_batch_is_one_trace_flushed_when_the_command_exits(
    receiver: Receiver, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": i, "prompt": f"task {i}"}) + "\n" for i in range(6)))
    env = cli_environment(tmp_path) | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "batch-under-test",
    }
    command = ["batch", str(tasks), "--simulate", "--model", "gpt-6.1-terra"]
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "tasks.out.jsonl").read_text().splitlines()]
    agents = {record["agent"] for record in records if record["status"] == "ok"}
    assert len(agents) == 6
    spans = [span for span in receiver.spans() if span.service == "batch-under-test"]
    turns = [s for s in named(spans, "invoke_agent") if s.attributes["grove.agent.id"] in agents]
    assert len(turns) == 6, Counter(span.name for span in spans)
    (trace_id,) = {turn.trace_id for turn in turns}
    (created,) = [span for span in named(spans, "create_agent") if span.trace_id == trace_id]
    assert {turn.parent for turn in turns} == {created.span_id}
    assert len(named(in_trace(spans, trace_id), "chat gpt-6.1-terra")) == 6


def _tool_parts(grove: Grove, agent: str) -> list[dict[str, str]]:
    return [
        part
        for message in grove.history(agent)
        if message.kind == "tool_result"
        for part in message.data["parts"]
    ]


def _events(grove: Grove, kind: str) -> list[dict[str, object]]:
    store = open_store(grove.settings.store)
    try:
        return events(store, kind)
    finally:
        store.close()


def test_a_command_refuses_an_exporter_grove_cannot_follow_before_starting(
    tmp_path: Path,
) -> None:
    env = cli_environment(tmp_path) | {"OTEL_TRACES_EXPORTER": "zipkin"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grove.cli.app",
            "run",
            "--simulate",
            "--model",
            "gpt-6.1-terra",
            "hi",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "OTEL_TRACES_EXPORTER=zipkin: Grove exports traces over OTLP (otlp), prints them "
        "(console, or a file with GROVE_TRACES_FILE), or neither (none)"
    )


@pytest.mark.parametrize(
    "printed", [{"OTEL_TRACES_EXPORTER": "console"}, {"GROVE_TRACES_FILE": "traces.jsonl"}]
)
def test_a_trace_seen_without_a_collector(printed: dict[str, str], tmp_path: Path) -> None:
    """`grove run` with the console exporter prints its spans on stderr, one JSON object a
    line as the SDK's console exporter writes them (the answer alone on stdout); with
    GROVE_TRACES_FILE they go to that file. The hosts' spans among them: Ray's workers send
    them to the command, which prints them."""
    env = cli_environment(tmp_path) | printed | {"GROVE_NO_SERVICE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "run", "--simulate", "--model", ROOT_MODEL,
         "[[sim reply=hello]] hi"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    if "GROVE_TRACES_FILE" in printed:
        assert done.stderr == ""
        lines = (tmp_path / printed["GROVE_TRACES_FILE"]).read_text().splitlines()
    else:
        lines = done.stderr.splitlines()
    spans = {span["name"]: span for span in map(json.loads, lines)}
    assert sorted(spans) == ["chat " + ROOT_MODEL, "create_agent", "invoke_agent"]
    created, turn, chat = spans["create_agent"], spans["invoke_agent"], spans["chat " + ROOT_MODEL]
    assert {span["context"]["trace_id"] for span in spans.values()} == {
        created["context"]["trace_id"]
    }
    assert created["parent_id"] is None
    assert turn["parent_id"] == created["context"]["span_id"]
    assert chat["parent_id"] == turn["context"]["span_id"]
    assert chat["kind"] == "SpanKind.CLIENT"
    assert chat["attributes"]["gen_ai.request.model"] == ROOT_MODEL
    assert chat["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert turn["resource"]["attributes"]["service.name"] == "grove"


def test_a_command_printing_its_trace_runs_a_grove_of_its_own_beside_a_service(
    grove: Grove, tmp_path: Path
) -> None:
    """With a service up, a command would run on it and its spans be printed in the service's
    log: one asked to print them runs a Grove of its own, as with --store."""
    config = tmp_path / "config" / "grove"
    env = cli_environment(tmp_path) | {
        "GROVE_STORE": str(grove.settings.store),
        NO_SERVICE_ENV: "0",
    }
    command = [
        sys.executable,
        "-m",
        "grove.cli.app",
        "run",
        "--simulate",
        "--model",
        ROOT_MODEL,
        "[[sim reply=hello]] hi",
    ]
    with app_served(grove, service_token(config), config / "batches") as port:
        write_state(
            ServiceState(os.getpid(), "127.0.0.1", port, time.time(), simulate=True), config
        )
        try:
            served, printed = (
                subprocess.run(
                    command,
                    cwd=tmp_path,
                    env=env | more,
                    capture_output=True,
                    text=True,
                    timeout=240,
                    check=False,
                )
                for more in ({}, {"OTEL_TRACES_EXPORTER": "console"})
            )
        finally:
            remove_state(os.getpid(), config)
    assert (served.returncode, served.stdout, served.stderr) == (0, "hello\n", "")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == "hello\n"
    names = {json.loads(line)["name"] for line in printed.stderr.splitlines()}
    assert names == {"create_agent", "invoke_agent", "chat " + ROOT_MODEL}
