"""`grove batch --simulate` over a temp SQLite store: output records, the shared context in every
child's stored conversation, per-task models and system prompts, the concurrency window,
malformed lines, resume, exit codes and Ctrl+C. Real Ray, real simulator.

The three runs of one task file go to the module's Grove (started once: a command finds Ray
started and joins its supervisor, so the alias the runs use is the Grove's setting as well as
the command's); the input a batch refuses before anything starts and Ctrl+C are subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grove.supervisor import Grove
from grove.supervisor.store import Store, open_store
from tests.integration.groves import Invoked, interrupt_after_lines, invoke

BATCH_TIMEOUT_S = 240
CONCURRENCY = 3
NO_MODEL_FIRST_LINE = "No model given. Pass --model, or set a default for every command:"
ALIASES = {"fast": "gemini-3.8-flash/low"}
pytestmark = pytest.mark.grove(hosts=2, env={"GROVE_MODELS__ALIASES": json.dumps(ALIASES)})

CONTEXT = [
    {"role": "user", "content": "Here is our review guide: money is integer cents."},
    {"role": "assistant", "content": "Understood: integer cents, never floats."},
]
FILLERS = [{"id": f"filler-{n}", "prompt": f"[[sim tokens=4]] small task {n}"} for n in range(6)]
FLAKY = {"id": "flaky", "prompt": "[[sim fault=disconnect after=2]] breaks mid-stream"}
LINES: list[Any] = [
    {"id": "alpha", "prompt": '[[sim reply="Alpha answer"]] review alpha'},
    {"id": 2, "prompt": "review two", "model": "gpt-6.1-terra"},
    {"id": 3, "prompt": "review three", "model": "fast"},
    {"id": "sys", "prompt": "review with a system prompt", "system": "You are terse."},
    FLAKY,
    '{"id": "no-prompt"}',
    "not json at all",
    {"id": "alpha", "prompt": "same id again"},
    "",
    *FILLERS,
]
LINE_ERRORS = {
    6: "missing required field 'prompt'",
    7: "not valid JSON: Expecting value at column 1",
    8: 'duplicate id "alpha": first on line 1',
}
VALID_IDS = {"alpha", 2, 3, "sys", "flaky", *(f["id"] for f in FILLERS)}


def write_tasks(path: Path, lines: list[Any]) -> None:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )


@dataclass(frozen=True)
class Workspace:
    base: Path
    env: dict[str, str]
    store_url: str

    @property
    def tasks(self) -> Path:
        return self.base / "tasks.jsonl"

    @property
    def output(self) -> Path:
        return self.base / "tasks.out.jsonl"

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.output.read_text().splitlines()]

    def batch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "grove.cli.app", "batch", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=BATCH_TIMEOUT_S,
            check=False,
        )

    def batch_here(self, *args: str) -> Invoked:
        """`grove batch ARGS` in this process, on the module's Grove."""
        return invoke(self.env, "batch", *args)


def make_workspace(base: Path, config: str = "", store_url: str | None = None) -> Workspace:
    (base / "config.toml").write_text(config)
    store_url = store_url or f"sqlite:///{base / 'g.sqlite3'}"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GROVE_", "RAY_")) and not key.endswith("_API_KEY")
    }
    env.update(
        GROVE_STORE=store_url,
        GROVE_CONFIG_FILE=str(base / "config.toml"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_DATA_HOME=str(base / "data"),
        GROVE_NO_SERVICE="1",  # in-process: no service left behind (tests/conftest.py)
    )
    return Workspace(base=base, env=env, store_url=store_url)


@dataclass(frozen=True)
class Runs:
    work: Workspace
    first: Invoked
    first_records: list[dict[str, Any]]
    second: Invoked
    third: Invoked


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, grove: Grove, store_url: str) -> Runs:
    """Run 1: everything; run 2: the same command after fixing the flaky task; run 3: after
    removing the malformed lines (nothing left to do). On the module's Grove and store."""
    aliases = "".join(f'{name} = "{model}"\n' for name, model in ALIASES.items())
    work = make_workspace(
        tmp_path_factory.mktemp("batch"), f"[models.aliases]\n{aliases}", store_url
    )
    context = work.base / "context.jsonl"
    context.write_text("".join(json.dumps(message) + "\n" for message in CONTEXT))
    write_tasks(work.tasks, LINES)
    command = (
        str(work.tasks),
        "--context",
        str(context),
        "--model",
        "claude-haiku-4-5/low",
        "--concurrency",
        str(CONCURRENCY),
        "--simulate",
        "--hosts",
        "2",
    )
    first = work.batch_here(*command)
    first_records = work.records()
    write_tasks(
        work.tasks,
        [{**FLAKY, "prompt": "no longer breaks"} if line is FLAKY else line for line in LINES],
    )
    second = work.batch_here(*command)
    write_tasks(work.tasks, [line for n, line in enumerate(LINES, 1) if n not in LINE_ERRORS])
    third = work.batch_here(*command)
    return Runs(work, first, first_records, second, third)


@pytest.fixture
def store(runs: Runs) -> Iterator[Store]:
    opened = open_store(runs.work.store_url)
    yield opened
    opened.close()


def by_id(records: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {record["id"]: record for record in records if record["id"] is not None}


def test_first_run_writes_one_record_per_task_and_exits_1(runs: Runs) -> None:
    assert runs.first.returncode == 1, runs.first.stderr
    assert "Traceback" not in runs.first.stderr
    records = by_id(runs.first_records)
    assert set(records) == VALID_IDS
    assert len(runs.first_records) == len(VALID_IDS) + len(LINE_ERRORS)
    for record in records.values():
        assert list(record) == [
            "id",
            "agent",
            "status",
            "text",
            "usage",
            "cost_usd",
            "saved_usd",
            "error",
            "advice",
            "tool_calls",
            "tool_results",
        ]
        assert record["advice"] == []
    ok = [r for r in records.values() if r["id"] != "flaky"]
    assert all(r["status"] == "ok" and r["error"] is None and r["text"] for r in ok)
    assert all(r["usage"]["output_tokens"] > 0 and r["cost_usd"] > 0 for r in ok)
    assert records["alpha"]["text"] == "Alpha answer"
    flaky = records["flaky"]
    assert flaky["status"] == "error" and "broke" in flaky["error"] and flaky["text"] == ""
    summary = runs.first.stdout.strip().splitlines()[-1]
    assert summary.startswith(
        f"Batch finished: {len(VALID_IDS) - 1} ok, 4 failed (3 malformed lines), 0 skipped"
    )


def test_malformed_lines_become_error_records_with_line_numbers(runs: Runs) -> None:
    errors = [r for r in runs.first_records if r["id"] is None]
    assert {r["line"]: r["error"] for r in errors} == LINE_ERRORS
    assert all(list(r) == ["id", "line", "status", "error"] for r in errors)
    assert all(r["status"] == "error" for r in errors)


def test_every_child_inherits_the_shared_context(runs: Runs, store: Store) -> None:
    records = by_id(runs.first_records)
    children = [store.get_agent(r["agent"]) for r in records.values()]
    parents = {child.parent_uuid for child in children if child is not None}
    assert len(parents) == 1 and None not in children
    (root,) = parents
    assert root is not None
    assert [(m.kind, m.content) for m in store.agent_messages(root)] == [
        (message["role"], message["content"]) for message in CONTEXT
    ]
    for task_id, record in records.items():
        conversation = store.conversation(record["agent"])
        assert [(m.kind, m.content) for m in conversation[:2]] == [
            (message["role"], message["content"]) for message in CONTEXT
        ], task_id
        assert conversation[2].kind == "user"
        assert conversation[2].agent_uuid == record["agent"]
        if record["status"] == "ok":
            assert conversation[-1].kind == "assistant"
            assert conversation[-1].content == record["text"]


def test_per_task_models_and_system_prompts_are_honoured(runs: Runs, store: Store) -> None:
    records = by_id(runs.first_records)

    def described(task_id: Any) -> tuple[str | None, str | None, str | None, Any]:
        child = store.get_agent(records[task_id]["agent"])
        assert child is not None
        return child.provider, child.model, child.thinking_level, child.metadata.get("system")

    assert described("alpha") == ("anthropic", "claude-haiku-4-5", "low", None)
    assert described(2) == ("openai", "gpt-6.1-terra", None, None)
    assert described(3) == ("google", "gemini-3.8-flash", "low", None)
    assert described("sys") == ("anthropic", "claude-haiku-4-5", "low", "You are terse.")
    replies = {
        task_id: store.agent_messages(records[task_id]["agent"])[-1].data["model"]
        for task_id in ("alpha", 2, 3)
    }
    assert replies == {"alpha": "claude-haiku-4-5", 2: "gpt-6.1-terra", 3: "gemini-3.8-flash"}


def test_no_more_than_the_window_is_in_flight(runs: Runs, store: Store) -> None:
    """Replayed from the event log: forks add, completions remove. A completion logged before
    its fork's event only lowers the count, so the replay never overstates the window."""
    children = {r["agent"] for r in runs.first_records if r.get("agent")}
    in_flight, peak, forks = 0, 0, 0
    for event in store.events(limit=100_000):
        if event.kind == "AgentsForked" and event.payload["parent"] not in children:
            in_flight += event.payload["count"]
            forks += 1
        elif event.kind == "TurnCompleted" and event.payload["agent"] in children:
            in_flight -= 1
        peak = max(peak, in_flight)
    assert 0 < peak <= CONCURRENCY
    assert forks >= len(VALID_IDS) // CONCURRENCY


def test_rerun_skips_ok_ids_and_retries_the_failed_one(runs: Runs, store: Store) -> None:
    assert runs.second.returncode == 1, runs.second.stderr  # the malformed lines remain
    records = runs.work.records()
    new = records[len(runs.first_records) :]
    assert [(r["id"], r["status"]) for r in new] == [("flaky", "ok")]
    summary = runs.second.stdout.strip().splitlines()[-1]
    assert summary.startswith(
        f"Batch finished: 1 ok, 3 failed (3 malformed lines), {len(VALID_IDS) - 1} skipped"
    )
    roots = [a for a in store.list_agents(include_ended=True) if a.role == "root"]
    second_root = roots[-1].uuid
    assert [c.uuid for c in store.children(second_root)] == [records[-1]["agent"]]


def test_line_errors_are_written_once(runs: Runs) -> None:
    errors = [r for r in runs.work.records() if r["id"] is None]
    assert len(errors) == len(LINE_ERRORS)


def test_nothing_left_to_do_exits_0_without_starting_anything(runs: Runs, store: Store) -> None:
    assert runs.third.returncode == 0, runs.third.stderr
    assert runs.third.stdout.startswith(f"Batch finished: 0 ok, 0 failed, {len(VALID_IDS)} skipped")
    assert "0 tasks to run" in runs.third.stderr
    assert len([a for a in store.list_agents(include_ended=True) if a.role == "root"]) == 2
    last_ids = {}
    for record in runs.work.records():
        last_ids[record["id"]] = record["status"]
    assert all(status == "ok" for task_id, status in last_ids.items() if task_id is not None)


def test_unusable_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    write_tasks(work.tasks, [{"id": 1, "prompt": "no model anywhere"}])
    done = work.batch(str(work.tasks), "--simulate")
    assert done.returncode == 2
    assert done.stderr.startswith(NO_MODEL_FIRST_LINE)
    bad_context = tmp_path / "context.jsonl"
    bad_context.write_text('{"role": "system", "content": "x"}\n')
    done = work.batch(str(work.tasks), "--model", "gpt-6-sol", "--context", str(bad_context))
    assert done.returncode == 2
    assert f'{bad_context} line 1: \'role\' must be "user" or "assistant"' in done.stderr
    done = work.batch(str(work.tasks), "--model", "gpt-6-sol", "--output", str(work.tasks))
    assert done.returncode == 2 and "is the tasks file itself" in done.stderr
    assert not work.output.exists()
    assert not (tmp_path / "g.sqlite3").exists()


def test_ctrl_c_stops_cleanly_with_valid_output(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    write_tasks(
        work.tasks,
        [
            {"id": "quick-1", "prompt": "quick"},
            {"id": "quick-2", "prompt": "quick too"},
            {"id": "slow-1", "prompt": "[[sim ttft_ms=120000]] slow"},
            {"id": "slow-2", "prompt": "[[sim ttft_ms=120000]] slow too"},
        ],
    )
    command = ["batch", str(work.tasks), "--model", "gpt-6-luna", "--simulate", "--hosts", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "grove.cli.app", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=work.env,
    )
    stdout, stderr = interrupt_after_lines(process, work.output, 2, BATCH_TIMEOUT_S / 2)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stdout.startswith("Batch interrupted: 2 ok, 0 failed")
    assert "2 unfinished tasks run again on the next run" in stdout
    assert sorted(r["id"] for r in work.records()) == ["quick-1", "quick-2"]


def test_task_tool_narrows_every_tasks_tools_from_the_root(
    tmp_path: Path, grove: Grove, store_url: str
) -> None:
    """`--task-tool` reaches every task's fork as fork_many's `tools`: the batch's root holds
    none of the default tools, so a task that would keep `todo` is refused, in the fork's
    own words, while the same batch without the option runs."""
    work = make_workspace(tmp_path, "", store_url)
    write_tasks(work.tasks, [{"id": "kept", "prompt": "[[sim tokens=4]] narrow me"}])
    model = ("--model", "claude-haiku-4-5/low", "--simulate")
    refused = work.batch_here(str(work.tasks), *model, "--task-tool", "todo")
    (record,) = work.records()
    assert refused.returncode == 1 and record["status"] == "error"
    assert record["error"] == (
        "fork refused: the parent has no tool todo; a child gets only tools its parent has"
    )
    ran = work.batch_here(str(work.tasks), *model)
    assert ran.returncode == 0 and [r["status"] for r in work.records()][-1] == "ok"
