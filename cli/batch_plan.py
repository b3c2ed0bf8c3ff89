"""The read and skip stages of `grove batch` on the command line: the tasks, the shared context
and what an earlier run's output says is done, as one `BatchPlan`; what cannot be used exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grove.cli.context import cli_output_schema, fail
from grove.cli.preflight import check_output
from grove.providers.plurals import counted

if TYPE_CHECKING:  # the pipeline's stages are imported where they run: other commands stay quick
    from grove.providers.base import JSONObject, ProviderName
    from grove.providers.model_specs import ModelSpec
    from grove.supervisor.batch import PreviousRun, Task, TaskFile, Totals
    from grove.supervisor.command_defaults import CommandDefaults


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchPlan:
    """What the read and skip stages found: the tasks, the shared context, the output and
    what an earlier run left in it, the tasks still to run and their root's model."""

    task_file: TaskFile
    seed: list[tuple[str, str]]
    output: Path
    previous: PreviousRun
    todo: list[Task]
    root_model: ModelSpec | None
    schema: JSONObject | None
    totals: Totals

    @property
    def line(self) -> str:
        """What the plan is, for stderr."""
        totals = self.totals
        return (
            f"batch: {counted(totals.total, 'task')} to run, {totals.skipped} skipped (already "
            f"ok), {counted(totals.malformed, 'malformed line')}; output {self.output}"
        )


def plan_batch(
    tasks_path: Path,
    context_path: Path | None,
    output_path: Path | None,
    model: str | None,
    defaults: CommandDefaults,
    schema_path: Path | None = None,
) -> BatchPlan:
    """Read the tasks and the context, skip what the output says is done (exit 2 for what
    cannot be used, --output-schema's file included)."""
    from grove.supervisor.batch import (
        ContextError,
        Totals,
        default_output,
        read_context,
        read_previous,
        still_to_run,
    )

    task_file = read_task_file(tasks_path, defaults.aliases)
    seed: list[tuple[str, str]] = []
    try:
        if context_path is not None:
            seed = list(read_context(context_path))
    except ContextError as exc:
        fail(str(exc), code=2)
    out = output_path or default_output(tasks_path)
    if out.exists() and out.resolve() == tasks_path.resolve():
        fail(f"the output {out} is the tasks file itself; name another with --output", code=2)
    check_output(out)
    previous = read_previous(out)
    if previous.unreadable:
        sys.stderr.write(f"{out}: {counted(previous.unreadable, 'unreadable line')} ignored\n")
    todo = still_to_run(task_file.tasks, previous)
    root_model = resolve_root_model(model or defaults.model, defaults.aliases, todo)
    schema = cli_output_schema(schema_path, unschemed_providers(todo, root_model))
    todo, task_file = refuse_task_schemas(todo, task_file, root_model)
    totals = Totals(
        total=len(todo),
        malformed=len(task_file.errors),
        skipped=len(task_file.tasks) - len(todo),
    )
    return BatchPlan(
        task_file=task_file,
        seed=seed,
        output=out,
        previous=previous,
        todo=todo,
        root_model=root_model,
        schema=schema,
        totals=totals,
    )


def unschemed_providers(tasks: list[Task], root_model: ModelSpec | None) -> set[ProviderName]:
    """The providers the tasks without a schema of their own run on."""
    from grove.providers.model_specs import parse_model_spec

    found: set[ProviderName] = set()
    for task in tasks:
        if task.schema is None and task.model is not None:
            found.add(parse_model_spec(task.model).provider)
        elif task.schema is None and root_model is not None:
            found.add(root_model.provider)
    return found


def refuse_task_schemas(
    todo: list[Task], task_file: TaskFile, root_model: ModelSpec | None
) -> tuple[list[Task], TaskFile]:
    """A task's own schema that the root's provider would refuse (the task names no model of
    its own) is an error of its line, as any other malformed line; the rest runs."""
    from grove.supervisor.batch.tasks import TaskFile, TaskLineError, schema_refusal

    refused = {
        task.key: TaskLineError(task.line, refusal)
        for task in todo
        if task.schema is not None
        and task.model is None
        and (refusal := schema_refusal(task.schema, str(root_model) if root_model else None))
    }
    if not refused:
        return todo, task_file
    errors = sorted([*task_file.errors, *refused.values()], key=lambda error: error.line)
    tasks = [task for task in task_file.tasks if task.key not in refused]
    return [task for task in todo if task.key not in refused], TaskFile(tasks=tasks, errors=errors)


def read_task_file(tasks_path: Path, aliases: dict[str, str]) -> TaskFile:
    from grove.supervisor.batch.tasks import InputTooLarge, read_tasks

    try:
        with tasks_path.open("rb") as stream:
            return read_tasks(stream, aliases, what=str(tasks_path))
    except OSError as exc:
        fail(f"cannot read {tasks_path}: {exc.strerror or exc}", code=2)
    except InputTooLarge as exc:
        fail(f"{exc}; split the tasks into several files", code=2)


def resolve_root_model(
    text: str | None, aliases: dict[str, str], tasks: Iterable[Task]
) -> ModelSpec | None:
    """The root's model; None is fine only when every task to run names its own."""
    from grove.providers.errors import ModelSpecError
    from grove.providers.model_specs import parse_model_spec

    if not text:
        if any(task.model is None for task in tasks):
            from grove.supervisor.config import config_path
            from grove.supervisor.rules import no_model_flag_text

            fail(no_model_flag_text(config_path()), code=2)
        return None
    try:
        return parse_model_spec(text, aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)
