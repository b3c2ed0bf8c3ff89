"""The rules every interface shares: what may be sent, switched or forked, and their texts.

Texts here are the reference's (spec/commands-model-fork.md), word for word.
"""

from __future__ import annotations

import math
from pathlib import Path

from grove.actors.tools.fanout import WAIT_CAP_S
from grove.providers.catalog import DEFAULT_MODELS, PROVIDER_TITLES
from grove.supervisor.errors import CommandError


def _no_model_text() -> str:
    """The reference's "No model configured" text, its examples each provider's current
    default from the catalog."""
    examples = "\n".join(
        f"  {f'/model {model}':<29} ({PROVIDER_TITLES[provider]})"
        for provider, model in DEFAULT_MODELS.items()
    )
    return (
        f"No model configured. Use /model to select one.\n\nExamples:\n{examples}\n\n"
        "Run /model with Tab for available options."
    )


def no_model_flag_text(config_file: Path) -> str:
    """The same, for a command that runs without a chat to type /model into (run, batch),
    naming the configuration file Grove reads (supervisor/config.py `config_path`)."""
    first = DEFAULT_MODELS["anthropic"]
    listed = ", ".join(
        f"{model} ({PROVIDER_TITLES[provider]})" for provider, model in DEFAULT_MODELS.items()
    )
    return (
        "No model given. Pass --model, or set a default for every command:\n\n"
        f'  grove run --model {first} "hello"\n\n'
        f"  [defaults]                  (in {_shown_path(config_file)})\n"
        f'  model = "{first}"\n\n'
        f"Models: {listed}."
    )


def _shown_path(path: Path) -> str:
    """`path` with the home directory written as ~, as a person types it."""
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


NO_MODEL_TEXT = _no_model_text()

STREAMING_SWITCH_TEXT = (
    "Cannot switch model while response is streaming. "
    "Wait for completion or press Ctrl+C to cancel."
)


def checked_seconds(value: object, name: str, maximum: float = WAIT_CAP_S) -> float:
    """A number of seconds from a user or a model: a finite number from 0 to `maximum`
    (a command's text is parsed first); anything else is a CommandError saying what is wrong."""
    number: float
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise CommandError(f"{name} must be a number of seconds, not {value}") from None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
    else:
        raise CommandError(f"{name} must be a number of seconds, not {value!r}")
    if math.isnan(number):
        raise CommandError(f"{name} must be a number of seconds, not {value}")
    if number < 0:
        raise CommandError(f"{name} must not be negative")
    if number > maximum:
        raise CommandError(f"{name} may be at most {maximum:g} seconds (a day), not {value}")
    return number
