"""The rules every interface shares: what may be sent, switched or forked, and their texts.

Texts here are the reference's (spec/commands-model-fork.md), word for word.
"""

from __future__ import annotations

NO_MODEL_TEXT = """No model configured. Use /model to select one.

Examples:
  /model claude-sonnet-4-5      (Anthropic)
  /model gpt-5-mini             (OpenAI)
  /model gemini-3.0-flash       (Google)

Run /model with Tab for available options."""

STREAMING_SWITCH_TEXT = (
    "Cannot switch model while response is streaming. "
    "Wait for completion or press Ctrl+C to cancel."
)
