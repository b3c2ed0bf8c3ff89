"""A stored message as `grove history` and the chat's /history show it: `[id] kind`, what the
kind means, then its thinking and content; how it is styled and made safe is the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from grove.supervisor.store.kinds import COMPACTION_KIND, SPENT_KIND, TURN_END_KIND


def unchanged(text: str) -> str:
    return text


def message_block(
    message: dict[str, Any],
    owner: str,
    *,
    shown: Callable[[str], str] = unchanged,
    dim: Callable[[str], str] = unchanged,
) -> str:
    """`[id] kind` (plus `from <uuid>` when inherited), then its thinking and content; every
    text goes through `shown` (the thinking and an output error through `dim` as well)."""
    origin = "" if message["agent_uuid"] == owner else f"  from {message['agent_uuid']}"
    kind, data = message["kind"], message["data"]
    lines = [f"[{message['id']}] {kind}{origin}"]
    if kind == COMPACTION_KIND:
        kept = data.get("first_kept_message_id") or "none"
        lines[0] += (
            f"  ({data.get('reason', '?')}: {data.get('tokens_before', 0):,} -> "
            f"{data.get('tokens_after', 0):,} tokens; the model sees this summary, then the "
            f"messages from [{kept}] on)"
        )
    elif kind == SPENT_KIND:
        stopped = data.get("stop_reason") or "?"
        lines[0] += (
            f"  (a reply of a turn that failed, {stopped}: counted, the model does not see it)"
        )
    elif kind == TURN_END_KIND:
        lines[0] += "  (the end of a turn that failed or was cancelled: not sent)"
    for part in data.get("parts", []):
        if isinstance(part, dict) and part.get("kind") == "thinking" and part.get("text"):
            lines.append(dim(shown(f"(thinking) {part['text']}")))
    content = message["content"]
    if kind == "assistant" and data.get("output") is not None:  # a typed answer, as JSON
        retries = int(data.get("output_retries") or 0)
        lines[0] += f"  (typed{f', after {retries} output retries' if retries else ''})"
        content = json.dumps(data["output"], indent=2)
    elif kind == "assistant" and data.get("output_error"):
        lines[0] += "  (invalid output: the answer as it came, after its output retries)"
        lines.append(dim(shown(str(data["output_error"]))))
    if content:
        lines.append(shown(content))
    lines[0] = shown(lines[0])  # a reply's stop reason is the provider's word
    return "\n".join(lines)
