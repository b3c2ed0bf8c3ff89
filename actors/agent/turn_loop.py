"""`Agent`: one model-backed actor: private mailbox, private state, its own provider instance.

The turn loop runs model steps, tool calls and step boundaries; it knows nothing of the
tree or the store (the supervisor hands it history and takes its results).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from grove.actors.agent.batched import BatchPort
from grove.actors.agent.budget_guard import BudgetPort
from grove.actors.agent.choice import ModelChoice, ProviderFactory
from grove.actors.agent.compaction import ContextRecovery, Recover
from grove.actors.agent.masking import masked_entry
from grove.actors.agent.metering import (
    FleetPort,
    RequestMeter,
    TurnHooks,
    context_tokens,
    estimated_input,
    reply_data,
    tool_chars,
)
from grove.actors.agent.steps import StoreSteps, TurnSteps, open_calls
from grove.actors.agent.tool import Emit, Tool, ToolActivity, preview
from grove.actors.agent.tool_runner import ToolRunner
from grove.actors.agent.typed_answer import answered
from grove.actors.errors import BudgetCut, ContextRecoveryError
from grove.actors.output import OutputType
from grove.actors.telemetry import NO_TRACING, TraceParent, Tracing
from grove.actors.transcript import entry_to_message, parts_to_data
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import (
    AssistantTurn,
    CachePolicy,
    Message,
    Request,
    ToolCallPart,
    ToolResultPart,
)
from grove.providers.errors import ProviderError, is_context_overflow
from grove.providers.secrets import mask
from grove.providers.stream_events import Provider

MAX_STEPS_PER_TURN = 50


class AgentState(enum.Enum):
    IDLE = "idle"
    IN_TURN = "in_turn"
    STOPPED = "stopped"


CUT_OFF_REASONS = frozenset({"max_tokens", "length", "MAX_TOKENS", "incomplete"})


class Agent:
    """Turn-based: one turn at a time; steering waits for the next step boundary."""

    def __init__(
        self,
        uuid: str,
        choice: ModelChoice | None,
        history: list[Message],
        make_provider: ProviderFactory,
        *,
        system: str | None = None,
        tools: dict[str, Tool] | None = None,
        max_tokens: int | None = None,
        max_steps: int = MAX_STEPS_PER_TURN,
        recover: Recover | None = None,
        compaction_threshold: float | None = None,
        budget: BudgetPort | None = None,
        fleet: FleetPort | None = None,
        cache: CachePolicy | None = None,
        tracing: Tracing = NO_TRACING,
        batch: BatchPort | None = None,
    ) -> None:
        self.uuid = uuid
        self.tracing = tracing  # its turns' spans (actors/telemetry.py)
        self.cache = cache  # `[cache]`: None sends no cache marks
        self._recovery = ContextRecovery(uuid, recover, compaction_threshold)
        self.max_steps = max_steps
        self.choice = choice
        self.history = history
        self.system = system
        self.tools = tools or {}
        self._tool_chars = tool_chars(self.tools.values())  # counted once: tools never change
        self.max_tokens = max_tokens
        self.state = AgentState.IDLE
        self._make_provider = make_provider
        self._provider: Provider | None = None
        self._steering: list[NewEntry] = []
        self._billed: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        self._steps = TurnSteps(None)  # this turn's finished steps, stored as they end
        self._output: OutputType | None = None  # what this turn's answer must be
        self._tool_runner = ToolRunner(self.tools, tracing)
        self._meter = RequestMeter(uuid, budget, fleet, tracing, batch)
        self._hooks = TurnHooks(lambda: self.provider, self._stored_so_far, self._tell_billing)

    @property
    def provider(self) -> Provider:
        """This agent's own provider instance, created on the first request."""
        if self._provider is None:
            if self.choice is None:
                raise RuntimeError("agent has no model")
            self._provider = self._make_provider(self.choice)
        return self._provider

    @property
    def has_provider(self) -> bool:
        return self._provider is not None

    async def switch_model(self, choice: ModelChoice) -> None:
        """Drop the provider instance; the next request builds one for the new model."""
        provider, self._provider = self._provider, None
        self.choice = choice
        if provider is not None:
            await provider.aclose()

    async def release_connections(self) -> None:
        """Idle: let go of the provider's connection pool (it is rebuilt on next use)."""
        if self._provider is not None:
            release = getattr(self._provider, "release", None)
            if release is not None:
                await release()

    def steer(self, entry: NewEntry) -> None:
        """Queue a message to be injected at the next step boundary."""
        self._steering.append(entry)

    def reset_history(self, history: list[Message]) -> None:
        self.history = history

    async def run_turn(
        self,
        user: NewEntry | None,
        emit: Emit,
        billed: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        output: OutputType | None = None,
        steps: StoreSteps | None = None,
        trace: TraceParent | None = None,
    ) -> TurnResult:
        """Run one turn to its end. Failures are reported in the result, never raised.
        `billed` is told what each request may be billed at most before it is sent, and what
        it used as soon as it ends (estimates.py); `output` makes the final
        answer typed: checked, and sent back with its problems up to its retries. `steps`
        stores each finished step as it ends (a reply that calls tools, each tool result), so
        that a turn cut off resumes from there: calls of the last stored reply that never
        returned are settled first (run again when idempotent, else reported interrupted).
        `trace`: where the turn's span hangs in its tree's trace (None: not traced)."""
        provider, model = (self.choice.provider, self.choice.model) if self.choice else (None, None)
        with self.tracing.invoke_agent(self.uuid, provider, model, trace) as span:
            result = await self._turn(user, emit, billed, output, steps)
            span.turn_ended(result.usage, result.error, result.cancelled)
        return result

    async def _turn(
        self,
        user: NewEntry | None,
        emit: Emit,
        billed: Callable[[dict[str, Any]], Awaitable[None]] | None,
        output: OutputType | None,
        steps: StoreSteps | None,
    ) -> TurnResult:
        result = TurnResult()
        # What is stored is masked (_append); what streams, as it is read (MaskedReading).
        self.state = AgentState.IN_TURN
        self._billed = billed
        self._steps = TurnSteps(steps)
        self._output = output
        try:
            await self._settle_open_calls(result, emit)
            if user is not None:
                self._append_new(result, user)
            self._inject_steering(result)
            recovered = False
            ask_again = functools.partial(self._append_new, result)  # a typed answer's retry
            for _ in range(self.max_steps):
                started = time.monotonic()
                try:
                    turn = await self._step(emit)
                except BudgetCut as cut:  # what streamed is kept, and counted
                    await self._record_assistant(result, cut.turn, time.monotonic() - started)
                    raise
                except ProviderError as exc:
                    if recovered or not is_context_overflow(str(exc)):
                        raise
                    recovered = await self._recover(result, "overflow", 0, exc, emit)
                    turn = await self._retried_step(emit)
                cut_off = turn.stop_reason in CUT_OFF_REASONS and not recovered
                tokens = context_tokens(turn)
                if (
                    cut_off
                    and self._recovery.past_threshold(self.choice, tokens)
                    and await self._recover(result, "incomplete", tokens, None, emit)
                ):
                    recovered = True
                    turn = await self._step(emit)
                calls = turn.tool_calls
                stepped = bool(calls) and self._steps.storing
                seconds = time.monotonic() - started
                bill = await self._record_assistant(result, turn, seconds, tell=not stepped)
                if calls:
                    await self._store_reply(result, bill, told=not stepped)
                    await self._run_tools(result, calls, emit)
                steered = self._inject_steering(result)
                if not calls and not steered and await answered(result, output, ask_again, emit):
                    break
            else:
                result.error = tool_steps_text(self.max_steps)
            await self._stored_so_far()
            tokens = context_tokens(turn)
            if (
                result.error is None
                and not recovered
                and self._recovery.past_threshold(self.choice, tokens)
            ):
                # Threshold maintenance, before the turn ends: the next one starts compacted.
                await self._recover(result, "threshold", tokens, None, emit)
        except asyncio.CancelledError:
            result.cancelled = True
            result.error = "cancelled"
        except Exception as exc:  # a failed turn is a result, not a crash of the host
            result.error = mask(str(exc)) or type(exc).__name__
        finally:
            with contextlib.suppress(Exception):  # a failed turn: its end stores what is left
                await self._stored_so_far()
            self.state = AgentState.IDLE
            self._output = None
            self._steps = TurnSteps(None)
        return result

    async def _store_reply(self, result: TurnResult, billed: dict[str, Any], told: bool) -> None:
        """A reply that calls tools, stored before its calls run (steps.py); when it is not
        stored, the supervisor still hears what it was billed (unless `told`)."""
        billing = self._billed
        tell_bill = None if told or billing is None else functools.partial(billing, billed)
        await self._steps.store_reply(result, tell_bill)

    async def _stored_so_far(self) -> None:
        await self._steps.stored_so_far()

    async def _settle_open_calls(self, result: TurnResult, emit: Emit) -> None:
        """Calls of the last stored reply that never returned (their host died under them)
        are settled before the turn goes on (tool_runner.py)."""
        pending = open_calls(self.history)
        if pending:
            await self._tool_runner.settle_open(
                pending, functools.partial(self._tool_result, result, emit)
            )

    async def _step(self, emit: Emit) -> AssistantTurn:
        assert self.choice is not None
        request = Request(
            model=self.choice.model,
            messages=tuple(self.history),
            system=self.system,
            tools=tuple(tool.spec for tool in self.tools.values()),
            thinking=self.choice.thinking,
            max_tokens=self.max_tokens,
            cache=self.cache,
            output=self._output.request if self._output is not None else None,
            tier=self.choice.tier,
        )
        estimate = estimated_input(request, self._tool_chars)
        return await self._meter.send(request, self.choice.provider, estimate, emit, self._hooks)

    async def _tell_billing(self, data: dict[str, Any]) -> None:
        if self._billed is not None:
            await self._billed(data)

    async def _retried_step(self, emit: Emit) -> AssistantTurn:
        """The step again after a compaction; still over the window is the end (no loop)."""
        try:
            return await self._step(emit)
        except ProviderError as exc:
            if not is_context_overflow(str(exc)):
                raise
            raise ContextRecoveryError(
                f"Context overflow recovery failed: still over the window after compacting ({exc})"
            ) from exc

    async def _recover(
        self, result: TurnResult, reason: str, tokens: int, error: ProviderError | None, emit: Emit
    ) -> bool:
        """Have the supervisor compact this agent's context (compaction.py); False when it
        declined."""
        await self._stored_so_far()  # the supervisor compacts what the store holds
        history = await self._recovery.compacted(result, reason, tokens, error, emit)
        if history is None:
            return False
        self.history = history
        return True

    async def _record_assistant(
        self, result: TurnResult, turn: AssistantTurn, seconds: float, tell: bool = True
    ) -> dict[str, Any]:
        """The reply joins the turn's result; the supervisor hears at once what it was billed
        (if this turn's host dies before the turn is stored, that is stored all the same),
        unless not `tell`: the reply is stored as a step next, which tells it. What it was
        billed."""
        billed = {**reply_data(turn), "duration_s": round(seconds, 3)}
        data = {"parts": parts_to_data(turn.message.parts), **billed}
        if tell and self._billed is not None:
            await self._billed(billed)
        self._append(result, NewEntry(kind="assistant", content=turn.text, data=data), turn.message)
        result.text = result.entries[-1].content  # masked
        result.usage = result.usage + turn.usage
        if result.output_retries:
            result.retry_usage = result.retry_usage + turn.usage
        result.cost_usd += turn.cost_usd
        result.saved_usd += billed["saved_usd"]
        result.stop_reason = turn.stop_reason
        return billed

    async def _run_tools(
        self, result: TurnResult, calls: tuple[ToolCallPart, ...], emit: Emit
    ) -> None:
        """Every call of one step (tool_runner.py); each result joins the turn, and is stored,
        as it comes."""
        await self._tool_runner.run_step(
            calls, emit, functools.partial(self._tool_result, result, emit)
        )

    def _tool_result(
        self, result: TurnResult, emit: Emit, part: ToolResultPart, facts: dict[str, Any]
    ) -> None:
        """A call's result joins the turn as it comes (with how long it took, and a failure's
        detail), and its store begins at once."""
        shown = mask(f"{part.name}{' failed' if part.is_error else ''}: {part.content}")
        emit(ToolActivity(kind="tool_result", text=preview(shown)))
        data = {"parts": parts_to_data((part,)), "calls": {part.call_id: facts}}
        entry = NewEntry(kind="tool_result", content="", data=data)
        self._append(result, entry, Message(role="user", parts=(part,)))
        self._steps.store_soon(result, len(result.entries) - 1)

    def _inject_steering(self, result: TurnResult) -> bool:
        """Add queued messages to the history; True when one of them asks for another step
        (steering interrupts; side messages such as advisor asides do not)."""
        queued, self._steering = self._steering, []
        for entry in queued:
            self._append_new(result, entry)
        return any(entry.kind == "steering" for entry in queued)

    def _append_new(self, result: TurnResult, entry: NewEntry) -> None:
        self._append(result, entry, entry_to_message(entry))

    def _append(self, result: TurnResult, entry: NewEntry, message: Message | None) -> None:
        """An entry joins the turn, masked (it is stored as it is there, and events are made
        of it); its message joins the history as it is."""
        result.entries.append(masked_entry(entry))
        if message is None or not message.parts:
            return
        if self.history and self.history[-1].role == message.role:
            previous = self.history.pop()
            message = Message(role=message.role, parts=previous.parts + message.parts)
        self.history.append(message)


def tool_steps_text(steps: int) -> str:
    return (
        f"Stopped after {steps} model steps in one turn: the model kept calling tools "
        "([limits] tool_steps raises the limit)"
    )


def user_entry(text: str) -> NewEntry:
    return NewEntry(kind="user", content=text, data={})
