"""`grove run`: one prompt through a new root agent, streamed, or one JSON object with `--json`;
on a running service's Grove or one of its own, the same either way.

Exit codes: 0 success, 1 the turn failed, 2 the command line or model cannot be used.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from grove.cli.context import (
    AllowOption,
    BudgetCostOption,
    BudgetTimeOption,
    BudgetTokensOption,
    CliContext,
    OutputRetriesOption,
    OutputSchemaOption,
    SimulateOption,
    TierOption,
    ToolsOption,
    cli_budget,
    cli_output_schema,
    cli_tier,
    fail,
    undecodable_text,
)
from grove.cli.preflight import preflight
from grove.cli.printable import printable
from grove.cli.render import TurnWriter
from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.providers.plurals import counted

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.providers.model_specs import ModelSpec
    from grove.supervisor.command_defaults import CommandDefaults


def run_command(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The prompt to send.")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="MODEL[/THINKING], e.g. claude-sonnet-5-5/med (grove models lists them).",
        ),
    ] = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object at the end instead of text.")
    ] = False,
    simulate: SimulateOption = False,
    hosts: Annotated[
        int | None,
        typer.Option(
            "--hosts",
            min=1,
            help="Agent host processes to start (default 1), in a Grove of this command's own "
            "unless a service started with the same --hosts is up.",
        ),
    ] = None,
    tools: ToolsOption = None,
    allow: AllowOption = None,
    budget_cost: BudgetCostOption = None,
    budget_tokens: BudgetTokensOption = None,
    budget_time: BudgetTimeOption = None,
    output_schema: OutputSchemaOption = None,
    output_retries: OutputRetriesOption = DEFAULT_OUTPUT_RETRIES,
    tier: TierOption = None,
) -> None:
    """Send one prompt to a model through a new root agent and stream the reply.

    The root has the tools todo, fork, send and wait ([tools] default), the configured user
    and MCP tools, and those of --tools. --json prints one object: provider, model, thinking,
    text, thinking_text, tool_calls, tool_results, usage, cost_usd, stop_reason, agent.

    With --output-schema FILE the answer is JSON matching that schema, checked: the command
    prints the checked JSON on one line (--json: as "output", with "output_error",
    "output_retries" and "retry_usage"). An answer still malformed after --output-retries
    tries is printed as it came, and the command exits 1 naming the problem."""
    context: CliContext = ctx.obj
    for what, text in (("prompt", prompt), ("--system text", system)):
        problem = None if text is None else undecodable_text(what, text)
        if problem:
            fail(problem, code=2)
    remote = context.remote(simulate=simulate, hosts=hosts)
    defaults = context.defaults(remote, simulate=simulate)
    budget = cli_budget(defaults, budget_cost, budget_tokens, budget_time)
    chosen_tier = cli_tier(tier, defaults)
    spec = resolve_model(model, defaults)
    joined = context.joins_cluster(remote)
    preflight(defaults, models=[model or defaults.model], tools=tools, budget=budget, joined=joined)
    schema = cli_output_schema(output_schema, [spec.provider])
    writer = TurnWriter(sys.stdout, styles=True)
    grove = remote or context.grove(simulate=simulate, hosts=hosts, own_hosts=1)
    with grove:
        try:
            given = defaults.tools(tools, defaults=True)
            root = grove.create_root(
                str(spec),
                system=system,
                tools=given,
                allow=allow or (),
                budget=budget,
                output_type=schema,
                output_retries=output_retries,
                tier=chosen_tier,
            )
        except GroveError as exc:
            fail(str(exc), code=2)
        try:
            turn = grove.send(root.uuid, prompt)
            if json_output:
                result = turn.result()
            else:
                for kind, text in turn:
                    if schema is None or kind == "notice":  # typed: the checked JSON at the end
                        writer.chunk(kind, text)
                writer.end_turn()
                result = turn.result()
        except GroveError as exc:
            fail(str(exc), code=1)
    if result.error is not None:
        fail(result.error, code=1)
    if json_output:
        shown = turn_json(spec, result, agent=root.uuid)
        typed = typed_json(result) if schema is not None else {}
        sys.stdout.write(json.dumps({**shown, **typed}) + "\n")
    elif schema is not None:
        answer = result.text if result.output_error else json.dumps(result.output)
        sys.stdout.write(printable(answer) + "\n")
    if result.output_error is not None:
        fail(invalid_output_text(result), code=1)


def typed_json(result: TurnResult) -> dict[str, Any]:
    """What `--json` adds for a typed answer."""
    return {
        "output": result.output,
        "output_error": result.output_error,
        "output_retries": result.output_retries,
        "retry_usage": result.retry_usage.as_dict(),
    }


def invalid_output_text(result: TurnResult) -> str:
    """Why a typed answer is not one, once its retries are spent."""
    tries = counted(result.output_retries, "retry", "retries")
    return f"invalid output after {tries}: {result.output_error}"


def resolve_model(flag: str | None, defaults: CommandDefaults) -> ModelSpec:
    """The flag, else the config's default; the reference's texts when neither works."""
    from grove.providers.errors import ModelSpecError
    from grove.providers.model_specs import parse_model_spec

    text = flag or defaults.model
    if not text:
        from grove.supervisor.config import config_path
        from grove.supervisor.rules import no_model_flag_text

        fail(no_model_flag_text(config_path()), code=2)
    try:
        return parse_model_spec(text, defaults.aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)


def turn_json(spec: ModelSpec, result: TurnResult, agent: str | None) -> dict[str, Any]:
    """The `--json` object, from what the turn stored (its assistant steps)."""
    from grove.supervisor.results import tool_exchanges

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
