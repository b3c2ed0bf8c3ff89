"""`grove run`: one prompt, streamed to stdout, or one JSON object with `--json`.

Exit codes: 0 success, 1 the provider failed, 2 the command line or model cannot be used.
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import ExitStack
from typing import Annotated, Any

import typer

from cli.context import CliContext, fail
from cli.render import StreamPrinter
from providers.base import AssistantTurn, Finished, Message, Request
from providers.catalog import ModelSpec, parse_model_spec
from providers.errors import ModelSpecError, ProviderError
from providers.factory import create_provider
from providers.http import HTTPProvider
from supervisor.config import GroveSettings
from supervisor.rules import NO_MODEL_TEXT


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
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Cap on the reply's length.")
    ] = None,
) -> None:
    """Send one prompt to a model and stream the reply."""
    context: CliContext = ctx.obj
    settings = context.settings()
    spec = resolve_model(model, settings)
    request = Request(
        model=spec.model,
        messages=(Message.user(prompt),),
        system=system,
        thinking=spec.thinking,
        max_tokens=max_tokens,
    )
    printer = StreamPrinter(quiet=json_output)
    with ExitStack() as stack:
        endpoint = context.simulator_endpoint(stack, spec.provider) if simulate else None
        provider = create_provider(
            spec.provider,
            configured_base_url=settings.providers.for_provider(spec.provider).base_url,
            endpoint=endpoint,
            openai_api=settings.providers.for_provider(spec.provider).api,
        )
        try:
            turn = asyncio.run(_stream(provider, request, printer))
        except ProviderError as exc:
            printer.finish()
            fail(str(exc), code=1)
    printer.finish()
    if json_output:
        sys.stdout.write(json.dumps(turn_json(spec, turn, agent=None)) + "\n")


def resolve_model(flag: str | None, settings: GroveSettings) -> ModelSpec:
    """The flag, else the config's default; the reference's texts when neither works."""
    text = flag or settings.defaults.model
    if not text:
        fail(NO_MODEL_TEXT, code=2)
    try:
        return parse_model_spec(text, settings.models.aliases)
    except ModelSpecError as exc:
        fail(str(exc), code=2)


async def _stream(
    provider: HTTPProvider, request: Request, printer: StreamPrinter
) -> AssistantTurn:
    try:
        async for event in provider.stream(request):
            printer.event(event)
            if isinstance(event, Finished):
                return event.turn
    finally:
        await provider.aclose()
    raise ProviderError("the stream ended without a reply")


def turn_json(spec: ModelSpec, turn: AssistantTurn, agent: str | None) -> dict[str, Any]:
    return {
        "provider": spec.provider,
        "model": turn.model,
        "thinking": spec.thinking,
        "text": turn.text,
        "thinking_text": turn.thinking_text,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls],
        "usage": turn.usage.as_dict(),
        "cost_usd": turn.cost_usd,
        "stop_reason": turn.stop_reason,
        "agent": agent,
    }
