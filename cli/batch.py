"""`grove batch`: every task of a JSONL file as a forked child of one root holding the shared
context, at most --concurrency in flight, one output record per task as it finishes.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import sys
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.batch_input import ContextError, InputTooLarge, Task, read_context, read_tasks
from cli.batch_output import (
    OutputLog,
    error_record,
    line_error_record,
    read_previous,
    skipped_record,
    task_record,
)
from cli.batch_progress import PlainProgress, Progress, RichProgress, Totals, summary_line
from cli.context import (
    AllowOption,
    BudgetCostOption,
    BudgetTimeOption,
    BudgetTokensOption,
    CliContext,
    ToolsOption,
    cli_budget,
    fail,
    root_tools,
    undecodable_text,
)
from cli.printable import printable
from providers.catalog import ModelSpec, parse_model_spec
from providers.errors import GroveError, ModelSpecError
from supervisor.errors import BUDGET_EXHAUSTED

if TYPE_CHECKING:
    from supervisor.api import Grove

DEFAULT_CONCURRENCY = 32
WAIT_TICK_S = 1.0  # how often the progress display hears from a run with nothing finishing
ADVICE_WAIT_S = 120.0  # the longest a finished task's record waits for its reviewer
REVIEW_POLL_S = 0.1
EXIT_INTERRUPTED = 130


def batch_command(
    ctx: typer.Context,
    tasks_path: Annotated[Path, typer.Argument(metavar="TASKS.jsonl", help="The tasks.")],
    context_path: Annotated[
        Path | None,
        typer.Option("--context", metavar="FILE", help="Shared context (.jsonl or plain text)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="MODEL[/THINKING] for tasks without their own."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Tasks in flight at most.")
    ] = DEFAULT_CONCURRENCY,
    output_path: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="OUT.jsonl", help="Default: TASKS.out.jsonl."),
    ] = None,
    simulate: Annotated[
        bool,
        typer.Option("--simulate", help="Answer from the built-in provider simulator (offline)."),
    ] = False,
    address: Annotated[
        str | None, typer.Option("--address", help="Join this Ray cluster (else RAY_ADDRESS).")
    ] = None,
    hosts: Annotated[
        int | None, typer.Option("--hosts", min=1, help="Agent host actors to start.")
    ] = None,
    advisor: Annotated[
        str | None,
        typer.Option(
            "--advisor",
            metavar="MODEL[/THINKING]",
            help="Attach a reviewer on this model to every task; its advice goes in `advice`.",
        ),
    ] = None,
    worktrees: Annotated[
        bool,
        typer.Option(
            "--worktrees",
            help="Each task in a git worktree of its own (branch grove/<uuid8>), committed at "
            "its end; its record names the branch and the diff stat.",
        ),
    ] = False,
    tools: ToolsOption = None,
    allow: AllowOption = None,
    budget_cost: BudgetCostOption = None,
    budget_tokens: BudgetTokensOption = None,
    budget_time: BudgetTimeOption = None,
) -> None:
    """Run every task of TASKS.jsonl as a forked child of one root agent.

    TASKS.jsonl holds one JSON object a line: "id" (string or number, unique; 7 and "7" are the
    same id), "prompt" (text), and optionally "model" (MODEL[/THINKING], else --model) and "system"
    (a system prompt for that task). Blank lines are skipped.

    --context FILE becomes the root agent's history, which every task inherits: a .jsonl file holds
    one {"role": "user"|"assistant", "content": "..."} message a line; any other file is plain text
    and becomes one user message.

    Each finished task appends one line to the output: {"id", "agent", "status": "ok"|"error",
    "text", "usage", "cost_usd", "saved_usd" (what provider caching saved), "error", "advice"},
    and "branch" and "diff_stat" with --worktrees (or [tools] workspace = "worktree"); a
    malformed input line appends {"id": null,
    "line": N, "status": "error", "error": "..."} once. Running the same command again skips the ids
    whose last output line is ok and runs the rest; lines are only ever appended, so when an id
    appears more than once its last line counts.

    Exit code: 0 when every task is ok, 1 when a task failed or a line is malformed, 2 when the
    command line, the files or the model cannot be used, 130 after Ctrl+C.
    """
    context: CliContext = ctx.obj
    for what, path in (
        ("tasks file path", tasks_path),
        ("context file path", context_path),
        ("output path", output_path),
    ):
        problem = undecodable_text(what, str(path)) if path is not None else None
        if problem:
            fail(problem, code=2)
    batch_context = CliContext(store=context.store, address=address or context.address)
    settings = batch_context.settings()
    budget = cli_budget(settings, budget_cost, budget_tokens, budget_time)
    aliases = settings.models.aliases
    try:
        with tasks_path.open("rb") as stream:
            task_file = read_tasks(stream, aliases, what=str(tasks_path))
    except OSError as exc:
        fail(f"cannot read {tasks_path}: {exc.strerror or exc}", code=2)
    except InputTooLarge as exc:
        fail(f"{exc}; split the tasks into several files", code=2)
    try:
        seed = read_context(context_path) if context_path is not None else []
    except ContextError as exc:
        fail(str(exc), code=2)
    out = output_path or default_output(tasks_path)
    if out.exists() and out.resolve() == tasks_path.resolve():
        fail(f"the output {out} is the tasks file itself; name another with --output", code=2)
    previous = read_previous(out)
    if previous.unreadable:
        sys.stderr.write(f"{out}: {previous.unreadable} unreadable line(s) ignored\n")
    todo = [task for task in task_file.tasks if task.key not in previous.done]
    root_model = resolve_root_model(model or settings.defaults.model, aliases, todo)
    totals = Totals(
        total=len(todo),
        malformed=len(task_file.errors),
        skipped=len(task_file.tasks) - len(todo),
    )
    sys.stderr.write(
        f"batch: {len(todo)} task(s) to run, {totals.skipped} skipped (already ok), "
        f"{totals.malformed} malformed line(s); output {out}\n"
    )
    started = time.monotonic()
    unfinished = -1
    stopped: str | None = None
    with OutputLog(out) as log:
        for error in task_file.errors:
            if (error.line, error.message) not in previous.line_errors:
                log.append(line_error_record(error))
        if todo:
            from ray.exceptions import RayError

            batch_context.checked_store()

            from supervisor.api import Grove

            grove = Grove(settings=settings, simulate=simulate, hosts=hosts)
            runner = BatchRunner(
                grove,
                log,
                totals,
                concurrency,
                advisor=advisor,
                batch_key=hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16],
                workspace="worktree" if worktrees else None,
            )
            on_term = signal.signal(signal.SIGTERM, _interrupt)
            try:
                grove.start()
                root = grove.create_root(
                    str(root_model) if root_model else None,
                    tools=root_tools(settings, tools, defaults=False),
                    allow=allow or (),
                    budget=budget,
                )
                if seed:
                    grove.seed(root.uuid, list(seed))
                runner.run(root.uuid, todo)
            except KeyboardInterrupt:
                unfinished = totals.total - totals.done
            except (GroveError, RayError) as exc:  # Ray or the supervisor gave out
                stopped = f"batch stopped: {type(exc).__name__}: {exc}"
            finally:
                signal.signal(signal.SIGTERM, on_term)
                runner.close()
                grove.close()
    if stopped is not None:
        sys.stderr.write(printable(stopped) + "\n")
    sys.stdout.write(
        summary_line(totals, time.monotonic() - started, str(out), interrupted=unfinished) + "\n"
    )
    if unfinished >= 0:
        raise typer.Exit(EXIT_INTERRUPTED)
    if totals.failed or totals.malformed or totals.over_budget or stopped is not None:
        raise typer.Exit(1)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops a batch the way Ctrl+C does."""
    raise KeyboardInterrupt


def default_output(tasks_path: Path) -> Path:
    """TASKS.jsonl -> TASKS.out.jsonl beside it (any other name gets `.out.jsonl` added)."""
    stem = tasks_path.name.removesuffix(".jsonl")
    return tasks_path.with_name(f"{stem}.out.jsonl")


def resolve_root_model(
    text: str | None, aliases: dict[str, str], tasks: Iterable[Task]
) -> ModelSpec | None:
    """The root's model; None is fine only when every task to run names its own."""
    if not text:
        if any(task.model is None for task in tasks):
            from supervisor.rules import NO_MODEL_FLAG_TEXT

            fail(NO_MODEL_FLAG_TEXT, code=2)
        return None
    try:
        return parse_model_spec(text, aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)


def is_over_budget(error: str | None) -> bool:
    return error is not None and error.startswith(BUDGET_EXHAUSTED)


class BatchRunner:
    """Keeps at most `concurrency` tasks in flight: forks the next ones in chunks (one
    fork_many per model and system prompt) as earlier ones finish, and records each result."""

    def __init__(
        self,
        grove: Grove,
        log: OutputLog,
        totals: Totals,
        concurrency: int,
        *,
        advisor: str | None = None,
        batch_key: str = "",
        workspace: str | None = None,
    ) -> None:
        self.grove = grove
        self.workspace = workspace  # "worktree", "shared", or None: `[tools] workspace`
        self.batch_key = batch_key
        self.log = log
        self.totals = totals
        self.concurrency = concurrency
        self.advisor = advisor
        self.in_flight: dict[str, Task] = {}
        # Finished tasks whose reviewer is still at work: their records wait for its advice.
        self.reviewing: dict[str, tuple[dict[str, Any], float]] = {}
        self.progress: Progress | None = None
        self.over_budget: str | None = None  # why no more tasks are scheduled

    def run(self, root: str, tasks: list[Task]) -> None:
        """Run `tasks` to their end; rate and ETA count from here, after Ray has started."""
        progress = self.progress = (
            RichProgress(sys.stderr, self.totals.total)
            if sys.stderr.isatty()
            else PlainProgress(sys.stderr)
        )
        pending = deque(self._already_answered(tasks))
        try:
            while pending or self.in_flight or self.reviewing:
                self._step(root, pending)
                progress.update(self.totals)
        finally:  # a provider-side copy of the shared context goes with the batch
            with contextlib.suppress(GroveError):
                self.grove.release_caches(root)

    def _step(self, root: str, pending: deque[Task]) -> None:
        """Fork what the free slots take, then take in what finished (at most one tick)."""
        self._fork(root, pending)
        if self.over_budget is not None:  # the rest is not run; a rerun picks it up
            while pending:
                self._finish(skipped_record(pending.popleft(), None, self.over_budget))
        if self.in_flight:
            done = self.grove.wait_any(list(self.in_flight), WAIT_TICK_S)
            for agent, result in done.items():
                task = self.in_flight.pop(agent)
                if result is not None and is_over_budget(result.error):
                    self.over_budget = str(result.error)
                    self._finish(skipped_record(task, agent, self.over_budget))
                    continue
                record = task_record(task, agent, result)
                if self.advisor is None:
                    self._finish(record)
                else:
                    self.reviewing[agent] = (record, time.monotonic() + ADVICE_WAIT_S)
        elif self.reviewing:
            time.sleep(REVIEW_POLL_S)
        self._collect_advice()

    def key(self, task: Task) -> str:
        """The key a task's child is forked under: this output file's batch, this task."""
        return f"batch:{self.batch_key}:{task.key}"

    def _already_answered(self, tasks: list[Task]) -> list[Task]:
        """Tasks an earlier, interrupted run of this batch finished without writing their
        record get it now from the store; only the others run (none runs twice)."""
        found = self.grove.answered([self.key(task) for task in tasks])
        left = []
        for task in tasks:
            hit = found.get(self.key(task))
            if hit is None:
                left.append(task)
            else:
                self._finish(task_record(task, hit[0], hit[1]))
        return left

    def _collect_advice(self) -> None:
        """Records of tasks whose reviewer is done (or out of time) go out with the advice."""
        for agent, (record, deadline) in list(self.reviewing.items()):
            if self.grove.wait_reviews(agent, 0.0) == 0 or time.monotonic() > deadline:
                del self.reviewing[agent]
                record["advice"] = [
                    {"reviewer": card.data.get("reviewer"), "severity": severity, "note": note}
                    for card in self.grove.advice(agent)
                    for severity, note in card.data.get("notes", [])
                ]
                self._finish(record)

    def _fork(self, root: str, pending: deque[Task]) -> None:
        if self.over_budget is not None:
            return
        free = min(self.concurrency - len(self.in_flight), len(pending))
        groups: dict[tuple[str | None, str | None], list[Task]] = {}
        for _ in range(free):
            task = pending.popleft()
            groups.setdefault((task.model, task.system), []).append(task)
        for (model, system), group in groups.items():
            try:
                agents = self.grove.fork_many(
                    root,
                    [task.prompt for task in group],
                    model,
                    system=system,
                    advisor=self.advisor,
                    retry_interrupted=True,
                    keys=[self.key(task) for task in group],
                    workspace=self.workspace,
                )
            except GroveError as exc:  # refused for these tasks: their records say why
                if is_over_budget(str(exc)):
                    self.over_budget = str(exc)
                for task in group:
                    make = skipped_record if self.over_budget else error_record
                    self._finish(make(task, None, str(exc)))
                continue
            self.in_flight.update(zip(agents, group, strict=True))

    def _finish(self, record: dict[str, Any]) -> None:
        self.log.append(record)
        self.totals.count(record)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
