"""`ToolRunner`: runs the tool calls of an agent's step, all at once but a sequential tool's one
after another, each in its span, its failure a result the model reads (never raised).

It also settles the calls a cut-off turn left open: an idempotent one runs again, any other is
reported interrupted. What a result then becomes in the turn is the turn loop's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from grove.actors.agent.steps import INTERRUPTED_FACT, interrupted_text
from grove.actors.agent.tool import Emit, Tool, ToolActivity, ToolOutput, preview
from grove.actors.errors import ToolError
from grove.actors.telemetry import Tracing
from grove.providers.accumulate import INVALID_ARGUMENTS
from grove.providers.base import ImageData, ToolCallPart, ToolResultPart
from grove.providers.secrets import mask

# A call's result as it comes: the part the model reads, and facts kept with it (how long it
# took, a failure's detail, whether it ran again or was interrupted).
Done = Callable[[ToolResultPart, dict[str, Any]], None]


class ToolRunner:
    """The calls of one agent's tools; `tools` is the agent's own (never changed)."""

    def __init__(self, tools: dict[str, Tool], tracing: Tracing) -> None:
        self._tools = tools
        self._tracing = tracing

    def _locks(self) -> dict[str, asyncio.Lock]:
        return {name: asyncio.Lock() for name, tool in self._tools.items() if tool.sequential}

    async def run_step(self, calls: Sequence[ToolCallPart], emit: Emit, done: Done) -> None:
        """Every call of one step at once, a sequential tool's calls one after another;
        each result goes to `done` as it comes."""
        locks = self._locks()
        for call in calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            shown = mask(f"{call.name} {arguments}")
            emit(ToolActivity(kind="tool_call", text=preview(shown)))

        async def run(call: ToolCallPart) -> None:
            part, facts = await self._run(call, locks)
            done(part, facts)

        await asyncio.gather(*(run(call) for call in calls))

    async def settle_open(self, pending: Sequence[ToolCallPart], done: Done) -> None:
        """Calls of the last stored reply that never returned (their host died under them):
        an idempotent one runs again; any other gets a result saying it was interrupted and
        may or may not have taken effect."""
        locks = self._locks()
        for call in pending:
            tool = self._tools.get(call.name)
            if tool is not None and tool.repeatable(call.arguments):
                part, facts = await self._run(call, locks)
                facts["rerun"] = True
            else:
                text = interrupted_text(call.name)
                part = ToolResultPart(
                    call_id=call.call_id, name=call.name, content=text, is_error=True
                )
                facts = {INTERRUPTED_FACT: True, "duration_ms": 0.0}
            done(part, facts)

    async def _run(
        self, call: ToolCallPart, locks: dict[str, asyncio.Lock]
    ) -> tuple[ToolResultPart, dict[str, Any]]:
        started = time.monotonic()
        facts: dict[str, Any] = {}
        with self._tracing.execute_tool(call) as span:
            content, images, is_error = await self._output(call, locks, facts)
            if is_error:
                span.tool_failed()
        facts["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        part = ToolResultPart(
            call_id=call.call_id, name=call.name, content=content, is_error=is_error, images=images
        )
        return part, facts

    async def _output(
        self, call: ToolCallPart, locks: dict[str, asyncio.Lock], facts: dict[str, Any]
    ) -> tuple[str, tuple[ImageData, ...], bool]:
        """What the call gives the model: its text, images, and whether it failed (a
        failure's detail goes into `facts`)."""
        tool = self._tools.get(call.name)
        try:
            if tool is None:
                raise ToolError(f"unknown tool: {call.name}")
            if INVALID_ARGUMENTS in call.arguments:
                reason = call.arguments[INVALID_ARGUMENTS]
                raise ToolError(f"The arguments of {call.name} were {reason}; send a JSON object")
            lock = locks.get(call.name)
            if lock is None:
                output = await tool.run(call.arguments)
            else:
                async with lock:
                    output = await tool.run(call.arguments)
        except ToolError as exc:  # the model is told, the turn goes on
            if exc.detail:
                facts["detail"] = mask(exc.detail)
            return mask(str(exc)), (), True
        except Exception as exc:
            return mask(f"error: {exc}"), (), True
        if isinstance(output, ToolOutput):
            return output.text, output.images, False
        return output, (), False
