"""`grove run`: one prompt through a new root agent, streamed, or one JSON object with `--json`.

Exit codes: 0 success, 1 the turn failed, 2 the command line or model cannot be used.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from cli.render import TurnWriter, tool_exchanges
from providers.catalog import ModelSpec, parse_model_spec
from providers.errors import GroveError, ModelSpecError

if TYPE_CHECKING:
    from actors.agent import TurnResult
    from supervisor.config import GroveSettings


def run_command(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The prompt to send.")],
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="MODEL[/THINKING], e.g. claude-sonnet-4-5/med."),
    ] = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object at the end instead of text.")
    ] = False,
    simulate: Annotated[
        bool,
        typer.Option("--simulate", help="Answer from the built-in provider simulator (offline)."),
    ] = False,
    hosts: Annotated[
        int, typer.Option("--hosts", min=1, help="Agent host processes to start.")
    ] = 1,
    tools: ToolsOption = None,
    allow: AllowOption = None,
    budget_cost: BudgetCostOption = None,
    budget_tokens: BudgetTokensOption = None,
    budget_time: BudgetTimeOption = None,
) -> None:
    """Send one prompt to a model through a new root agent and stream the reply."""
    context: CliContext = ctx.obj
    for what, text in (("prompt", prompt), ("--system text", system)):
        problem = None if text is None else undecodable_text(what, text)
        if problem:
            fail(problem, code=2)
    settings = context.settings()
    from supervisor.api import Grove  # after the settings: see keep_local_ray_on_loopback

    budget = cli_budget(settings, budget_cost, budget_tokens, budget_time)
    spec = resolve_model(model, settings)
    writer = TurnWriter(sys.stdout, styles=True)
    context.checked_store()
    with Grove(settings=settings, simulate=simulate, hosts=hosts) as grove:
        try:
            given = root_tools(settings, tools, defaults=True)
            root = grove.create_root(
                str(spec), system=system, tools=given, allow=allow or (), budget=budget
            )
        except GroveError as exc:
            fail(str(exc), code=2)
        try:
            turn = grove.send(root.uuid, prompt)
        except GroveError as exc:
            fail(str(exc), code=1)
        if json_output:
            result = turn.result()
        else:
            for kind, text in turn:
                writer.chunk(kind, text)
            writer.end_turn()
            result = turn.result()
    if result.error is not None:
        fail(result.error, code=1)
    if json_output:
        sys.stdout.write(json.dumps(turn_json(spec, result, agent=root.uuid)) + "\n")


def resolve_model(flag: str | None, settings: GroveSettings) -> ModelSpec:
    """The flag, else the config's default; the reference's texts when neither works."""
    text = flag or settings.defaults.model
    if not text:
        from supervisor.rules import NO_MODEL_FLAG_TEXT

        fail(NO_MODEL_FLAG_TEXT, code=2)
    try:
        return parse_model_spec(text, settings.models.aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)


def turn_json(spec: ModelSpec, result: TurnResult, agent: str | None) -> dict[str, Any]:
    """The `--json` object, from what the turn stored (its assistant steps)."""
    parts = [
        part
        for entry in result.entries
        if entry.kind == "assistant"
        for part in entry.data.get("parts", [])
    ]
    steps = [entry.data for entry in result.entries if entry.kind == "assistant"]
    return {
        "provider": spec.provider,
        "model": steps[-1].get("model", spec.model) if steps else spec.model,
        "thinking": spec.thinking,
        "text": result.text,
        "thinking_text": "".join(p["text"] for p in parts if p["kind"] == "thinking"),
        **tool_exchanges(result),
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
        "stop_reason": result.stop_reason,
        "agent": agent,
    }
