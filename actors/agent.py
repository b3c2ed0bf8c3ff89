"""`Agent`: one model-backed actor: private mailbox, private state, its own provider instance.

The turn loop runs model steps, tool calls and step boundaries; it knows nothing of the
tree or the store (the supervisor hands it history and takes its results).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from grove.actors.budget_guard import BudgetCut, BudgetPort, ReplyGuard
from grove.actors.estimates import UNBILLED, estimated_bill
from grove.actors.masking import MaskedEmit, masked_entry
from grove.actors.output import RETRY_KIND, AnswerError, OutputType, check_answer, retry_text
from grove.actors.steps import (
    INTERRUPTED_FACT,
    StepRefused,
    StoreSteps,
    interrupted_text,
    open_calls,
)
from grove.actors.telemetry import NO_TRACING, TraceParent, Tracing
from grove.actors.transcript import entry_to_message, parts_to_data, to_messages
from grove.actors.turn_result import NewEntry as NewEntry
from grove.actors.turn_result import TurnResult as TurnResult
from grove.providers.accumulate import INVALID_ARGUMENTS
from grove.providers.base import (
    AssistantTurn,
    CachePolicy,
    ImageData,
    Message,
    Part,
    Provider,
    ProviderName,
    Request,
    ThinkingLevel,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from grove.providers.catalog import model_info
from grove.providers.errors import GroveError, ProviderError, is_context_overflow
from grove.providers.output import answer_message
from grove.providers.pricing import cache_saving_usd
from grove.providers.secrets import mask
from grove.providers.stream_events import (
    Finished,
    ProviderWarning,
    RateLimitLeft,
    Retrying,
    Sending,
    StreamEvent,
)

MAX_STEPS_PER_TURN = 50


class AgentState(enum.Enum):
    IDLE = "idle"
    IN_TURN = "in_turn"
    STOPPED = "stopped"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    provider: ProviderName
    model: str
    thinking: ThinkingLevel | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutput:
    """A tool result with images besides its text (an MCP server's image content, say)."""

    text: str
    images: tuple[ImageData, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool an agent may call: its schema and the coroutine that runs it (text, or text
    with images). The calls of one step run concurrently, but a `sequential` tool's calls
    run one at a time, in order. `idempotent` (for all calls, or per call's arguments): a
    call cut off by a host's death may run again when its turn resumes."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], Awaitable[str | ToolOutput]]
    sequential: bool = False
    idempotent: bool | Callable[[dict[str, Any]], bool] = False

    def repeatable(self, arguments: dict[str, Any]) -> bool:
        """Whether this call may run a second time without a second effect."""
        if callable(self.idempotent):
            return self.idempotent(arguments)
        return self.idempotent


class ToolError(Exception):
    """Raised by a tool: its text is the error result the model sees, as it is; `detail`
    (a traceback) goes to the event log instead."""

    def __init__(self, text: str, *, detail: str = "") -> None:
        super().__init__(text)
        self.detail = detail


STORED = "message_id"  # in an entry's data: the message is in the store already
FRAMING_TOKENS = 4  # a message's role and structure, as providers count them
PART_FRAMING_TOKENS = 3  # a part's type tag ("tool_result", "text"), as providers count them
CUT_OFF_REASONS = frozenset({"max_tokens", "length", "MAX_TOKENS", "incomplete"})
# Asks the supervisor to compact an agent's context (`overflow`, `incomplete` or `threshold`,
# with the context tokens the host measured); the compacted conversation, or None if declined.
Recover = Callable[[str, str, int], Awaitable["list[Any] | None"]]


def context_tokens(turn: AssistantTurn) -> int:
    """The context a request carried and its reply added, as the provider reported them."""
    return turn.usage.input_tokens + turn.usage.output_tokens


def estimated_input(request: Request, tool_chars: int = 0) -> int:
    """About the input tokens of a request, on the high side (four characters a token, plus a
    few for each message's and part's framing): what a budget holds and the fleet's buckets
    count.
    `tool_chars`: the characters of the tools' names, descriptions and schemas it offers."""
    chars, parts = len(request.system or "") + tool_chars, 0
    for message in request.messages:
        chars += sum(map(part_chars, message.parts))
        parts += len(message.parts)
    framing = FRAMING_TOKENS * (len(request.messages) + 1) + PART_FRAMING_TOKENS * parts
    return chars // 4 + framing


def part_chars(part: Part) -> int:
    """The characters a message part puts in a request: its text, and a tool call's or
    result's name, id and arguments, which go with it (an image as no text)."""
    match part:
        case ToolCallPart(call_id=call_id, name=name, arguments=arguments):
            return len(call_id) + len(name) + len(json.dumps(arguments))
        case ToolResultPart(call_id=call_id, name=name, content=content):
            return len(call_id) + len(name) + len(content)
        case _:
            return len(getattr(part, "text", "") or "")


def reply_data(turn: AssistantTurn) -> dict[str, Any]:
    """What a reply was billed, as its stored data holds it (its parts aside), and what
    caching saved on it (`saved_usd`, against every prompt token at the input price); where
    its request's thinking was left out after a 400, when it was."""
    data = {
        "usage": turn.usage.as_dict(),
        "cost_usd": turn.cost_usd,
        "saved_usd": cache_saving_usd(turn.model, turn.usage),
        "stop_reason": turn.stop_reason,
        "model": turn.model,
        "provider": turn.provider,
    }
    if turn.thinking_dropped is not None:
        data["thinking_dropped"] = turn.thinking_dropped
    return data


def tool_chars(tools: Iterable[Tool]) -> int:
    """The characters the tools' specs add to every request that offers them."""
    return sum(
        len(tool.spec.name) + len(tool.spec.description) + len(json.dumps(tool.spec.parameters))
        for tool in tools
    )


class FleetPort(Protocol):
    """The fleet's rate limits for the providers in `providers` (the supervisor's buckets)."""

    providers: frozenset[str]

    async def acquire(self, provider: str, tokens: int) -> None: ...

    async def release(self, provider: str, left: RateLimitLeft | None) -> None:
        """A request ended; `left`: what its answer's headers said is left on the key."""
        ...

    async def cool_down(self, uuid: str, provider: str, seconds: float) -> None: ...


class ContextRecoveryError(Exception):
    """The context was compacted and the request still did not fit, or it could not be."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolActivity:
    """A tool call starting or its result, as one short line for whoever watches the turn."""

    kind: Literal["tool_call", "tool_result"]
    text: str


ProviderFactory = Callable[[ModelChoice], Provider]
Emit = Callable[[StreamEvent | ToolActivity], None]
PREVIEW_CHARS = 160


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
    ) -> None:
        self.uuid = uuid
        self.tracing = tracing  # its turns' spans (actors/telemetry.py)
        self.cache = cache  # `[cache]`: None sends no cache marks
        self.budget = budget
        self.fleet = fleet
        self.recover = recover
        self.compaction_threshold = compaction_threshold
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
        self._steps: StoreSteps | None = None  # where this turn's finished steps are stored
        self._storing: list[asyncio.Task[bool]] = []  # tool results being stored
        self._output: OutputType | None = None  # what this turn's answer must be

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
        it used as soon as it ends (actors/estimates.py); `output` makes the final
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
        emit = MaskedEmit(emit)  # what streams out is masked; so is what is stored (_append)
        self.state = AgentState.IN_TURN
        self._billed = billed
        self._steps = steps
        self._output = output
        try:
            await self._settle_open_calls(result, emit)
            if user is not None:
                self._append(result, user, entry_to_message(user))
            self._inject_steering(result)
            recovered = False
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
                    and self._past_threshold(tokens)
                    and await self._recover(result, "incomplete", tokens, None, emit)
                ):
                    recovered = True
                    turn = await self._step(emit)
                calls = turn.tool_calls
                stepped = bool(calls) and self._steps is not None
                seconds = time.monotonic() - started
                bill = await self._record_assistant(result, turn, seconds, tell=not stepped)
                if calls:
                    await self._store_reply(result, bill, told=not stepped)
                    await self._run_tools(result, calls, emit)
                steered = self._inject_steering(result)
                if not calls and not steered and await self._answered(result, turn, emit):
                    break
            else:
                result.error = tool_steps_text(self.max_steps)
            await self._stored_so_far()
            tokens = context_tokens(turn)
            if result.error is None and not recovered and self._past_threshold(tokens):
                # Threshold maintenance, before the turn ends: the next one starts compacted.
                await self._recover(result, "threshold", tokens, None, emit)
        except asyncio.CancelledError:
            result.cancelled = True
            result.error = "cancelled"
        except Exception as exc:  # a failed turn is a result, not a crash of the host
            result.error = mask(str(exc)) or type(exc).__name__
        finally:
            emit.flush()
            with contextlib.suppress(Exception):  # a failed turn: its end stores what is left
                await self._stored_so_far()
            self.state = AgentState.IDLE
            self._output = None
            self._steps = None
        return result

    async def _store_reply(self, result: TurnResult, billed: dict[str, Any], told: bool) -> None:
        """A reply that calls tools, stored with the turn's entries before it, before its
        calls run: a call of a stored reply counts as started. The stored step tells the
        supervisor what the reply was billed; when it is not stored, this tells it (unless
        `told`)."""
        stored = False
        try:
            stored = await self._store(result, range(len(result.entries)))
        finally:
            if not stored and not told and self._billed is not None:
                await self._billed(billed)

    async def _store(self, result: TurnResult, indices: Iterable[int]) -> bool:
        """Store these entries of the turn now, once the stores under way have ended (the
        store keeps the turn's order); whether they are all stored."""
        await self._stored_so_far()
        return await self._store_now(result, indices)

    def _store_soon(self, result: TurnResult, index: int) -> None:
        """Begin storing an entry (a tool result) without waiting: the next request waits
        for it before it is sent, as do the next store and the turn's end."""
        if self._steps is not None:
            self._storing.append(asyncio.ensure_future(self._store_now(result, (index,))))

    async def _stored_so_far(self) -> None:
        """Wait for the stores under way (raising what one of them raised)."""
        storing, self._storing = self._storing, []
        if storing:
            await asyncio.gather(*storing)

    async def _store_now(self, result: TurnResult, indices: Iterable[int]) -> bool:
        """Store these entries of the turn, those not stored yet, and mark them stored (the
        turn's end does not store them again); whether they are all stored. When the call
        fails they stay unmarked and this turn stores nothing more as it goes (a later step
        stored before them would break the turn's order): its end stores the rest, in order,
        under the same keys."""
        if self._steps is None:
            return False
        unsaved = [(i, result.entries[i]) for i in indices if STORED not in result.entries[i].data]
        if not unsaved:
            return True
        try:
            ids = await self._steps(unsaved)
        except Exception:  # durability lost for the rest of this turn, not the turn
            self._steps = None
            return False
        if ids is None:
            raise StepRefused("this run of the turn may store no more steps: another run has it")
        for (index, entry), message_id in zip(unsaved, ids, strict=True):
            result.entries[index] = replace(entry, data={**entry.data, STORED: message_id})
        return True

    async def _settle_open_calls(self, result: TurnResult, emit: Emit) -> None:
        """Calls of the last stored reply that never returned (their host died under them):
        an idempotent one runs again; any other gets a result saying it was interrupted and
        may or may not have taken effect."""
        pending = open_calls(self.history)
        if not pending:
            return
        locks = {name: asyncio.Lock() for name, t in self.tools.items() if t.sequential}
        for call in pending:
            tool = self.tools.get(call.name)
            if tool is not None and tool.repeatable(call.arguments):
                part, facts = await self._run_tool(call, locks)
                facts["rerun"] = True
            else:
                text = interrupted_text(call.name)
                part = ToolResultPart(
                    call_id=call.call_id, name=call.name, content=text, is_error=True
                )
                facts = {INTERRUPTED_FACT: True, "duration_ms": 0.0}
            self._tool_result(result, part, facts, emit)

    async def _answered(self, result: TurnResult, turn: AssistantTurn, emit: Emit) -> bool:
        """Whether the turn ends with this reply: always without a typed output; with one,
        when the answer checks out or the retries are spent (then the last problem is kept
        with the raw text). Otherwise the problem goes back to the model, and False."""
        output = self._output
        if output is None:
            return True
        answer = result.entries[-1].data  # the reply's stored data carries the outcome
        try:
            result.output = answer["output"] = await check_answer(result.text, output)
        except AnswerError as exc:
            problem = str(exc)
            if result.output_retries < output.retries:
                result.output_retries += 1
                left = output.retries - result.output_retries + 1
                retry = NewEntry(kind=RETRY_KIND, content=retry_text(problem, left), data={})
                self._append(result, retry, entry_to_message(retry))
                emit(
                    ProviderWarning(
                        text=f"── the answer did not match the schema; asking again "
                        f"({result.output_retries} of {output.retries}) ──"
                    )
                )
                return False
            result.output_error = answer["output_error"] = problem
        if result.output_retries:  # kept with the answer, to read back with it
            answer["output_retries"] = result.output_retries
            answer["retry_usage"] = result.retry_usage.as_dict()
        return True

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
        )
        provider = self.choice.provider
        estimate = estimated_input(request, self._tool_chars)
        if self.budget is None:
            bill = estimated_bill(request, provider, estimate, None)
            return await self._streamed(request, provider, estimate, emit, None, bill)
        hold = await self.budget.reserve(self.uuid, request.model, estimate, self.max_tokens)
        if hold.warning:
            emit(ProviderWarning(text=hold.warning))
        if hold.strict:  # the reply may not outgrow what the request holds
            request = replace(request, max_tokens=hold.output)
        guard = ReplyGuard(self.budget, self.uuid, request, hold, estimate) if hold.cancel else None
        bill = estimated_bill(request, provider, estimate, hold)
        finished: AssistantTurn | None = None
        try:
            finished = await self._streamed(request, provider, estimate, emit, guard, bill)
            return finished
        except BudgetCut as cut:
            finished = cut.turn
            raise
        finally:
            used = finished.usage if finished is not None else Usage()
            cost = finished.cost_usd if finished is not None else 0.0
            held = guard.hold if guard is not None else hold
            await self.budget.settle(self.uuid, held, used.input_tokens + used.output_tokens, cost)

    async def _streamed(
        self,
        request: Request,
        provider: ProviderName,
        estimate: int,
        emit: Emit,
        guard: ReplyGuard | None,
        bill: dict[str, Any],
    ) -> AssistantTurn:
        """The request streamed, waiting first for the fleet's rate limits if it has them
        (`estimate`: its input tokens, as the buckets count them); `guard` watches a reply
        that a budget may cut off. Just before each attempt is sent the supervisor hears what
        it may be billed at most (`bill`): the provider bills it even if this host dies before
        it reads the reply; the reply's own bill replaces that estimate, as does the word that
        an attempt failed unbilled (until a retry is sent)."""
        limited = self.fleet is not None and provider in self.fleet.providers
        if limited:
            assert self.fleet is not None
            await self.fleet.acquire(provider, estimate)
        left: RateLimitLeft | None = None  # what the provider's headers said is left
        try:
            await self._stored_so_far()  # the results this request shows the model are stored
            with self.tracing.chat(request, provider) as span:
                async for event in self.provider.stream(request):
                    if isinstance(event, Sending):  # an attempt goes: it may be billed
                        await self._tell_billing(bill)
                        continue
                    if isinstance(event, Retrying):  # an error answer: billed nothing
                        await self._tell_billing({UNBILLED: True})
                    if isinstance(event, Finished):
                        span.replied(event.turn)
                        if request.output is None:
                            return event.turn
                        # an answer given through the final tool is the reply's text
                        return replace(event.turn, message=answer_message(event.turn.message))
                    if isinstance(event, RateLimitLeft):
                        left = event
                        continue
                    if limited and isinstance(event, Retrying) and "429" in event.reason:
                        assert self.fleet is not None
                        await self.fleet.cool_down(self.uuid, provider, event.delay_s)
                    emit(event)
                    if guard is not None:
                        await guard.see(event, provider)
        finally:
            if limited:
                assert self.fleet is not None
                await self.fleet.release(provider, left)
        raise RuntimeError("the provider stream ended without a reply")

    async def _tell_billing(self, data: dict[str, Any]) -> None:
        if self._billed is not None:
            await self._billed(data)

    def _past_threshold(self, tokens: int) -> bool:
        """Whether `tokens` of context pass `[compaction] threshold` of the model's maximum
        input (its window less what output keeps for itself)."""
        if self.compaction_threshold is None or self.choice is None or self.recover is None:
            return False
        try:
            info = model_info(self.choice.model, self.choice.provider)
        except GroveError:
            return False
        return tokens >= info.input_share(self.compaction_threshold)

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
        self,
        result: TurnResult,
        reason: str,
        tokens: int,
        error: ProviderError | None,
        emit: Emit,
    ) -> bool:
        """Have the supervisor compact this agent's context, then rebuild the history from
        it plus what this turn added and the store does not hold yet. False when declined
        (an overflow then fails the turn with a clear message)."""
        await self._stored_so_far()  # the supervisor compacts what the store holds
        compacted = None if self.recover is None else await self.recover(self.uuid, reason, tokens)
        if compacted is None:
            if error is not None:
                raise ContextRecoveryError(
                    f"Context overflow recovery failed: {error}; /compact or a model with a "
                    "larger window may help"
                ) from error
            return False
        again = "" if reason == "threshold" else "; asking again"
        emit(ProviderWarning(text=f"── context compacted ({reason}){again} ──"))
        unsaved = [entry for entry in result.entries if STORED not in entry.data]
        self.history = to_messages([*compacted, *unsaved])
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
        """Every call of one step at once, a sequential tool's calls one after another;
        each result joins the turn, and is stored, as it comes."""
        locks = {name: asyncio.Lock() for name, t in self.tools.items() if t.sequential}
        for call in calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            shown = mask(f"{call.name} {arguments}")
            emit(ToolActivity(kind="tool_call", text=preview(shown)))

        async def run(call: ToolCallPart) -> None:
            part, facts = await self._run_tool(call, locks)
            self._tool_result(result, part, facts, emit)

        await asyncio.gather(*(run(call) for call in calls))

    def _tool_result(
        self, result: TurnResult, part: ToolResultPart, facts: dict[str, Any], emit: Emit
    ) -> None:
        """A call's result joins the turn as it comes (with how long it took, and a failure's
        detail), and its store begins at once."""
        shown = mask(f"{part.name}{' failed' if part.is_error else ''}: {part.content}")
        emit(ToolActivity(kind="tool_result", text=preview(shown)))
        data = {"parts": parts_to_data((part,)), "calls": {part.call_id: facts}}
        entry = NewEntry(kind="tool_result", content="", data=data)
        self._append(result, entry, Message(role="user", parts=(part,)))
        self._store_soon(result, len(result.entries) - 1)

    async def _run_tool(
        self, call: ToolCallPart, locks: dict[str, asyncio.Lock]
    ) -> tuple[ToolResultPart, dict[str, Any]]:
        started = time.monotonic()
        facts: dict[str, Any] = {}
        with self.tracing.execute_tool(call) as span:
            content, images, is_error = await self._tool_output(call, locks, facts)
            if is_error:
                span.tool_failed()
        facts["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        part = ToolResultPart(
            call_id=call.call_id, name=call.name, content=content, is_error=is_error, images=images
        )
        return part, facts

    async def _tool_output(
        self, call: ToolCallPart, locks: dict[str, asyncio.Lock], facts: dict[str, Any]
    ) -> tuple[str, tuple[ImageData, ...], bool]:
        """What the call gives the model: its text, images, and whether it failed (a
        failure's detail goes into `facts`)."""
        tool = self.tools.get(call.name)
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

    def _inject_steering(self, result: TurnResult) -> bool:
        """Add queued messages to the history; True when one of them asks for another step
        (steering interrupts; side messages such as advisor asides do not)."""
        queued, self._steering = self._steering, []
        for entry in queued:
            self._append(result, entry, entry_to_message(entry))
        return any(entry.kind == "steering" for entry in queued)

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


def preview(text: str) -> str:
    """One line of at most PREVIEW_CHARS characters."""
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def tool_steps_text(steps: int) -> str:
    return (
        f"Stopped after {steps} model steps in one turn: the model kept calling tools "
        "([limits] tool_steps raises the limit)"
    )


def user_entry(text: str) -> NewEntry:
    return NewEntry(kind="user", content=text, data={})
