"""A finished turn as JSON, one shape wherever it goes: the HTTP API's answers (and back into a
`TurnResult` for the service's clients), its tool calls and results for `grove run --json` and
batch records. Light on purpose: the service's clients import it without Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult


def tool_exchanges(result: TurnResult) -> dict[str, list[dict[str, Any]]]:
    """A turn's tool calls and their results, for `--json` output and batch records."""
    parts = [(entry.kind, part) for entry in result.entries for part in entry.data.get("parts", [])]
    return {
        "tool_calls": [
            {"call_id": p["call_id"], "name": p["name"], "arguments": p["arguments"]}
            for kind, p in parts
            if kind == "assistant" and p["kind"] == "tool_call"
        ],
        "tool_results": [
            {
                "call_id": p["call_id"],
                "name": p["name"],
                "content": p["content"],
                "is_error": p["is_error"],
            }
            for kind, p in parts
            if kind == "tool_result"
        ],
    }


def result_json(result: TurnResult) -> dict[str, Any]:
    """The result as the HTTP API sends it; `result_from_json` reads it back whole."""
    return {
        "ok": result.ok,
        "text": result.text,
        "error": result.error,
        "cancelled": result.cancelled,
        "stop_reason": result.stop_reason,
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
        "saved_usd": result.saved_usd,
        "worktree": result.worktree,
        "output": result.output,
        "output_error": result.output_error,
        "output_retries": result.output_retries,
        "retry_usage": result.retry_usage.as_dict(),
        "entries": [
            {"kind": entry.kind, "content": entry.content, "data": entry.data}
            for entry in result.entries
        ],
    }


def result_from_json(data: dict[str, Any]) -> TurnResult:
    from grove.actors.turn_result import NewEntry, TurnResult
    from grove.providers.base import Usage

    return TurnResult(
        entries=[NewEntry(**entry) for entry in data.get("entries", [])],
        text=data.get("text") or "",
        usage=Usage(**data.get("usage", {})),
        cost_usd=float(data.get("cost_usd") or 0.0),
        saved_usd=float(data.get("saved_usd") or 0.0),
        stop_reason=data.get("stop_reason"),
        error=data.get("error"),
        cancelled=bool(data.get("cancelled")),
        worktree=data.get("worktree"),
        output=data.get("output"),
        output_error=data.get("output_error"),
        output_retries=int(data.get("output_retries") or 0),
        retry_usage=Usage(**data.get("retry_usage", {})),
    )
