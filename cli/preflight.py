"""What run, chat and batch check before any Grove starts (Ray is never imported here): model
names, credentials, --tools, MCP server commands, files, budgets; one line and exit 2 each.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from grove.cli.context import fail
from grove.providers.errors import GroveError

if TYPE_CHECKING:
    from grove.providers.lifecycle import Choice
    from grove.providers.model_specs import ModelSpec
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.command_defaults import CommandDefaults


def preflight(
    defaults: CommandDefaults,
    *,
    models: Iterable[str | None],
    tools: list[str] | None = None,
    budget: Budget | None = None,
    joined: bool = False,
) -> None:
    """Check what the command line gives (each `MODEL[/THINKING]` of `models`, the --tools
    flags, the budget, else the config's) against the Grove it will run on (`defaults`: this
    process's or the service's); `joined`: the hosts run on a cluster joined with --address,
    whose keys and commands are not this process's to check. A retired model is refused; a
    deprecated one, or one shutting down soon, gets a warning on stderr, once."""
    choices = [checked_model(text, defaults.aliases) for text in dict.fromkeys(models) if text]
    specs = [choice.spec for choice in choices]
    check_cost_budget(defaults, specs, budget)
    if not joined:
        check_credentials(defaults, specs)
        if defaults.mcp_problems:
            fail(defaults.mcp_problems[0], code=2)
    check_tools(tools or [])
    for warning in dict.fromkeys(choice.warning for choice in choices):
        if warning is not None:
            sys.stderr.write(warning + "\n")


def checked_model(text: str, aliases: dict[str, str]) -> Choice:
    """The model `text` names and its warning; the reference's texts for what does not
    parse, a "did you mean" for a typo of a known id and the successor of a retired one
    (named `PROVIDER:MODEL`, an id is taken as written)."""
    from grove.providers.errors import ModelSpecError
    from grove.providers.lifecycle import choose_model

    try:
        return choose_model(text, aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)


def check_credentials(defaults: CommandDefaults, specs: list[ModelSpec]) -> None:
    """Every provider the models need has a key where the agents run, unless all providers
    are the simulator there."""
    if defaults.simulated:
        return
    from grove.providers.credentials import missing_credentials_text

    for provider in dict.fromkeys(spec.provider for spec in specs):
        if provider not in defaults.signed_in:
            fail(missing_credentials_text(provider), code=2)


def check_tools(flags: list[str]) -> None:
    """Each `package.module:attr` imports and names functions that can be tools; any other
    name is a built-in tool or an MCP server's."""
    if not flags:
        return
    from grove.supervisor.tool_files import import_spec

    for flag in flags:
        try:
            if ":" in flag:
                check_functions(import_spec(flag))
            else:
                check_tool_name(flag)
        except GroveError as exc:
            fail(str(exc), code=2)


def check_functions(functions: list[Callable[..., Any]]) -> None:
    from grove.actors.tools.python import ToolDefinitionError, python_tool
    from grove.supervisor.errors import CommandError

    for function in functions:
        try:
            python_tool(function)
        except ToolDefinitionError as exc:
            raise CommandError(str(exc)) from exc


def check_tool_name(name: str) -> None:
    from grove.supervisor.errors import CommandError
    from grove.supervisor.tool_rules import BUILTIN_TOOL_NAMES, is_mcp, unknown_tool_text

    if name not in BUILTIN_TOOL_NAMES and not is_mcp(name):
        raise CommandError(unknown_tool_text(name))


def check_cost_budget(
    defaults: CommandDefaults, specs: list[ModelSpec], budget: Budget | None
) -> None:
    """A cost budget needs the price of every model it pays for."""
    from grove.providers.pricing import priced

    limits = budget.as_dict() if budget is not None else defaults.budget
    if not limits or limits.get("cost_usd") is None:
        return
    source = "--budget-cost" if budget is not None else "[budget] cost_usd"
    for spec in specs:
        if not priced(spec.model) and spec.model not in defaults.priced:
            fail(
                f"{source} cannot be kept: {spec.model} has no price in the catalog; set one "
                "in [models.prices] or use a token budget",
                code=2,
            )


def check_output(path: Path) -> None:
    """An output file that can be appended to, or made where a directory can be written to;
    nothing is created here."""
    if path.exists():
        problem = None if path.is_file() else "it is not a file"
        if problem is None and not os.access(path, os.W_OK):
            problem = "it cannot be written"
    else:
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        problem = None if parent.is_dir() else f"{parent} is not a directory"
        if problem is None and not os.access(parent, os.W_OK | os.X_OK):
            problem = f"{parent} cannot be written"
    if problem is not None:
        refuse_output(path, problem)


def refuse_output(path: Path, problem: str) -> NoReturn:
    fail(f"cannot write the output {path}: {problem}; name another with --output", code=2)
