"""Preserved thinking as the simulator plays it: thinking blocks signed over their model and
prefix (system, tools, every earlier block), checked when they come back, and a tool loop's
leading block required.

Claude 5.5 and Fable models (the catalog's `preserved_thinking`) only; the texts are the API's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from grove.providers.preserved_thinking import preserves_thinking
from grove.simulator.script import Inbound, Plan
from grove.simulator.wire import InvalidRequest

# The simulator's own signing key: the same in every process and run (a conversation resumed
# after a restart still checks out), never shown; a block it did not sign never checks out.
_KEY = hashlib.sha256(b"grove simulator: preserved thinking").digest()
_MARK = "simthink1"
THINKING_BLOCKS = ("thinking", "redacted_thinking")
EXTENDED_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def bound_text(where: str) -> str:
    return (
        f"{where}: Invalid `signature` in `thinking` block. The block is bound to a different "
        "conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )


def unsigned_text(where: str) -> str:
    return f"{where}: Invalid `signature` in `thinking` block"


def tool_loop_text(where: str, found: str) -> str:
    return (
        f"{where}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block "
        "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
        "you include thinking blocks from previous turns. To avoid this requirement, disable "
        f"`thinking`. Please consult our documentation at {EXTENDED_THINKING_DOCS}"
    )


def check_request(model: str, body: dict[str, Any], thinking_on: bool) -> None:
    """`InvalidRequest` with the API's text for a thinking block that fails its check (made
    by another model, or over another prefix), and for a tool loop with thinking on whose
    last assistant message does not start with thinking."""
    messages: list[dict[str, Any]] = body["messages"]
    if thinking_on:
        _check_tool_loop(messages)
    if not preserves_thinking(model):
        return
    digest = _head(body)
    for number, message in enumerate(messages):
        content = _blocks(message["content"])
        for index, block in enumerate(content):
            if block.get("type") == "thinking":
                where = f"messages.{number}.content.{index}"
                made_by = _signer(block.get("signature"), where)
                if made_by != model or block["signature"] != _sign(made_by, digest):
                    raise InvalidRequest(bound_text(where))
            _add(digest, message["role"], block)


def reply_thinking(inbound: Inbound, plan: Plan) -> tuple[tuple[str, ...], str]:
    """The reply's thinking deltas and signature. On the models that preserve thinking: no
    text with the default display (`omitted`; `display: "summarized"` shows it), and a
    signature over the model and the request."""
    if not preserves_thinking(inbound.model):
        return plan.thinking, plan.signature
    thinking = inbound.body.get("thinking")
    display = thinking.get("display") if isinstance(thinking, dict) else None
    shown = plan.thinking if display == "summarized" else ()
    return shown, signature(inbound.model, inbound.body)


def signature(model: str, body: dict[str, Any]) -> str:
    """The signature of a reply's thinking block to `body`: over the model and everything the
    request holds, which is the block's prefix once it is sent back."""
    digest = _head(body)
    for message in body["messages"]:
        for block in _blocks(message["content"]):
            _add(digest, message["role"], block)
    return _sign(model, digest)


def _check_tool_loop(messages: list[dict[str, Any]]) -> None:
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return
    last = _blocks(messages[-1]["content"])
    if not any(block.get("type") == "tool_result" for block in last):
        return
    assistant = messages[-2]
    first = _blocks(assistant["content"])
    if assistant["role"] == "assistant" and first and first[0].get("type") not in THINKING_BLOCKS:
        where = f"messages.{len(messages) - 2}.content.0"
        raise InvalidRequest(tool_loop_text(where, str(first[0].get("type"))))


def _head(body: dict[str, Any]) -> Any:
    """A running digest holding the request's system prompt and tools."""
    digest = hashlib.sha256()
    for tool in body.get("tools") or ():
        _add(digest, "tools", tool)
    for block in _blocks(body.get("system")):
        _add(digest, "system", block)
    return digest


def _add(digest: Any, role: str, block: dict[str, Any]) -> None:
    """One block into the digest; `cache_control` marks are not part of a prefix."""
    kept = {key: value for key, value in block.items() if key != "cache_control"}
    text = json.dumps([role, kept], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest.update(text.encode("utf-8", "surrogatepass"))
    digest.update(b"\n")


def _blocks(content: object) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _sign(model: str, digest: Any) -> str:
    mac = hmac.new(_KEY, model.encode() + b"\0" + digest.digest(), hashlib.sha256).hexdigest()
    return base64.b64encode(f"{_MARK}:{model}:{mac}".encode()).decode("ascii")


def _signer(value: object, where: str) -> str:
    """The model a signature names; `InvalidRequest` when it is no signature of ours."""
    try:
        mark, model, _ = base64.b64decode(str(value), validate=True).decode().split(":", 2)
    except ValueError as exc:
        raise InvalidRequest(unsigned_text(where)) from exc
    if mark != _MARK:
        raise InvalidRequest(unsigned_text(where))
    return model
