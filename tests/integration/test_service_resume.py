"""Durable turns in the service: a turn sent over HTTP whose host is SIGKILLed in its second tool
call resumes, its prompter's and a watcher's event streams following it to its end; a batch goes
on through a restart of the service (killed with SIGKILL mid-batch), each task finished once and
no side effect repeated, its `grove batch` following it there to its end; a turn a stopped
Grove cut off ends before the next asks to its agent.
"""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from grove.actors.turn_result import TurnResult
from grove.cli.context import NO_SERVICE_ENV
from grove.providers.http import Endpoint
from grove.server.files import read_state
from grove.server.service_link import healthy
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import AsyncGrove, Grove
from grove.supervisor.store import open_store
from grove.supervisor.turns import calls_tools
from tests.conftest import free_loopback_port
from tests.integration.groves import cli_environment, running_grove
from tests.integration.host_kills import events, host_died_index, kill_host, wait_for_event
from tests.integration.services import app_served
from tests.integration.test_durable_turns import SLOW_LABEL, mark, three_calls, wait_for_label

MARK = "tests.integration.test_durable_turns:mark"
START_S = 180
KEY = "sim-service-resume-5d2a"
TOKEN = "service-resume-token"
CONVERSATION = ("user", "assistant", "tool_result")


@dataclass(frozen=True)
class Served:
    """A Grove on a simulator of its own, and the service's API over it, in this process."""

    grove: Grove
    simulator: SimulatorThread
    url: str

    def api(self) -> httpx.Client:
        headers = {"authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("served")
    with (
        SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as simulator,
        running_grove(base, endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY)) as grove,
        app_served(grove, TOKEN, base / "batches") as port,
    ):
        yield Served(grove, simulator, f"http://127.0.0.1:{port}")


def sse(served: Served, method: str, path: str, body: Any, into: list[tuple[str, Any]]) -> None:
    """Read a Server-Sent Events answer to its end: each (event, its data as JSON) goes
    `into` the list as it comes."""
    event = "message"
    with served.api() as api, api.stream(method, path, json=body) as answer:
        for line in answer.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                into.append((event, json.loads(line[5:])))


def reading(served: Served, method: str, path: str, body: Any = None) -> Reader:
    """`sse` in a thread of its own, started."""
    found: list[tuple[str, Any]] = []
    thread = threading.Thread(target=sse, args=(served, method, path, body, found))
    thread.start()
    return Reader(thread, found)


@dataclass(frozen=True)
class Reader:
    thread: threading.Thread
    found: list[tuple[str, Any]]

    def wait_for_one(self) -> None:
        deadline = time.monotonic() + 60
        while not self.found:
            assert time.monotonic() < deadline, "nothing came"
            time.sleep(0.02)

    def deltas(self) -> list[tuple[str, str]]:
        self.thread.join(120)
        assert not self.thread.is_alive()
        return [(data["kind"], data["text"]) for event, data in self.found if event == "delta"]


def test_a_service_turn_resumes_and_its_event_streams_follow_it(
    served: Served, tmp_path: Path
) -> None:
    """A turn prompted over HTTP with `stream` (as `grove run` through the service) and
    watched from another connection (as the dashboard does), its host SIGKILLed during the
    second of three side-effecting calls: the turn resumes from its last stored step on a new
    host, and both streams get the notice, then the resumed turn to its end."""
    path = tmp_path / "effects.txt"
    with served.api() as api:
        made = api.post("/api/roots", json={"model": "claude-haiku-4-5", "tools": [MARK]})
    assert made.status_code == 201, made.text
    root = made.json()["uuid"]
    # each reply takes a while: the resumed turn is still running when the late reader comes
    slow = three_calls("mark", path).replace(" step=", " ttft_ms=700 step=")
    body = {"text": f"{slow} [[sim ttft_ms=700 step=4]]", "stream": True}
    prompter = reading(served, "POST", f"/api/agents/{root}/prompts", body)
    wait_for_label(path, "1")  # the turn is under way: a watcher is shown it from its start
    watcher = reading(served, "GET", f"/api/agents/{root}/stream")
    watcher.wait_for_one()
    wait_for_label(path, SLOW_LABEL)
    kill_host(served.grove, served.grove.provider_identity(root)["host"])
    store = open_store(served.grove.settings.store)
    try:
        wait_for_event(store, "TurnInterrupted", 1)  # between hosts, or resumed by now
    finally:
        store.close()
    late = reading(served, "GET", f"/api/agents/{root}/stream")  # a dashboard opened now
    readers = {"prompter": prompter, "watcher": watcher, "late": late}
    deltas = {name: reader.deltas() for name, reader in readers.items()}
    assert prompter.found[-1][0] == "result"
    assert watcher.found[-1][0] == "end" and late.found[-1][0] == "end"
    result = prompter.found[-1][1]
    assert result["ok"], result
    assert path.read_text().split() == ["1", "2", "3"]  # each side effect once
    assert served.simulator.simulator.billed["requests"] == 4  # none answered sent again
    for name in ("prompter", "watcher"):
        assert host_died_index(deltas[name]) is not None, name
    for name, found in deltas.items():
        died = host_died_index(found)
        after = found if died is None else found[died + 1 :]
        assert any(kind == "tool_call" and '"3"' in text for kind, text in after), name
        assert "".join(text for kind, text in after if kind == "text") == result["text"], name


def started_service(base: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """The service's own process (what `grove up` starts in the background), once it answers."""
    with (base / "service.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "grove.server.main", "--simulate", "--port", str(port)],
            env=env, cwd=base, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + START_S
    while (state := read_state(base / "config" / "grove")) is None or state.pid != process.pid:
        assert process.poll() is None, (base / "service.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "the service did not start"
        time.sleep(0.2)
    assert healthy(state)
    return process


@contextmanager
def stopped_at_the_end(*processes: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """Whatever happens, the processes in these lists are stopped (SIGTERM, then SIGKILL)."""
    try:
        yield
    finally:
        for process in [process for started in processes for process in started]:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def api_of(base: Path, port: int) -> httpx.Client:
    """The HTTP API of the service started in `base`."""
    token = (base / "config" / "grove" / "service-token").read_text().strip()
    headers = {"authorization": f"Bearer {token}"}
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=120)


def prompted(base: Path, port: int, agent: str, text: str) -> httpx.Response | None:
    """The answer to a prompt over HTTP (None: the service went away before answering)."""
    with api_of(base, port) as api:
        try:
            return api.post(f"/api/agents/{agent}/prompts", json={"text": text})
        except httpx.TransportError:
            return None


def ids(path: Path) -> list[object]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_a_batch_goes_on_through_restarts_of_the_service(tmp_path: Path) -> None:
    """Two quick tasks, then four calling a side-effecting tool three times each, two at a
    time. The service is stopped (SIGTERM, as `grove down` does) while the first two are in
    their second call, started again, then SIGKILLed while the last two are, and a root's
    turn calling the tool is too. Each start runs the rest of the batch from its records and
    the store: the cut-off turns resume from their last stored step, and `grove batch`
    follows the batch through both to its end. The root's cut-off turn resumes and ends
    before its next prompt."""
    # Its turns wait on tools; `grove batch` follows the service (the suite's default runs
    # commands in-process).
    env = {**cli_environment(tmp_path), "GROVE_HOSTS__COUNT": "1", NO_SERVICE_ENV: "0"}
    port = free_loopback_port()
    effects = [tmp_path / f"effects{n}.txt" for n in range(4)]
    chat_effects = tmp_path / "chat-effects.txt"
    tasks: list[dict[str, object]] = [
        {"id": f"q{n}", "prompt": f"[[sim tokens=3]] quick {n}"} for n in range(2)
    ]
    tasks += [{"id": n, "prompt": three_calls("mark", path)} for n, path in enumerate(effects)]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    batch = [sys.executable, "-m", "grove.cli.entry", "batch", str(tasks_file)]
    options = ["--model", "claude-haiku-4-5", "--tools", MARK, "-c", "2"]
    services: list[subprocess.Popen[bytes]] = []
    followers: list[subprocess.Popen[bytes]] = []
    with stopped_at_the_end(followers, services):
        services.append(started_service(tmp_path, env, port))
        with api_of(tmp_path, port) as api:
            made = api.post("/api/roots", json={"model": "claude-haiku-4-5", "tools": [MARK]})
        root = made.json()["uuid"]
        follower = subprocess.Popen(
            [*batch, *options], env=env, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        followers.append(follower)
        wait_for_label(effects[0], SLOW_LABEL)
        services[0].terminate()  # as `grove down` stops it: Grove, its Ray and hosts go
        services[0].wait(120)
        (output,) = (tmp_path / "config" / "grove" / "batches").glob("*[0-9a-f].jsonl")
        assert 2 <= len(ids(output)) < 4  # the quick ones at least, not the rest
        services.append(started_service(tmp_path, env, port))
        chat = threading.Thread(
            target=prompted, args=(tmp_path, port, root, three_calls("mark", chat_effects))
        )
        chat.start()
        wait_for_label(chat_effects, SLOW_LABEL)
        wait_for_label(effects[2], SLOW_LABEL)
        services[1].kill()  # SIGKILL: the service's Ray goes with it
        services[1].wait()
        chat.join(60)
        assert 4 <= len(ids(output)) < len(tasks)
        assert follower.poll() is None, follower.communicate()  # following through both
        services.append(started_service(tmp_path, env, port))
        answer = prompted(tmp_path, port, root, "[[sim tokens=3]] and now?")
        stdout, stderr = follower.communicate(timeout=240)
    assert answer is not None and answer.json()["ok"], answer and answer.text
    assert chat_effects.read_text().split() == ["1", "2", "3"]
    assert follower.returncode == 0, stderr.decode()
    assert stdout.decode().startswith("Batch finished: 6 ok, 0 failed"), stdout
    expected = sorted(str(task["id"]) for task in tasks)
    assert sorted(map(str, ids(tmp_path / "tasks.out.jsonl"))) == expected  # each once
    assert sorted(map(str, ids(output))) == expected
    for path in effects:
        assert path.read_text().split() == ["1", "2", "3"]  # no side effect repeated
    store = open_store(env["GROVE_STORE"])
    try:
        children: collections.Counter[str] = collections.Counter()
        answers: collections.Counter[str] = collections.Counter()
        for agent in store.list_agents(include_ended=True):
            if "key" in agent.metadata:
                children[agent.metadata["key"]] += 1
                final = [m for m in store.agent_messages(agent.uuid) if m.kind == "assistant"]
                answers[agent.metadata["key"]] += sum(not calls_tools(m.data) for m in final)
        assert len(children) == len(tasks) and set(children.values()) == {1}
        assert set(answers.values()) == {1}  # each task answered once, across both services
        cut_off = [e for e in events(store, "ToolInterrupted") if e["tool"] == "mark"]
        assert cut_off  # the first task's second call at least: it resumed after it
        kinds = [m.kind for m in store.agent_messages(root) if m.kind in CONVERSATION]
        assert kinds == [
            "user",
            *["assistant", "tool_result"] * 3,
            "assistant",
            "user",
            "assistant",
        ]
    finally:
        store.close()


def test_a_turn_a_stopped_grove_cut_off_ends_before_the_next_asks(tmp_path: Path) -> None:
    """A Grove stopped while a turn is in its second side-effecting call leaves the turn
    open; asks sent at once by an asyncio program to a Grove started next on the same store
    (to that agent and two new ones) all answer, the cut-off turn resumed and ended first."""
    store_url = f"sqlite:///{tmp_path / 'grove.sqlite3'}"
    path = tmp_path / "effects.txt"
    with running_grove(tmp_path, store_url=store_url) as grove:
        root = grove.create_root("claude-haiku-4-5", tools=[mark]).uuid
        grove.send(root, three_calls("mark", path))  # begun; nobody reads it
        wait_for_label(path, SLOW_LABEL)
    with running_grove(tmp_path, store_url=store_url) as grove:
        agents = [grove.create_root("claude-haiku-4-5").uuid for _ in range(2)] + [root]

        async def asked() -> list[TurnResult]:
            aio = AsyncGrove(grove)
            return list(await asyncio.gather(*(aio.ask(a, "[[sim tokens=3]] hi") for a in agents)))

        results = asyncio.run(asked())
        assert all(result.ok for result in results), results
        kinds = [m.kind for m in grove.history(root) if m.kind in CONVERSATION]
    assert path.read_text().split() == ["1", "2", "3"]  # the cut-off call not run again
    assert kinds == ["user", *["assistant", "tool_result"] * 3, "assistant", "user", "assistant"]
