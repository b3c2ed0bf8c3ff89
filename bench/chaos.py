"""Benchmark: a batch under chaos (429s, overloads, errors after 200, broken streams, an agent
host SIGKILLed every few seconds) against the same batch without faults, in one invocation.

How the batch runs is how a user runs `grove batch`: pass 1 is `grove batch`'s own runner
(`Grove.run_batch`: keyed `fork_many`, `wait_any`) on a Grove started
for it; the simulator runs in a process of its own. A stream broken after content is not
retried by the provider (by design), so those tasks' records say error. Then, as a user
reruns the same command, each further pass starts a new Grove on the same store and the same
output file and runs only the ids whose last record is not ok: tasks an earlier pass finished
in the store without writing their record get it from the store (`answered`), the rest run
again. (A new Grove, as a rerun is a new process: nothing of the earlier pass still runs, so
no task runs in two passes at once.) Passes go on until every task is ok or `--max-passes` is
reached. Hosts are killed
during every pass; the restart intensity is raised for the run
(GROVE_HOSTS__MAX_RESTARTS / __RESTART_WINDOW_S) so that hosts keep being replaced.

Every faulted task carries one directive whose text is its own (a sub-millisecond
`headers_ms` tag), since `times=1` counts per exact directive text. The baseline is the same
prompts without directives, one pass, nothing killed. Wall times count each pass's runner,
not Ray's start-up (as bench/batch.py's runner figure); `rerun_start_s` is what the later
passes' Grove start-ups add. `lost` counts tasks without an ok record at the end; read back
from the store afterwards: the usage it records against what the simulator billed for the
answers it began (`usage_recorded_equals_billed`). A host tells the supervisor what a request
may cost at most before it sends it, so a request whose host died before its bill was known
is recorded at that estimate (`requests_estimated`, `usage_estimated`; their bills are not
recorded: `billed_not_recorded`): the requests recorded are those billed
(`requests_recorded_equals_billed`), and the bill is what the store records field for field
but for the estimated requests, billed no more than their estimates
(`usage_exact_or_covered`). The simulator bills every request it read in full but for its
planned faults and error answers, whenever its client went away; a request announced just as
its host died may never have reached it in full, which no one can tell from one that did: it is
recorded at its estimate and not billed (`requests_recorded_not_billed`: recorded less billed;
a planned fault's answer lost with its host counts there too). Also `run_twice` (tasks with
more than one stored answer under their key), `lost_in_store` (tasks with none),
`TurnInterrupted` and `HostRestarted` events.
Provider retries (`Retrying`) reach only a turn's stream, which the batch runner does not
read, so `provider_faults_injected` counts the status faults planted (each is served once and
answered by one provider retry).

Tool-using tasks (`--tool-share` of those without a fault, default half) call a side-effecting
tool at steps 1, 2 and 3, then answer: each call appends one line to a file, and the tool is
not idempotent, so a call cut off by a kill is reported to the model, never run again. From
the file: `side_effects_repeated` (calls that ran more than once) and `side_effects_missing`;
from the simulator's bill: `requests_rebilled` (requests beyond each task's own steps, which
were asked again after an interruption; a fault's reply is not billed) against
`turns_interrupted`.

Against a whole-turn retry (what a host death cost before turns were durable: the turn ran
again from its prompt), derived from the store, as there is no such switch any more: such a
retry sends again every request of the turn that was answered before the interruption, those
whose replies were stored as steps (kept here: each carries its turn's ticket) and those whose
replies were lost with the host (sent again here too). So `whole_turn_rebilled` is
`requests_rebilled` plus the replies of interrupted turns kept as steps; it would also run
their finished tool calls again (`whole_turn_side_effects_repeated`) and spend again the
seconds those replies and calls took (`whole_turn_seconds_again`, from their stored
durations). The `*_per_interrupted_turn` figures divide by `turns_interrupted`.

Prints one JSON line. Run from the repository root: `python bench/chaos.py --n 1000`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    MODEL,
    ExternalSimulator,
    Pacing,
    running_grove,
    simulator_process,
    simulator_stats,
)

from grove.actors.agent.estimates import ESTIMATED
from grove.actors.agent.steps import INTERRUPTED_FACT
from grove.providers.errors import GroveError
from grove.supervisor.batch.done import read_previous
from grove.supervisor.batch.records import OutputLog, record_results
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import Task, id_key, read_tasks
from grove.supervisor.store import open_store
from grove.supervisor.store.records import MessageRecord
from grove.supervisor.turns import calls_tools
from grove.supervisor.usage import UsageTotals, billed_messages, usage_report

CONTEXT = [
    ("user", "Our shop sells 40 kinds of tea. Answer each question about it in one sentence."),
    ("assistant", "Understood: one sentence per question about the tea shop."),
]
FAULT_KINDS = ("429", "529", "error_after_200", "disconnect")
TOOL_STEPS = 3
STATUS_FAULT_KINDS = frozenset({"429", "529", "error_after_200"})  # retried by the provider
BATCH_KEY = "chaos"
# What the store records of a request and the simulator bills alike
COMPARED_USAGE = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


def fault_directive(kind: str, index: int) -> str:
    """One fault that strikes once; the `headers_ms` tag (far below a millisecond) makes the
    text this task's own, so `times=1` counts it alone."""
    tag = f"headers_ms=0.{index + 1:09d}"
    if kind == "429":
        return f"[[sim fault=429 retry_after=0.2 times=1 {tag}]]"
    if kind == "529":
        return f"[[sim fault=529 times=1 {tag}]]"
    if kind == "error_after_200":
        return f"[[sim fault=error_after_200 times=1 {tag}]]"
    return f"[[sim fault=disconnect after=2 times=1 {tag}]]"


def planted_faults(n: int, share: float) -> dict[int, str]:
    """Which tasks carry a fault: `share` of them, spread evenly, the kinds taking turns."""
    faulted = [i for i in range(n) if int((i + 1) * share) > int(i * share)]
    return {i: FAULT_KINDS[turn % len(FAULT_KINDS)] for turn, i in enumerate(faulted)}


def effect(path: str, task: int, step: int) -> str:
    """Record that a task's step ran (a side effect that must not happen twice).

    Args:
        path: the file the side effects are counted in.
        task: the task's number.
        step: the step's number.
    """
    with open(path, "a") as effects:
        effects.write(f"{task}:{step}\n")
    return f"recorded step {step} of task {task}"


def tool_tasks(n: int, faults: dict[int, str], share: float) -> set[int]:
    """Which tasks without a fault call the tool: `share` of them, spread evenly."""
    plain = [i for i in range(n) if i not in faults]
    return {i for turn, i in enumerate(plain) if int((turn + 1) * share) > int(turn * share)}


def tool_directives(index: int, effects: Path) -> str:
    """A call of `effect` at steps 1..TOOL_STEPS of a task, then its answer."""
    calls = [
        {"path": str(effects), "task": index, "step": step} for step in range(1, TOOL_STEPS + 1)
    ]
    return " ".join(
        f"[[sim tool=effect args='{json.dumps(call)}' step={call['step']}]]" for call in calls
    )


def write_tasks(
    path: Path, n: int, faults: dict[int, str], tools: set[int], effects: Path
) -> list[Task]:
    lines = []
    for i in range(n):
        prompt = f"Question {i}: which tea suits customer {i}?"
        if i in faults:
            prompt = f"{fault_directive(faults[i], i)} {prompt}"
        elif i in tools:
            prompt = f"{tool_directives(i, effects)} {prompt}"
        lines.append(json.dumps({"id": i, "prompt": prompt}) + "\n")
    path.write_text("".join(lines))
    return read_tasks(path.read_bytes()).tasks


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for a block (the Grove settings read them)."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class HostKiller:
    """A thread that SIGKILLs one of Grove's agent hosts every `every_s` seconds, the hosts
    taking turns; only pids that `Grove.host_pids()` names are ever signalled."""

    def __init__(self, grove: Any, every_s: float) -> None:
        self.grove = grove
        self.every_s = every_s
        self.kills = 0
        self.turn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                pids = self.grove.host_pids()
            except GroveError:
                continue
            if not pids:
                continue
            host = sorted(pids)[self.turn % len(pids)]
            self.turn += 1
            try:
                os.kill(pids[host], signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.kills += 1

    def __enter__(self) -> HostKiller:
        if self.every_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


@dataclass(kw_only=True, slots=True)
class Pass:
    tasks: int
    seconds: float
    start_s: float
    kills: int
    errors: Counter[str]  # why the tasks this pass left not ok failed


@dataclass(kw_only=True, slots=True)
class BatchRun:
    passes: list[Pass] = field(default_factory=list)


def run_batch(
    simulator: ExternalSimulator,
    tasks: list[Task],
    directory: Path,
    *,
    concurrency: int,
    hosts: int | None,
    kill_every_s: float,
    max_passes: int,
) -> BatchRun:
    """Pass after pass on one store and one output file, as reruns of `grove batch` go."""
    output = directory / "out.jsonl"
    store_url = f"sqlite:///{directory / 'grove.sqlite3'}"
    run = BatchRun()
    for _ in range(max_passes):
        done = read_previous(output).done
        todo = [task for task in tasks if task.key not in done]
        if not todo:
            break
        started = time.perf_counter()
        with running_grove(simulator, store_url=store_url, hosts=hosts) as grove:
            root = grove.create_root(MODEL, tools=[effect]).uuid
            grove.seed(root, CONTEXT)
            totals = Totals(total=len(todo))
            with OutputLog(output) as log, HostKiller(grove, kill_every_s) as killer:
                start_s = time.perf_counter() - started
                begun = time.perf_counter()
                steps = grove.run_batch(root, todo, concurrency=concurrency, key=BATCH_KEY)
                for _ in record_results(steps, log, totals):
                    pass
                seconds = time.perf_counter() - begun
        ran = {task.key for task in todo}
        errors = Counter(
            short_error(record)
            for key, record in last_records(output).items()
            if key in ran and record["status"] != "ok"
        )
        run.passes.append(
            Pass(
                tasks=len(todo), seconds=seconds, start_s=start_s, kills=killer.kills, errors=errors
            )
        )
    return run


def last_records(output: Path) -> dict[str, dict[str, Any]]:
    """The last record of each id in an output file (what `grove batch` counts)."""
    records: dict[str, dict[str, Any]] = {}
    for line in output.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            records[id_key(record["id"])] = record
    return records


def short_error(record: dict[str, Any]) -> str:
    """An error record's reason without what varies from task to task."""
    return str(record.get("error") or "").split(":")[0][:60]


def store_tally(directory: Path) -> dict[str, Any]:
    """Read back from the store: stored answers per task key, and the supervision events."""
    store = open_store(f"sqlite:///{directory / 'grove.sqlite3'}")
    try:
        answers: Counter[str] = Counter()
        for record in store.list_agents(include_ended=True):
            key = record.metadata.get("key")
            if isinstance(key, str) and key.startswith(f"batch:{BATCH_KEY}:"):
                own = store.agent_messages(record.uuid)
                answers[key] += sum(
                    1 for m in own if m.kind == "assistant" and not calls_tools(m.data)
                )
        logged = store.events(limit=10_000_000)
        events = Counter(event.kind for event in logged)
        agents = store.list_agents(include_ended=True)
        interrupted = {
            str(event.payload["ticket"])
            for event in logged
            if event.kind == "TurnInterrupted" and event.payload.get("ticket")
        }
        kept = kept_steps(
            [m for agent in agents for m in store.agent_messages(agent.uuid)], interrupted
        )
        recorded = usage_report(store, agents).total
        billed = [message for agent in agents for message in billed_messages(store, agent)]
        kinds = Counter(
            (message.kind, bool(message.data.get("usage", {}).get("output_tokens")))
            for message in billed
        )
        estimated = UsageTotals()
        for message in billed:
            if message.data.get(ESTIMATED):
                estimated.add(message)
    finally:
        store.close()
    usage = {name: getattr(recorded, name) for name in COMPARED_USAGE}
    by_kind = {
        f"{kind}{'' if output else ' (no output)'}": n for (kind, output), n in kinds.items()
    }
    return {
        "answers": answers,
        "events": events,
        "usage": usage,
        "estimated": {name: getattr(estimated, name) for name in COMPARED_USAGE},
        "by_kind": by_kind,
        "kept": kept,
    }


def covered(recorded: dict[str, int], estimated: dict[str, int], billed: dict[str, int]) -> bool:
    """Whether the bill is what the store records, field for field, its requests recorded at
    an estimate aside: what the bill holds beyond the requests recorded exactly is no more
    requests than were estimated (one announced as its host died may never have been sent),
    of no more tokens than their estimates (a prompt's cache tokens are part of its input)."""
    beyond = {name: billed[name] - recorded[name] + estimated[name] for name in COMPARED_USAGE}
    limits = {
        name: estimated["input_tokens"] if name.startswith("cache_") else estimated[name]
        for name in COMPARED_USAGE
    }
    return all(0 <= beyond[name] <= limits[name] for name in COMPARED_USAGE)


@dataclass(kw_only=True, slots=True)
class KeptSteps:
    """What interrupted turns had stored as steps when their host died: what a whole-turn
    retry would have done again."""

    replies: int = 0  # requests answered, stored: sent again by a whole-turn retry
    calls: int = 0  # tool calls finished, stored: run again by a whole-turn retry
    seconds: float = 0.0  # what those replies and calls took


def kept_steps(messages: list[MessageRecord], interrupted: set[str]) -> KeptSteps:
    """The steps stored under the tickets of interrupted turns (a step is keyed
    `ticket:index`; the resumed run of the turn has a ticket of its own)."""
    kept = KeptSteps()
    for message in messages:
        if (message.ticket or "").partition(":")[0] not in interrupted:
            continue
        if message.kind == "assistant":
            kept.replies += 1
            kept.seconds += float(message.data.get("duration_s") or 0.0)
        elif message.kind == "tool_result":
            facts = message.data.get("calls", {})
            for part in message.data.get("parts", []):
                fact = facts.get(part.get("call_id"), {})
                if not fact.get(INTERRUPTED_FACT):
                    kept.calls += 1
                    kept.seconds += float(fact.get("duration_ms") or 0.0) / 1000
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="tasks")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=None, help="agent hosts (default: cores)")
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds; 0: no kills")
    parser.add_argument("--fault-share", type=float, default=0.2, help="tasks with a fault")
    parser.add_argument(
        "--tool-share", type=float, default=0.5, help="tasks without a fault that call a tool"
    )
    parser.add_argument("--max-passes", type=int, default=3, help="the run and its reruns")
    parser.add_argument("--max-restarts", type=int, default=1000, help="per host per window")
    Pacing.add_arguments(parser)
    args = parser.parse_args()
    pacing = Pacing.of(args)
    faults = planted_faults(args.n, args.fault_share)
    tools = tool_tasks(args.n, faults, args.tool_share)
    with (
        tempfile.TemporaryDirectory(prefix="grove-bench-chaos-") as name,
        simulator_process(pacing) as simulator,
    ):
        chaos_dir, plain_dir = Path(name) / "chaos", Path(name) / "baseline"
        chaos_dir.mkdir()
        plain_dir.mkdir()
        effects = chaos_dir / "effects.txt"
        chaos_tasks = write_tasks(chaos_dir / "tasks.jsonl", args.n, faults, tools, effects)
        with environment(
            GROVE_HOSTS__MAX_RESTARTS=str(args.max_restarts), GROVE_HOSTS__RESTART_WINDOW_S="60"
        ):
            chaos = run_batch(
                simulator,
                chaos_tasks,
                chaos_dir,
                concurrency=args.concurrency,
                hosts=args.hosts,
                kill_every_s=args.kill_every,
                max_passes=args.max_passes,
            )
        chaos_records = last_records(chaos_dir / "out.jsonl")
        tally = store_tally(chaos_dir)
        ran = Counter(effects.read_text().split()) if effects.exists() else Counter[str]()
        billed = simulator_stats(simulator)["billed"]  # the chaos run's, before the baseline
        plain_tasks = write_tasks(
            plain_dir / "tasks.jsonl", args.n, {}, tools, plain_dir / "effects.txt"
        )
        baseline = run_batch(
            simulator,
            plain_tasks,
            plain_dir,
            concurrency=args.concurrency,
            hosts=args.hosts,
            kill_every_s=0,
            max_passes=1,
        )
        baseline_records = last_records(plain_dir / "out.jsonl")
    keys = [f"batch:{BATCH_KEY}:{task.key}" for task in chaos_tasks]
    answers: Counter[str] = tally["answers"]
    events: Counter[str] = tally["events"]
    ok_ids = {key for key, record in chaos_records.items() if record["status"] == "ok"}
    wall_s = sum(p.seconds for p in chaos.passes)
    rerun_start_s = sum(p.start_s for p in chaos.passes[1:])
    baseline_s = baseline.passes[0].seconds
    provider_faults = sum(kind in STATUS_FAULT_KINDS for kind in faults.values())
    wanted = [f"{task}:{step}" for task in sorted(tools) for step in range(1, TOOL_STEPS + 1)]
    # each task's own requests: its answer, and a step per call for the tool tasks (a fault's
    # answer is not billed: the simulator bills the replies it began, not its errors or breaks)
    requests_needed = args.n + TOOL_STEPS * len(tools)
    kept: KeptSteps = tally["kept"]
    whole_turn_rebilled = billed["requests"] - requests_needed + kept.replies

    def per_turn(value: float) -> float:
        return round(value / max(1, events["TurnInterrupted"]), 3)

    report = {
        "bench": "chaos",
        "tasks": args.n,
        "concurrency": args.concurrency,
        "simulator": pacing.as_dict(),
        "faults_planted": dict(sorted(Counter(faults.values()).items())),
        "completed": len(ok_ids),
        "run_twice": sum(1 for key in keys if answers[key] > 1),
        "lost": args.n - len(ok_ids),
        "lost_in_store": sum(1 for key in keys if answers[key] == 0),
        "passes": [p.tasks for p in chaos.passes],
        "needed_second_pass": chaos.passes[1].tasks if len(chaos.passes) > 1 else 0,
        "pass_errors": [dict(p.errors) for p in chaos.passes],
        "retries": events["TurnInterrupted"] + provider_faults,
        "turns_interrupted": events["TurnInterrupted"],
        "provider_faults_injected": provider_faults,
        "host_kills": sum(p.kills for p in chaos.passes),
        "hosts_restarted": events["HostRestarted"],
        "hosts_given_up": events["HostGivenUp"],
        "wall_s": round(wall_s, 2),
        "pass_wall_s": [round(p.seconds, 2) for p in chaos.passes],
        "rerun_start_s": round(rerun_start_s, 2),
        "baseline_wall_s": round(baseline_s, 2),
        "baseline_completed": sum(1 for r in baseline_records.values() if r["status"] == "ok"),
        "ratio": round(wall_s / baseline_s, 3),
        "ratio_with_rerun_start": round((wall_s + rerun_start_s) / baseline_s, 3),
        "usage_recorded": tally["usage"],
        "usage_billed": billed,
        # the same fields on both sides: requests, input (whole prompts), output, cache tokens
        "usage_recorded_equals_billed": tally["usage"]
        == {name: billed[name] for name in COMPARED_USAGE},
        "requests_recorded_equals_billed": tally["usage"]["requests"] == billed["requests"],
        "requests_recorded_not_billed": tally["usage"]["requests"] - billed["requests"],
        "requests_estimated": tally["estimated"]["requests"],
        "usage_estimated": tally["estimated"],
        "usage_exact_or_covered": covered(tally["usage"], tally["estimated"], billed),
        "billed_not_recorded": billed["requests"]
        - (tally["usage"]["requests"] - tally["estimated"]["requests"]),
        "recorded_requests_by_kind": tally["by_kind"],
        "tool_tasks": len(tools),
        "side_effects": sum(ran.values()),
        "side_effects_repeated": sum(count - 1 for count in ran.values() if count > 1),
        "side_effects_missing": sum(1 for call in wanted if not ran[call]),
        "requests_needed": requests_needed,
        "requests_rebilled": billed["requests"] - requests_needed,
        "rebilled_per_interrupted_turn": per_turn(billed["requests"] - requests_needed),
        "whole_turn_rebilled": whole_turn_rebilled,
        "whole_turn_rebilled_per_interrupted_turn": per_turn(whole_turn_rebilled),
        "rebilled_vs_whole_turn": round(
            (billed["requests"] - requests_needed) / max(1, whole_turn_rebilled), 3
        ),
        "whole_turn_side_effects_repeated": kept.calls,
        "whole_turn_seconds_again": round(kept.seconds, 2),
        "whole_turn_seconds_again_per_interrupted_turn": per_turn(kept.seconds),
        "whole_turn_method": (
            "derived, not run: a whole-turn retry sends again every answered request of the "
            "turn, so whole_turn_rebilled = requests_rebilled + replies of interrupted turns "
            "stored as steps under their ticket; it runs their finished tool calls again and "
            "spends their stored durations again"
        ),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
