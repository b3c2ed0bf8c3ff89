"""The rules every interface shares: what may be sent, switched or forked, and their texts.

Texts here are the reference's (spec/commands-model-fork.md), word for word.
"""

from __future__ import annotations

import math

from actors.tools.fanout import WAIT_CAP_S
from supervisor.errors import CommandError

NO_MODEL_TEXT = """No model configured. Use /model to select one.

Examples:
  /model claude-sonnet-4-5      (Anthropic)
  /model gpt-5-mini             (OpenAI)
  /model gemini-3.0-flash       (Google)

Run /model with Tab for available options."""

# The same, for a command that runs without a chat to type /model into (run, batch).
NO_MODEL_FLAG_TEXT = """No model given. Pass --model, or set a default for every command:

  grove run --model claude-sonnet-5-5 "hello"

  [defaults]                  (in ~/.config/grove/config.toml)
  model = "claude-sonnet-5-5"

Models: claude-sonnet-5-5 (Anthropic), gpt-6-luna (OpenAI), gemini-3.8-flash (Google)."""

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
