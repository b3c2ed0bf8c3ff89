"""How a budget is kept over Ray and the simulator: `strict` caps each reply at what its
request holds, so racing agents never pass the limit; `hard_stop = "cancel"` cuts replies off
at the limit and keeps what streamed; a fork_many's own budget; a cost budget on a model
without a price is refused before anything is sent, and a price set in the config keeps it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grove.actors.turn_result import TurnResult
from grove.supervisor import Budget, Grove
from grove.supervisor.store import open_store
from grove.supervisor.store.kinds import TURN_END_KIND
from grove.supervisor.usage import subtree, usage_report
from tests.integration.groves import cli_environment, invoke, running_grove
from tests.integration.shared_ray import SHARED_RAY

MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    env = {"GROVE_ADVISOR__MODEL": MODEL}
    with running_grove(tmp_path_factory.mktemp("keeping"), hosts=2, env=env) as grove:
        yield grove


def test_a_price_in_the_config_keeps_a_cost_budget(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[budget]\nreserve_output = 200\n[models.prices]\n"house-model" = [200, 400]\n'
    )
    env = cli_environment(tmp_path, config)
    # The commands run in this process, in the shared Ray, each making a supervisor of its own
    # that reads the config: this test comes first in the module, before its Grove (whose
    # supervisor, without the price, a command would join) is started.
    SHARED_RAY.ensure()
    command = ["run", "--simulate", "--model", "openai:house-model", "--budget-cost", "0.5"]
    first = invoke(env, *command, "[[sim tokens=50]] hello")
    # About 550 input tokens (the prompt, the default tools' schemas) at $0.0002 each and a
    # hold of 200 reply tokens at $0.0004: the request starts; with its 50 words of reply it
    # costs about $0.13.
    assert first.returncode == 0, first.stderr
    broke = invoke(env, *command, "words " * 2000)
    assert broke.returncode == 1, broke.stderr  # about 3,500 input tokens: $0.70 alone
    assert "Budget exhausted: cost_usd: this request's input costs about $0.7" in broke.stderr
    assert "more than the whole budget of $0.5; nothing was sent" in broke.stderr


def race(grove: Grove, budget: Budget, prompts: list[str]) -> dict[str, TurnResult]:
    """Every prompt as a child of a new root with `budget`, run at once to its end."""
    root = grove.create_root(MODEL, budget=budget).uuid
    children = grove.fork_many(root, prompts)
    results: dict[str, TurnResult] = {}
    while len(results) < len(children):
        done = grove.wait_any([c for c in children if c not in results], 120)
        results |= {uuid: result for uuid, result in done.items() if result is not None}
    return results


def settled(results: dict[str, TurnResult]) -> int:
    return sum(r.usage.input_tokens + r.usage.output_tokens for r in results.values())


def test_strict_caps_every_reply_so_racing_agents_never_pass_the_limit(grove: Grove) -> None:
    limit = 3_000
    prompts = [f"[[sim tokens=60]] race {n}" for n in range(200)]  # replies of 60 words
    loose = race(grove, Budget(tokens=limit, reserve_output=20), prompts)
    strict = race(grove, Budget(tokens=limit, reserve_output=20, strict=True), prompts)
    # Without strict, a reply may outgrow its hold of 20 tokens while it runs: the limit is
    # passed by what the replies in flight output beyond what they held.
    assert settled(loose) > limit
    assert settled(strict) <= limit
    capped = [r for r in strict.values() if r.ok]
    assert capped and all(r.usage.output_tokens <= 20 for r in capped)
    assert all(r.stop_reason == "max_tokens" for r in capped)
    refused = [r for r in strict.values() if not r.ok]
    assert refused and all(re.fullmatch(r"Budget exhausted: tokens [\d,]+/3,000", r.error or "")
                           for r in refused)  # fmt: skip


def test_cancel_cuts_replies_off_at_the_limit_and_keeps_what_streamed(grove: Grove) -> None:
    limit = 2_000
    prompts = [f"[[sim tokens=300 tps=2000]] long {n}" for n in range(12)]  # 3,600 words
    budget = Budget(tokens=limit, reserve_output=20, hard_stop="cancel")
    results = race(grove, budget, prompts)
    cut = [r for r in results.values() if (r.error or "").endswith("(the reply was cut off)")]
    assert cut, [r.error for r in results.values()]
    assert all(re.match(r"Budget exhausted: tokens [\d,]+/2,000 ", r.error or "") for r in cut)
    # What streamed before the cut is stored and counted (estimated: no usage was reported).
    excess = settled(results) - limit
    assert excess <= 4 * len(cut), excess  # at most the delta that crossed, per cut reply
    child = next(uuid for uuid, r in results.items() if r in cut)
    reply = grove.history(child)[-1]  # the turn failed: kept for its usage, not as a reply
    assert reply.kind == "spent" and reply.data["stop_reason"] == "budget"
    assert reply.content and reply.data["usage"]["output_tokens"] > 20
    store = open_store(grove.settings.store)
    try:
        tree = usage_report(store, [store.get_agent(child)])  # type: ignore[list-item]
    finally:
        store.close()
    assert tree.total.output_tokens == reply.data["usage"]["output_tokens"]


def test_a_fork_many_budget_limits_its_children_on_top_of_the_trees(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=100_000)).uuid
    group = grove.fork_many(
        root,
        [f"[[sim tokens=40]] group {n}" for n in range(20)],
        budget=Budget(tokens=300, reserve_output=50),
    )
    results: dict[str, TurnResult] = {}
    while len(results) < len(group):
        done = grove.wait_any([c for c in group if c not in results], 120)
        results |= {uuid: result for uuid, result in done.items() if result is not None}
    finished = [r for r in results.values() if r.ok]
    refused = [r for r in results.values() if not r.ok]
    assert finished and refused
    assert all((r.error or "").startswith("Budget exhausted: tokens ") for r in refused)
    assert settled({str(n): r for n, r in enumerate(finished)}) <= 300
    # The group's spending counts in the tree's budget, and the rest of the tree goes on.
    outside = grove.fork_many(root, ["[[sim tokens=40]] outside the group"])
    assert grove.wait_any(outside, 60)[outside[0]].ok  # type: ignore[union-attr]
    assert not grove.ask(group[0], "[[sim tokens=5]] more").ok


def reviewer_row(grove: Grove, root: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The reviewer's `/advisor status` row once `done` says so (it reviews in the background)."""
    deadline = time.monotonic() + 60
    while True:
        (row,) = grove.dispatch(root, "/advisor status").data["reviewers"]
        if done(row) or time.monotonic() > deadline:
            return dict(row)
        time.sleep(0.1)


def test_reviewers_draw_on_the_budget_of_the_tree_they_watch(grove: Grove) -> None:
    root = grove.create_root(MODEL, budget=Budget(tokens=100_000)).uuid
    assert grove.dispatch(root, "/advisor on").ok
    assert grove.ask(root, "[[sim tokens=20]] work to review").ok
    row = reviewer_row(grove, root, lambda row: row["reviews"] >= 1)
    assert row["reviews"] >= 1, row
    store = open_store(grove.settings.store)
    try:
        tree = subtree(store, store.get_agent(root))  # type: ignore[arg-type]
        report = usage_report(store, tree)
    finally:
        store.close()
    (reviewer,) = [agent for agent in tree if agent.role == "advisor"]
    assert report.rows[reviewer.uuid].requests == row["reviews"]  # stored as it spent
    assert report.trees[root].requests == report.rows[root].requests + row["reviews"]
    # A budget smaller than the reviewer's first request: it is refused, the agent goes on.
    small = grove.create_root(MODEL, budget=Budget(tokens=300, reserve_output=50)).uuid
    assert grove.dispatch(small, "/advisor on").ok
    assert grove.ask(small, "[[sim tokens=20]] small work").ok
    refused = reviewer_row(grove, small, lambda row: row["last_error"] is not None)
    assert (refused["last_error"] or "").startswith(
        "Budget exhausted: tokens: this request needs"
    ), str(refused)


def test_a_cost_budget_on_a_model_without_a_price_is_refused(grove: Grove) -> None:
    root = grove.create_root("openai:house-model", budget=Budget(cost_usd=1.0)).uuid
    result = grove.ask(root, "hello")
    assert result.error == (
        "Budget exhausted: cost_usd cannot be kept: house-model has no price in the catalog; "
        "set one in [models.prices] or use a token budget"
    )
    # Nothing was sent: the prompt and the mark that its turn ended.
    assert [m.kind for m in grove.history(root)] == ["user", TURN_END_KIND]
    tokens = grove.create_root("openai:house-model", budget=Budget(tokens=10_000)).uuid
    assert grove.ask(tokens, "[[sim tokens=5]] hello").ok


def test_bad_budget_settings_are_refused_with_the_reason() -> None:
    for limits, message in (
        ({"tokens": 10, "reserve_output": 0}, "budget reserve_output must be a positive whole"),
        ({"tokens": 10, "hard_stop": "abort"}, "budget hard_stop is finish or cancel, not 'abort'"),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            Budget(**limits)
