"""Argument parsing for commands: `/fork [--model MODEL/THINKING] ["prompt"]` and friends.

Pure functions; every failure is a CommandError whose text is shown to the user as is.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from grove.providers.errors import ModelSpecError
from grove.providers.lifecycle import choose_model
from grove.providers.model_specs import ModelSpec
from grove.supervisor.errors import CommandError

QUOTES = "\"'"
UNCLOSED_QUOTE_TEXT = "Unclosed quote in prompt"


@dataclass(frozen=True, kw_only=True, slots=True)
class ForkArgs:
    model: ModelSpec | None = None
    prompt: str | None = None
    warning: str | None = None  # the model is deprecated or shuts down soon


def split_command(line: str) -> tuple[str, str]:
    """`/name rest` -> ("name", "rest"); the name is lower-cased."""
    stripped = line.strip()
    if not stripped.startswith("/"):
        raise CommandError(f"Not a command: {stripped}")
    name, _, rest = stripped[1:].partition(" ")
    return name.lower(), rest.strip()


def parse_fork_args(text: str, aliases: Mapping[str, str] | None = None) -> ForkArgs:
    """As the reference says: optional `--model` first, then an optional quoted prompt."""
    rest = text.strip()
    model: ModelSpec | None = None
    warning: str | None = None
    if rest.startswith("--model"):
        rest = rest[len("--model") :].lstrip()
        end = 0
        while end < len(rest) and not rest[end].isspace() and rest[end] not in QUOTES:
            end += 1
        if end == 0:
            raise CommandError("--model needs a value: /fork --model MODEL[/THINKING]")
        try:
            choice = choose_model(rest[:end], aliases)
        except ModelSpecError as exc:
            raise CommandError(str(exc)) from exc
        model, warning = choice.spec, choice.warning
        rest = rest[end:].lstrip()
    if not rest:
        return ForkArgs(model=model, warning=warning)
    quote = rest[0]
    if quote not in QUOTES:
        raise CommandError(f'The prompt must be quoted: /fork "{rest}"')
    closing = rest.find(quote, 1)
    if closing < 0:
        raise CommandError(UNCLOSED_QUOTE_TEXT)
    if rest[closing + 1 :].strip():
        raise CommandError(f"Unexpected text after the prompt: {rest[closing + 1 :].strip()}")
    return ForkArgs(model=model, prompt=rest[1:closing], warning=warning)


def split_words(text: str) -> list[str]:
    """Shell-like words (quotes group); an unclosed quote is a CommandError."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise CommandError(f"Cannot parse arguments: {exc}") from exc
