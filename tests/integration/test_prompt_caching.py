"""Provider caching that follows the tree, end to end: real Ray, the simulator over HTTP
billing each provider's cache as the provider does, Grove's own parsers reading the usage.

Siblings send the same bytes up to their fork point; 100 children at concurrency 100 write
their prefix once; a tool loop reads the previous step at every step; a failed first child
releases the others at once; OpenAI siblings share a `prompt_cache_key`; a Gemini batch gets
one `cachedContents` entry, deleted at its end; the reports say what caching read and saved.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.providers.base import Usage
from grove.providers.http import Endpoint
from grove.providers.pricing import cost_usd
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor import Grove
from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import Task
from tests.integration.groves import (
    cli_environment,
    interrupt_after_lines,
    invoke,
    running_grove,
)

KEY = "sim-cache-test-key-4411"
TTFT_MS = 150


def context(topic: str, words: int = 1_500) -> list[tuple[str, str]]:
    """A shared context of about `words * 1.5` tokens, the same for one topic only."""
    text = " ".join(f"{topic}-{n}" for n in range(words))
    return [("user", text), ("assistant", f"Understood: the {topic} notes.")]


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, ttft_ms=TTFT_MS, tokens=4)) as running:
        yield running


@pytest.fixture(scope="module")
def grove(simulator: SimulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)
    with running_grove(tmp_path_factory.mktemp("caching"), endpoint=endpoint) as grove:
        yield grove


def billed(simulator: SimulatorThread, api: str) -> dict[str, int]:
    return dict(simulator.simulator.stats()["billed_by_api"].get(api, {}))


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {name: value - before.get(name, 0) for name, value in after.items()}


def finish(grove: Grove, agents: list[str]) -> dict[str, Any]:
    pending, results = set(agents), {}
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for agent, result in grove.wait_any(list(pending), 10).items():
            assert result is not None and result.ok, result
            results[agent] = result
            pending.discard(agent)
    assert not pending
    return results


def seeded_root(grove: Grove, model: str, topic: str, **options: Any) -> str:
    root = grove.create_root(model, **options).uuid
    grove.seed(root, context(topic))
    return root


def last_reply(grove: Grove, agent: str) -> dict[str, Any]:
    (reply,) = [m for m in grove.history(agent) if m.kind == "assistant"][-1:]
    return reply.data


def test_siblings_send_the_same_bytes_up_to_their_fork_point(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = seeded_root(grove, "claude-sonnet-5-5", "siblings")
    children = grove.fork_many(root, ["First task", "Second, longer task", "Third"])
    finish(grove, children)
    bodies = [b for b in simulator.simulator.received if "siblings-0" in json.dumps(b)][-3:]
    assert len(bodies) == 3
    shared = []
    for body in bodies:
        blocks = [(m["role"], b) for m in body["messages"] for b in m["content"]]
        marked = [index for index, (_, block) in enumerate(blocks) if "cache_control" in block]
        assert 2 <= len(marked) <= 4
        fork = marked[-2]  # the tail is the child's own prompt; before it, the fork point
        assert blocks[fork][1]["text"] == "Understood: the siblings notes."
        shared.append(json.dumps(blocks[: fork + 1]))
    assert shared[0] == shared[1] == shared[2]


def test_a_hundred_children_at_once_write_their_prefix_once(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = seeded_root(grove, "claude-sonnet-5-5", "hundred")
    before = billed(simulator, "anthropic")
    children = grove.fork_many(root, [f"Task {n}: one line." for n in range(100)])
    results = finish(grove, children)
    spent = delta(billed(simulator, "anthropic"), before)
    assert spent["requests"] == 100
    assert spent["cold_writes"] == 1  # one write of the shared prefix, 99 reads of it
    prefix = min(r.usage.cache_read_tokens for r in results.values() if r.usage.cache_read_tokens)
    assert prefix > 2_000
    assert sum(r.usage.cache_read_tokens >= prefix for r in results.values()) == 99
    assert spent["cache_read_tokens"] >= 99 * prefix
    report = grove.dispatch(root, "/usage").data
    tree = report["trees"][root]
    assert tree["cache_hit_share"] > 0.9 and tree["saved_usd"] > 0
    assert tree["cache_read_tokens"] == spent["cache_read_tokens"]


def note(text: str) -> str:
    """Keep a note."""
    return f"noted: {text}"


def test_a_tool_loop_reads_what_the_step_before_wrote(grove: Grove) -> None:
    root = grove.create_root(
        "claude-sonnet-5-5", system="You take notes. " + "Rules. " * 1_500, tools=[note]
    ).uuid
    steps = " ".join(
        f"[[sim tool=note args='{json.dumps({'text': f'n{n}'})}' step={n}]]" for n in range(1, 6)
    )
    assert grove.ask(root, f"{steps} take five notes").ok
    replies = [m.data["usage"] for m in grove.history(root) if m.kind == "assistant"]
    assert len(replies) == 6  # five tool steps, then the answer
    for previous, usage in itertools.pairwise(replies):
        assert usage["cache_read_tokens"] >= 0.95 * previous["input_tokens"]
        assert usage["cache_write_tokens"] < 0.1 * usage["input_tokens"]  # only the new step


def test_a_failed_first_child_releases_the_others_at_once(grove: Grove) -> None:
    root = seeded_root(grove, "claude-sonnet-5-5", "failing")
    retry_after_s = 6
    prompts = [f"[[sim fault=529 retry_after={retry_after_s} times=1]] first"]
    prompts += [f"task {n}" for n in range(4)]
    started = time.monotonic()
    children = grove.fork_many(root, prompts)
    # returned before the first child's retry was due: its failure, not its reply, let the
    # others go
    assert time.monotonic() - started < retry_after_s
    finish(grove, children)


def test_openai_siblings_share_a_prompt_cache_key_name(
    grove: Grove, simulator: SimulatorThread
) -> None:
    root = seeded_root(grove, "gpt-6.1-terra", "openai")
    before = billed(simulator, "openai-responses")
    children = grove.fork_many(root, ["one", "two", "three"])
    results = finish(grove, children)
    bodies = [b for b in simulator.simulator.received if "openai-0" in json.dumps(b)][-3:]
    keys = {body["prompt_cache_key"] for body in bodies}
    assert len({key.split("-")[1] for key in keys}) == 1  # named after their fork point
    assert len(keys) <= 2  # one key a host (each counts the requests on its own keys)
    spent = delta(billed(simulator, "openai-responses"), before)
    reads = sorted(result.usage.cache_read_tokens for result in results.values())
    assert reads[0] == 0 and reads[-1] > 2_000 and reads[-1] % 128 == 0  # warmed by the first
    assert spent["cache_read_tokens"] == sum(reads)


def gemini_tasks(count: int) -> list[Task]:
    return [Task(id=n, key=str(n), line=n + 1, prompt=f"question {n}") for n in range(count)]


def test_a_gemini_batch_makes_one_cached_content_and_deletes_it(
    grove: Grove, simulator: SimulatorThread, tmp_path: Path
) -> None:
    root = seeded_root(grove, "gemini-3.5-flash", "gemini")
    explicit = simulator.simulator.explicit
    made, deleted = explicit.created, explicit.deleted
    totals = Totals(total=12)
    with OutputLog(tmp_path / "out.jsonl") as log:
        steps = grove.run_batch(root, gemini_tasks(12), concurrency=4, key="gemini")
        for _ in record_results(steps, log, totals):
            pass
    assert (explicit.created - made, explicit.deleted - deleted, explicit.live) == (1, 1, 0)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    cached = {r["usage"]["cache_read_tokens"] for r in records}
    assert len(cached) == 1 and cached.pop() > 2_000  # every task named the one entry
    assert totals.saved_usd > 0 and totals.cache_read_tokens > 0.9 * totals.input_tokens
    bodies = [b for b in simulator.simulator.received if "cachedContent" in b][-12:]
    assert len({b["cachedContent"] for b in bodies}) == 1
    assert all("systemInstruction" not in b and "gemini-0" not in json.dumps(b) for b in bodies)


def test_a_gemini_batch_on_a_model_without_explicit_caching_makes_no_cached_content(
    grove: Grove, simulator: SimulatorThread, tmp_path: Path
) -> None:
    """Gemini 4 Argon caches implicitly only: its batch names no `cachedContents` entry (and
    spends no request on one the API would refuse)."""
    root = seeded_root(grove, "gemini-4-argon", "argon")
    explicit = simulator.simulator.explicit
    made = explicit.created
    with OutputLog(tmp_path / "out.jsonl") as log:
        steps = grove.run_batch(root, gemini_tasks(4), concurrency=4, key="argon")
        for _ in record_results(steps, log, Totals(total=4)):
            pass
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"] * 4
    assert explicit.created == made
    bodies = [b for b in simulator.simulator.received if "argon-0" in json.dumps(b)][-4:]
    assert len(bodies) == 4 and not any("cachedContent" in body for body in bodies)


def test_costs_count_cached_tokens_at_their_prices_and_reports_say_so(
    grove: Grove, tmp_path: Path
) -> None:
    root = seeded_root(grove, "claude-sonnet-5-5", "prices")
    first, second = grove.fork_many(root, ["one", "two"])
    finish(grove, [first, second])
    data = last_reply(grove, second)
    usage = Usage(**data["usage"])
    assert usage.cache_read_tokens > 2_000
    assert data["cost_usd"] == pytest.approx(cost_usd("claude-sonnet-5-5", usage))
    plain = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    uncached = cost_usd("claude-sonnet-5-5", plain)
    assert data["cost_usd"] < 0.2 * uncached
    assert data["saved_usd"] == pytest.approx(uncached - data["cost_usd"], rel=1e-6)
    env = {**cli_environment(tmp_path), "GROVE_STORE": str(grove.settings.store)}
    shown = invoke(env, "usage", "--agent", root)
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert "cache rd" in header and "hit" in header and "saved $" in header
    total = rows[-1].split()
    assert total[0] == "total" and total[7].endswith("%") and float(total[9]) > 0


def test_a_gemini_batch_interrupted_deletes_its_cached_content(
    simulator: SimulatorThread, tmp_path: Path
) -> None:
    """`grove batch` on Gemini, stopped with Ctrl+C while tasks are in flight: the one entry
    it made goes with it, and its summary line says what caching read and saved."""
    tasks, context = tmp_path / "tasks.jsonl", tmp_path / "context.txt"
    quick = [{"id": n, "prompt": f"quick {n}"} for n in range(3)]
    slow = [{"id": f"slow-{n}", "prompt": "[[sim ttft_ms=120000]] slow"} for n in range(2)]
    tasks.write_text("".join(json.dumps(task) + "\n" for task in quick + slow))
    context.write_text(" ".join(f"ctrl-c-{n}" for n in range(1_500)))
    env = {
        **cli_environment(tmp_path),
        "GOOGLE_GEMINI_BASE_URL": simulator.base_url,
        "GEMINI_API_KEY": KEY,
    }
    explicit = simulator.simulator.explicit
    made, deleted = explicit.created, explicit.deleted
    output = tmp_path / "tasks.out.jsonl"
    command = [
        sys.executable,
        "-m",
        "grove.cli.app",
        "batch",
        str(tasks),
        "--context",
        str(context),
    ]
    command += ["--model", "gemini-3.5-flash", "--hosts", "1"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    stdout, stderr = interrupt_after_lines(process, output, 3, 120)
    assert process.returncode == 130, stderr
    assert (explicit.created - made, explicit.deleted - deleted) == (1, 1)
    assert "of input from cache)" in stdout and "(caching saved $" in stdout
