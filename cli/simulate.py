"""`grove simulate`: the provider simulator as a standalone server on loopback.

It speaks the Anthropic, OpenAI (Responses and Chat) and Gemini wire protocols.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer


def simulate_command(
    port: Annotated[
        int, typer.Option("--port", "-p", help="Port to listen on (0: any free).")
    ] = 8765,
    host: Annotated[str, typer.Option("--host", help="Loopback address to bind.")] = "127.0.0.1",
    api_key: Annotated[
        str,
        typer.Option(
            "--api-key",
            envvar="GROVE_SIM_API_KEY",
            help="The one key it accepts.",
            show_default=False,
        ),
    ] = "sim-key",
    ttft_ms: Annotated[int, typer.Option("--ttft-ms", min=0, help="Latency to first token.")] = 0,
    tps: Annotated[
        float, typer.Option("--tps", min=0, help="Tokens per second (0: as fast as possible).")
    ] = 0,
    tokens: Annotated[int, typer.Option("--tokens", min=1, help="Reply length in tokens.")] = 24,
    events_per_write: Annotated[
        int, typer.Option("--events-per-write", min=1, help="Events that share one write.")
    ] = 1,
    context_window: Annotated[
        int | None,
        typer.Option(
            "--context-window",
            min=1,
            help="Input tokens a request may carry, for every model (default: each model's "
            "window in the catalog); over it, each provider's own context-length error.",
        ),
    ] = None,
    rpm: Annotated[
        int | None,
        typer.Option(
            "--rpm", min=1, help="Requests a minute over all clients; over it, each provider's 429."
        ),
    ] = None,
    tpm: Annotated[
        int | None,
        typer.Option("--tpm", min=1, help="Input tokens a minute over all clients (as --rpm)."),
    ] = None,
    cache_ttl_scale: Annotated[
        float,
        typer.Option(
            "--cache-ttl-scale",
            min=0.000001,
            help="Every prompt cache lifetime times this (0.001: a five-minute entry lasts "
            "0.3 s), to see entries expire.",
        ),
    ] = 1.0,
    prefill_tps: Annotated[
        float,
        typer.Option(
            "--prefill-tps",
            min=0,
            help="Prompt tokens a second processed before the first token, those read from a "
            "cache aside (0: none), as a cache hit shortens the time to first token.",
        ),
    ] = 0.0,
    refuse_cache: Annotated[
        list[str] | None,
        typer.Option(
            "--refuse-cache",
            metavar="FEATURE",
            help="Answer as a server without this cache feature does: cache_control "
            "(Anthropic), prompt_cache_key (OpenAI) or cached_contents (Gemini). Repeatable.",
        ),
    ] = None,
    batch_delay_s: Annotated[
        float,
        typer.Option(
            "--batch-delay-s",
            min=0,
            help="Seconds a provider batch (Anthropic, OpenAI, Gemini) is processed before it "
            "ends.",
        ),
    ] = 0.0,
    batch_errored: Annotated[
        float,
        typer.Option(
            "--batch-errored",
            min=0,
            max=1,
            help="Share of each batch's requests that end errored (the vendor's server error).",
        ),
    ] = 0.0,
    batch_expired: Annotated[
        float,
        typer.Option(
            "--batch-expired",
            min=0,
            max=1,
            help="Share of each batch's requests that end expired.",
        ),
    ] = 0.0,
    flex_unavailable: Annotated[
        float,
        typer.Option(
            "--flex-unavailable",
            min=0,
            max=1,
            help="Share of flex requests (OpenAI, Gemini) refused for want of capacity (429).",
        ),
    ] = 0.0,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the batch shares and the results' order.")
    ] = 0,
) -> None:
    """Run the provider simulator until interrupted (Ctrl+C). It caches prompts and bills
    it as each provider does (Anthropic breakpoints, OpenAI and Gemini prefixes, Gemini
    `cachedContents`)."""
    from grove.simulator import SimulatorConfig, run_forever
    from grove.simulator.config import CACHE_FEATURES

    if batch_errored + batch_expired > 1:
        sys.stderr.write("--batch-errored and --batch-expired must add up to 1 or less\n")
        raise typer.Exit(2)
    unknown = sorted(set(refuse_cache or ()) - set(CACHE_FEATURES))
    if unknown:
        sys.stderr.write(
            f"--refuse-cache takes {', '.join(CACHE_FEATURES)}; not {', '.join(unknown)}\n"
        )
        raise typer.Exit(2)

    config = SimulatorConfig(
        host=host,
        port=port,
        api_key=api_key,
        ttft_ms=ttft_ms,
        tps=tps,
        tokens=tokens,
        events_per_write=events_per_write,
        context_window=context_window,
        rpm=rpm,
        tpm=tpm,
        cache_ttl_scale=cache_ttl_scale,
        prefill_tps=prefill_tps,
        refuse=frozenset(refuse_cache or ()),
        batch_delay_s=batch_delay_s,
        batch_errored=batch_errored,
        batch_expired=batch_expired,
        flex_unavailable=flex_unavailable,
        seed=seed,
    )

    def ready(url: str) -> None:
        sys.stdout.write(f"listening on {url}\n")
        sys.stdout.flush()

    with contextlib.suppress(KeyboardInterrupt):
        run_forever(config, on_ready=ready)
