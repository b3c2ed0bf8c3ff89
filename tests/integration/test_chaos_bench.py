"""bench/chaos.py end to end at a tiny size: the simulator in its own process, planted faults,
tool-using tasks, hosts SIGKILLed every two seconds, the rerun pass, the baseline, and the one
JSON line it prints. It runs in this process, its Groves in the shared Ray (as a program's
Groves in a Ray it runs already), not as a command starting Ray of its own.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from tests.integration.shared_ray import SHARED_RAY

REPO_ROOT = Path(__file__).resolve().parents[2]
# One wave of twelve: under kills a pass lasts about as long as the slowest turns of each
# wave, so fewer tasks save time only in fewer waves; twelve at once still meet every fault
# and many kills.
TASKS = 12
CONCURRENCY = 12
FAULT_SHARE = 0.34  # every third task: one of each of the four faults
TOOL_TASKS = 4  # half of the eight without a fault
# Two hosts (the cores of a small machine), killed in turn every two seconds, so each lives
# four seconds between kills: a host restarting under load answers before it is killed again
# (a kill a second with two hosts dragged a pass on), and each of the run's three Groves
# starts two host processes, not four.
HOSTS = 2
KILL_EVERY_S = 2


def test_chaos_bench_loses_nothing_and_runs_nothing_twice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [
        "bench/chaos.py", "--n", str(TASKS), "--concurrency", str(CONCURRENCY),
        "--fault-share", str(FAULT_SHARE), "--kill-every", str(KILL_EVERY_S),
        "--hosts", str(HOSTS),
    ])  # fmt: skip
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))  # its `harness`, as when run
    SHARED_RAY.ensure()
    runpy.run_path(str(REPO_ROOT / "bench" / "chaos.py"), run_name="__main__")
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith('{"bench": ')]
    assert len(lines) == 1, printed[-2000:]
    report = json.loads(lines[0])
    assert report["bench"] == "chaos"
    assert report["tasks"] == TASKS
    assert report["faults_planted"] == {"429": 1, "529": 1, "disconnect": 1, "error_after_200": 1}
    assert report["completed"] == TASKS
    assert report["lost"] == 0
    assert report["lost_in_store"] == 0
    assert report["run_twice"] == 0
    assert report["host_kills"] >= 1
    assert report["hosts_restarted"] >= 1
    assert report["hosts_given_up"] == 0
    # Only the broken stream (not retried by the provider, by design) fails a first attempt;
    # every host death is absorbed by the retries of the supervisor.
    first_pass_errors = report["pass_errors"][0]
    assert set(first_pass_errors) <= {"anthropic stream broke after content arrived"}
    assert report["passes"][0] == TASKS
    assert report["needed_second_pass"] == sum(first_pass_errors.values())
    assert report["retries"] >= report["provider_faults_injected"] == 3
    assert report["baseline_completed"] == TASKS
    assert report["wall_s"] > 0 and report["baseline_wall_s"] > 0
    assert report["ratio"] == pytest.approx(report["wall_s"] / report["baseline_wall_s"], rel=0.01)
    # Half the tasks without a fault call a side-effecting tool three times: none ran twice,
    # and a turn cut off asked again for at most the one request in flight when it was.
    assert report["tool_tasks"] == TOOL_TASKS
    assert report["side_effects_repeated"] == 0
    # a call cut off before it ran is missing (the model is told it may not have happened)
    assert report["side_effects"] + report["side_effects_missing"] == 3 * TOOL_TASKS
    assert report["side_effects"] >= 2 * TOOL_TASKS
    assert report["requests_rebilled"] <= report["turns_interrupted"]
    # Recorded usage is compared with the bill field for field, like with like.
    recorded, billed = report["usage_recorded"], report["usage_billed"]
    assert {"requests", "input_tokens", "output_tokens"} <= set(recorded) <= set(billed)
    same = all(recorded[name] == billed[name] for name in recorded)
    assert report["usage_recorded_equals_billed"] is same
    assert same or report["billed_not_recorded"] > 0  # only requests answered as a host died
    # Every billed request is in the store once: its bill, or the estimate its host told the
    # supervisor before sending it, which is no smaller than the bill.
    shown = ("usage_recorded", "usage_billed", "usage_estimated", "requests_recorded_not_billed")
    assert report["usage_exact_or_covered"], {name: report[name] for name in shown}
