"""`grove batch`: every task of a JSONL file as a forked child of one root holding the shared
context, run by supervisor/batch/ on a service's Grove or its own; the plan is batch_plan.py's.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from grove.cli.batch_plan import BatchPlan, plan_batch
from grove.cli.batch_progress import progress_display
from grove.cli.context import (
    AllowOption,
    BudgetCostOption,
    BudgetTimeOption,
    BudgetTokensOption,
    CliContext,
    HostsOption,
    OutputRetriesOption,
    OutputSchemaOption,
    SimulateOption,
    TierOption,
    ToolsOption,
    cli_budget,
    cli_tier,
    fail,
    undecodable_text,
)
from grove.cli.preflight import preflight, refuse_output
from grove.cli.printable import printable
from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY

if TYPE_CHECKING:  # the pipeline's stages are imported where they run: other commands stay quick
    from grove.supervisor.batch import OutputLog
    from grove.supervisor.contract import GroveAPI

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
    simulate: SimulateOption = False,
    hosts: HostsOption = None,
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
    task_tools: Annotated[
        list[str] | None,
        typer.Option(
            "--task-tool",
            metavar="NAME",
            help="Keep only this of the root's tools in every task (repeatable; default: all "
            "of them). A name the root lacks refuses the tasks.",
        ),
    ] = None,
    allow: AllowOption = None,
    budget_cost: BudgetCostOption = None,
    budget_tokens: BudgetTokensOption = None,
    budget_time: BudgetTimeOption = None,
    output_schema: OutputSchemaOption = None,
    output_retries: OutputRetriesOption = DEFAULT_OUTPUT_RETRIES,
    tier: TierOption = None,
) -> None:
    """Run every task of TASKS.jsonl as a forked child of one root agent.

    TASKS.jsonl holds one JSON object a line: "id" (string or number, unique; 7 and "7" are the
    same id), "prompt" (text), and optionally "model" (MODEL[/THINKING], else --model), "system"
    (a system prompt for that task), "schema" (a JSON schema its answer must match, else
    --output-schema's) and "tier" (standard, flex or batch, else --tier). Blank lines are
    skipped.

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

    A typed task's line also holds "output" (the checked JSON, null unless ok), "output_retries"
    and "retry_usage" (what the answers sent back cost, counted in "usage" too); an answer still
    malformed after --output-retries tries has "status": "invalid_output", its raw "text" kept
    and its last problem as "error", and runs again on a rerun.

    A terminal shows a progress bar; otherwise a progress line goes to stderr every 10 s. With a
    service up the tasks run there (and show in its dashboard); the output file is written here.
    --address ADDRESS (before or after the command) runs them on that Ray cluster instead.

    Exit code: 0 when every task is ok, 1 when a task failed or a line is malformed, 2 when the
    command line, the files or the model cannot be used, 130 after Ctrl+C.
    """
    from grove.supervisor.batch import OutputLog, batch_key, line_error_record, summary_line

    context: CliContext = ctx.obj
    for what, path in (
        ("tasks file path", tasks_path),
        ("context file path", context_path),
        ("output path", output_path),
    ):
        problem = undecodable_text(what, str(path)) if path is not None else None
        if problem:
            fail(problem, code=2)
    remote = context.remote(simulate=simulate, hosts=hosts)
    if worktrees and remote is None:  # a service makes them in its own directory
        needs_repository(Path.cwd())
    defaults = context.defaults(remote, simulate=simulate)
    budget = cli_budget(defaults, budget_cost, budget_tokens, budget_time)
    chosen_tier = cli_tier(tier, defaults)
    plan = plan_batch(tasks_path, context_path, output_path, model, defaults, output_schema)
    if plan.todo:
        root_model = (model or defaults.model) if plan.root_model else None
        preflight(
            defaults,
            models=[root_model, advisor, *(task.model for task in plan.todo)],
            tools=tools,
            budget=budget,
            joined=context.joins_cluster(remote),
        )
    try:  # what the checks cannot know (a kernel file, a root's rights) shows on opening
        output = OutputLog(plan.output).opened()
    except OSError as exc:
        refuse_output(plan.output, exc.strerror or str(exc))
    sys.stderr.write(plan.line + "\n")
    started = time.monotonic()
    ending = Ending()
    with output as log:
        for error in plan.task_file.errors:
            if (error.line, error.message) not in plan.previous.line_errors:
                log.append(line_error_record(error))
        if plan.todo:
            grove = remote or context.grove(simulate=simulate, hosts=hosts)
            root_options = {
                "tools": defaults.tools(tools, defaults=False),
                "allow": allow or (),
                "budget": budget,
                "tier": chosen_tier,
            }
            run_options = {
                "concurrency": concurrency,
                "advisor": advisor,
                "key": batch_key(plan.output),
                "workspace": "worktree" if worktrees else None,
                "tools": task_tools,
                "output_type": plan.schema,
                "output_retries": output_retries,
                "tier": chosen_tier,
            }
            ending = run_plan(grove, plan, log, root_options, run_options)
    if ending.stopped is not None:
        sys.stderr.write(printable(ending.stopped) + "\n")
    elapsed = time.monotonic() - started
    totals = plan.totals
    line = summary_line(totals, elapsed, str(plan.output), interrupted=ending.unfinished)
    sys.stdout.write(line + "\n")
    if ending.unfinished >= 0:
        raise typer.Exit(EXIT_INTERRUPTED)
    if totals.failed or totals.malformed or totals.over_budget or ending.stopped is not None:
        raise typer.Exit(1)


def needs_repository(directory: Path) -> None:
    """--worktrees outside a git repository: exit 2 at once, before Ray starts."""
    import asyncio

    from grove.actors.tools.grove_git import WorktreeError, repository

    try:
        found = asyncio.run(repository(str(directory)))
    except WorktreeError as exc:
        fail(f"--worktrees cannot work in {directory}: {exc}", code=2)
    if found is None:
        fail(
            f"--worktrees needs a git repository, and {directory} is not in one: run the batch "
            "inside a repository (git init; git commit), or leave --worktrees off",
            code=2,
        )


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended early: tasks left by Ctrl+C (-1: none was), or why it stopped."""

    unfinished: int = -1
    stopped: str | None = None


def run_plan(
    grove: GroveAPI,
    plan: BatchPlan,
    log: OutputLog,
    root_options: dict[str, Any],
    run_options: dict[str, Any],
) -> Ending:
    """The root with the shared context, then the tasks under it, each record to `log` as it
    comes with the progress shown; Ctrl+C or SIGTERM, or Grove giving out, end it early."""
    from grove.supervisor.batch import record_results

    progress = None
    on_term = signal.signal(signal.SIGTERM, _interrupt)
    try:
        grove.start()
        model = str(plan.root_model) if plan.root_model else None
        root = grove.create_root(model, **root_options)
        if plan.seed:
            grove.seed(root.uuid, plan.seed)
        progress = progress_display(plan.totals.total)  # rate and ETA count from here
        steps = grove.run_batch(root.uuid, plan.todo, **run_options)
        for totals in record_results(steps, log, plan.totals):
            progress.update(totals)
    except KeyboardInterrupt:
        return Ending(unfinished=plan.totals.total - plan.totals.done)
    except grove_failures() as exc:
        return Ending(stopped=f"batch stopped: {failure_text(exc)}")
    finally:
        signal.signal(signal.SIGTERM, on_term)
        if progress is not None:
            progress.close()
        grove.close()
    return Ending()


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops a batch the way Ctrl+C does."""
    raise KeyboardInterrupt


def grove_failures() -> tuple[type[Exception], ...]:
    """What stops a batch with a report instead of a traceback: Grove giving out, and Ray
    when the batch runs on a Grove of its own (only then is Ray loaded)."""
    if "ray" not in sys.modules:
        return (GroveError,)
    from ray.exceptions import RayError

    return (GroveError, RayError)


def failure_text(exc: Exception) -> str:
    """`Type: text`; a batch that the service's run of it stopped says that as it is."""
    from grove.server.client import BatchStopped

    return str(exc) if isinstance(exc, BatchStopped) else f"{type(exc).__name__}: {exc}"
