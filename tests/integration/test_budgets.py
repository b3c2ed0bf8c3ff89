"""Tree budgets over Ray and the simulator: a tree stops starting requests at its limit (tokens,
turns), with the reference text; children draw on their root's budget, so forks are refused
too; the soft share warns once, in the stream and as an event; bad budgets are refused.

`grove run` and `grove batch` run in this process on the module's Grove (a command finds Ray
started and joins its supervisor, as in test_one_path.py); a budget is the command's own, sent
with the root it makes."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from grove.supervisor import Budget, Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.store import open_store
from grove.supervisor.store.kinds import TURN_END_KIND
from grove.supervisor.usage import usage_report
from tests.integration.groves import Invoked, cli_environment, invoke, running_grove

MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    with running_grove(tmp_path_factory.mktemp("budgets"), hosts=2) as grove:
        yield grove


def test_a_request_that_would_pass_the_limit_does_not_start(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=200, reserve_output=50)).uuid
    assert grove.ask(root, "[[sim tokens=100]] first").ok  # about 110 tokens
    # The next request carries the first reply as input: with the 50 tokens of reply it holds
    # it would pass 200, so it is not sent.
    second = grove.ask(root, "[[sim tokens=100]] second")
    assert not second.ok and second.error is not None
    assert re.fullmatch(r"Budget exhausted: tokens \d+/200", second.error), second.error
    # The refused turn keeps its prompt and the mark that it ended (it is not resumed).
    assert [m.kind for m in grove.history(root)] == ["user", "assistant", "user", TURN_END_KIND]


def test_a_token_budget_stops_new_turns_and_forks_once_spent(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=100, reserve_output=50)).uuid
    assert grove.ask(root, "[[sim tokens=100]] first").ok  # the reply itself passes 100
    with pytest.raises(CommandError, match=r"^Budget exhausted: tokens [\d,]+/100$"):
        grove.send(root, "third")
    refused = grove.dispatch(root, '/fork "go on"')
    assert not refused.ok and refused.text.startswith("Budget exhausted: tokens ")
    other = grove.create_root(MODEL).uuid  # another tree is not limited
    assert grove.ask(other, "[[sim tokens=100]] unlimited").ok


def test_children_draw_on_their_roots_budget(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=250, reserve_output=50)).uuid
    child = grove.dispatch(root, "/fork").data["child"]
    assert grove.ask(child, "[[sim tokens=150]] the child spends").ok
    assert grove.ask(root, "[[sim tokens=150]] the root spends").ok
    for agent in (root, child):
        with pytest.raises(CommandError, match=r"^Budget exhausted: tokens "):
            grove.send(agent, "more")


def test_a_turn_budget_counts_turns_across_the_tree(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(turns=2)).uuid
    assert grove.ask(root, "[[sim tokens=5]] one").ok
    assert grove.ask(root, "[[sim tokens=5]] two").ok
    with pytest.raises(CommandError, match=r"^Budget exhausted: turns 2/2$"):
        grove.send(root, "three")


def test_the_soft_share_warns_once(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=10_000, soft=0.01)).uuid
    assert grove.ask(root, "[[sim tokens=150]] spend past the soft share").ok
    shown = [list(grove.send(root, f"[[sim tokens=5]] turn {n}")) for n in range(2)]
    notices = [text for turn in shown for kind, text in turn if kind == "notice"]
    assert len(notices) == 1 and notices[0].startswith("Budget warning: tokens ")
    assert notices[0].endswith("/10,000")
    store = open_store(grove.settings.store)
    try:
        warnings = [e for e in store.events(limit=10_000) if e.kind == "BudgetWarning"]
    finally:
        store.close()
    assert [e.payload["root"] for e in warnings].count(root) == 1


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"tokens": 0}, "budget tokens must be a positive number, got 0"),
        ({"cost_usd": -1.0}, "budget cost_usd must be a positive number, got -1.0"),
        ({"seconds": math.nan}, "budget seconds must be a positive number, got nan"),
        ({}, "a budget needs at least one of tokens, cost_usd, seconds, turns"),
        ({"turns": 3, "soft": 1.5}, "budget soft must be above 0 and at most 1, got 1.5"),
    ],
)
def test_bad_budgets_are_refused_with_the_reason(limits: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        Budget(**limits)  # type: ignore[arg-type]


@pytest.fixture
def joined(grove: Grove, tmp_path: Path) -> dict[str, str]:
    """The environment of a command with its config in `tmp_path`, on the module's Grove and
    its store."""
    return {**cli_environment(tmp_path), "GROVE_STORE": grove.settings.store or ""}


def run_cli(env: dict[str, str], *options: str) -> Invoked:
    return invoke(env, "run", "--simulate", "--model", MODEL, *options)


def test_grove_run_takes_a_budget_and_refuses_bad_ones(joined: dict[str, str]) -> None:
    spent = run_cli(joined, "--budget-tokens", "5000", "[[sim tokens=30]] hello")
    assert spent.returncode == 0, spent.stderr  # the first request and its hold fit
    small = run_cli(joined, "--budget-tokens", "5", "[[sim tokens=30]] hello there")
    assert small.returncode == 1 and "more than the whole budget of 5" in small.stderr
    # 1,000 tokens hold the input but not the 4,096 tokens of reply a request holds by default.
    held = run_cli(joined, "--budget-tokens", "1000", "[[sim tokens=30]] hello")
    assert held.returncode == 1, held.stderr
    assert "and holds 4,096 for its reply, more than the whole budget of 1,000" in held.stderr
    assert "a smaller [budget] reserve_output, or strict = true, lets it start" in held.stderr
    for options, message in (
        (("--budget-time", "5 weeks"), "--budget-time: use seconds or a number with s, m or h"),
        (("--budget-cost", "0"), "budget cost_usd must be a positive number, got 0.0"),
    ):
        refused = run_cli(joined, *options, "hello")
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


def write_tasks(path: Path, count: int, reply_tokens: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": n, "prompt": f"[[sim tokens={reply_tokens}]] task {n}"}) + "\n"
            for n in range(count)
        )
    )
    return path


def run_batch(env: dict[str, str], tasks: Path, output: Path, *options: str) -> Invoked:
    return invoke(
        env, "batch", str(tasks), "--simulate", "--model", MODEL, "--output", str(output), *options
    )


def test_a_batch_stops_at_its_budget_and_a_rerun_runs_just_the_rest(
    joined: dict[str, str], tmp_path: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 12, 80)
    output = tmp_path / "out.jsonl"
    (tmp_path / "config.toml").write_text("[budget]\nreserve_output = 100\n")
    first = run_batch(joined, tasks, output, "--concurrency", "2", "--budget-tokens", "400")
    assert first.returncode == 1, first.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    skipped = [r for r in records if r["status"] == "skipped"]
    assert skipped and all(r["error"].startswith("Budget exhausted: tokens ") for r in skipped)
    assert {r["status"] for r in records} == {"ok", "skipped"}
    assert "skipped: the budget was spent" in first.stdout + first.stderr
    again = run_batch(joined, tasks, output, "--concurrency", "2", "--budget-tokens", "100000")
    assert again.returncode == 0, again.stderr
    rerun = [json.loads(line) for line in output.read_text().splitlines()][len(records) :]
    assert sorted(r["id"] for r in rerun) == sorted(r["id"] for r in skipped)  # just those
    assert all(r["status"] == "ok" for r in rerun)


def test_a_batch_of_replies_inside_their_hold_settles_within_its_budget(
    joined: dict[str, str], tmp_path: Path
) -> None:
    # Each request starts only if its input and its whole hold of 4,096 reply tokens fit in
    # what is left; replies of 500 tokens stay inside their holds, so the limit holds too.
    tasks = write_tasks(tmp_path / "tasks.jsonl", 60, 500)
    output = tmp_path / "out.jsonl"
    done = run_batch(joined, tasks, output, "--concurrency", "10", "--budget-tokens", "12000")
    assert done.returncode == 1, done.stderr  # the budget ran out: the rest is skipped
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert {r["status"] for r in records} == {"ok", "skipped"}
    store = open_store(joined["GROVE_STORE"])
    try:
        agents = store.list_agents(include_ended=True)
        (batch_root,) = {a.parent_uuid for a in agents if a.uuid in {r["agent"] for r in records}}
        assert batch_root is not None
        total = usage_report(store, agents).trees[batch_root]  # the batch's tree, all of it
    finally:
        store.close()
    ok = sum(r["status"] == "ok" for r in records)
    assert total.output_tokens >= 500 * ok  # every finished task's reply is counted
    assert total.input_tokens + total.output_tokens <= 12_000


def test_a_budget_smaller_than_one_request_sends_nothing(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=50)).uuid
    result = grove.ask(root, "words " * 400)  # about 600 tokens of input
    assert not result.ok and result.error is not None
    assert result.error.startswith("Budget exhausted: tokens: this request needs about ")
    assert result.error.endswith("more than the whole budget of 50; nothing was sent")
    # No reply, nothing was sent: the prompt and the mark that its turn ended.
    assert [m.kind for m in grove.history(root)] == ["user", TURN_END_KIND]


def test_two_hundred_agents_racing_one_budget_settle_within_it(grove: Grove) -> None:
    limit = 4_000
    root = grove.create_root(MODEL, budget=Budget(tokens=limit, reserve_output=30)).uuid
    children = grove.fork_many(root, [f"[[sim tokens=20]] race {n}" for n in range(200)])
    results = grove.wait_any(children, 120)
    while len(results) < len(children):
        results |= grove.wait_any([c for c in children if c not in results], 120)
    finished = [r for r in results.values() if r is not None and r.ok]
    refused = [r for r in results.values() if r is not None and not r.ok]
    assert finished and refused  # about 35 tokens each: not all 200 fit in 4,000
    assert all((r.error or "").startswith("Budget exhausted: tokens ") for r in refused)
    settled = sum(r.usage.input_tokens + r.usage.output_tokens for r in finished)
    assert settled <= limit  # every output stayed within what its request held
