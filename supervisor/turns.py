"""The supervisor's side of a turn: an agent's live (unstored) state and what a finished turn
leaves in the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grove.actors.agent.choice import ModelChoice
from grove.actors.agent.steps import INTERRUPTED_FACT, STORED
from grove.actors.contract import HostAPI
from grove.actors.host.tickets import Ticket
from grove.actors.output import OutputType
from grove.actors.transcript import parts_to_data
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import TextPart
from grove.supervisor.agent_tiers import tier_of
from grove.supervisor.store.base import CLEAR_KIND, SPENT_KIND, Store
from grove.supervisor.store.kinds import TURN_END_KIND
from grove.supervisor.store.records import AgentRecord, MessageRecord, NewMessage

# The parent's newest messages `fork_end` reads first: a reply and what it answers, all most
# forks look at (a tool loop running past them: more).
NEWEST_READ = 2
SEEDED = "seeded"  # in a seeded user message's data: context, not a turn's prompt


# What a caller of `begin_turn` gets: the turn's ticket id, its agent and its host (a handle),
# all a caller streams and awaits it by (nothing more to send back for a thousand asks).
Begun = tuple[str, str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnTicket:
    """What `begin_turn` hands a caller: the ticket and which host streams it."""

    ticket: Ticket
    host_id: str


@dataclass(slots=True)
class LiveAgent:
    """Live state of one agent (not stored): where it runs and what it is doing."""

    host_id: str
    host: HostAPI  # the host's contract (through a RayProxy, or a host core in process)
    active: bool = False  # the host holds the agent with its current conversation
    ready_for: ModelChoice | None = None  # the model whose provider the host has prepared
    begin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ticket_id: str | None = None
    started: str | None = None  # the ticket of the last turn begun that its host has taken
    turn_done: asyncio.Event = field(default_factory=asyncio.Event)
    last_result: TurnResult | None = None
    mail: asyncio.Queue[MessageRecord] = field(default_factory=asyncio.Queue)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # cancel ends a sync wait
    retrying: bool = False  # an interrupted turn's resumption is under way


def stored_entry(message: MessageRecord, kind: str | None = None) -> NewEntry:
    """The agent-side entry for a message the supervisor stored before handing it over
    (a user prompt, mail, an advisor card); a finished turn does not store it again."""
    return NewEntry(
        kind=kind or message.kind,
        content=message.content,
        data={**message.data, STORED: message.id},
    )


def turn_messages(ticket: Ticket, result: TurnResult) -> list[NewMessage]:
    """What a finished turn leaves in the store, each message keyed by its ticket; never what
    was stored before it reached the agent (its prompt, mail, advice). A turn that failed or
    was cancelled keeps no assistant or tool output, so the history stays whole, but what its
    requests used is kept, as `spent` messages (a cancelled turn keeps nothing else); when
    steps of it were stored as they ended, or it keeps nothing at all, a `turn_end` with its
    error closes it (else its prompt would be the last word: a turn still open, resumed by a
    supervisor that restarts)."""
    new = [
        step_message(ticket, index, entry)
        for index, entry in enumerate(result.entries)
        if STORED not in entry.data
    ]
    if result.ok:
        answers = [i for i, message in enumerate(new) if message.kind == "assistant"]
        if result.worktree is not None and answers:  # kept with the answer, to read back
            last = answers[-1]
            data = {**new[last].data, "worktree": result.worktree}
            new[last] = new[last].model_copy(update={"data": data})
        return new
    kept = (
        [] if result.cancelled else [m for m in new if m.kind not in ("assistant", "tool_result")]
    )
    spent = [
        message.model_copy(
            update={
                "kind": SPENT_KIND,
                "data": {key: value for key, value in message.data.items() if key != "parts"},
            }
        )
        for message in new
        if message.kind == "assistant"
    ]
    stepped = any(
        STORED in entry.data and entry.kind in ("assistant", "tool_result")
        for entry in result.entries
    )
    end = NewMessage(
        agent_uuid=ticket.uuid,
        kind=TURN_END_KIND,
        content=result.error or "cancelled",
        ticket=f"{ticket.ticket_id}:end",
    )
    return kept + spent + ([end] if stepped or not (kept or spent) else [])


def turn_events(ticket: Ticket, result: TurnResult) -> list[tuple[str, dict[str, Any]]]:
    """The events of a finished turn: those of its steps not stored as they ended (see
    `step_events`), in order, then TurnCompleted."""
    events = [
        event
        for entry in result.entries
        if STORED not in entry.data
        for event in step_events(ticket.uuid, entry)
    ]
    completed = {
        "agent": ticket.uuid,
        "ticket": ticket.ticket_id,
        "ok": result.ok,
        "error": result.error,
        "usage": result.usage.as_dict(),
        "cost_usd": result.cost_usd,
    }
    return [*events, ("TurnCompleted", completed)]


def step_events(uuid: str, entry: NewEntry) -> list[tuple[str, dict[str, Any]]]:
    """ToolCalled for each call of a reply, ToolResulted for each result (a failed call's
    detail, such as a traceback, goes here, not to the model), ToolInterrupted for a call
    cut off by its host's death that was not run again; ThinkingDropped for a reply whose
    request was sent again without thinking a 400 said was bound to a different conversation."""
    if entry.kind not in ("assistant", "tool_result"):
        return []
    events: list[tuple[str, dict[str, Any]]] = []
    if "thinking_dropped" in entry.data:
        events.append(("ThinkingDropped", {"agent": uuid, "at": entry.data["thinking_dropped"]}))
    facts = entry.data.get("calls", {})
    for part in entry.data.get("parts", []):
        call = {"agent": uuid, "tool": part.get("name"), "call_id": part.get("call_id")}
        if part.get("kind") == "tool_call":
            events.append(("ToolCalled", call))
        elif part.get("kind") == "tool_result":
            fact = facts.get(part["call_id"], {})
            if fact.get(INTERRUPTED_FACT):
                events.append(("ToolInterrupted", call))
                continue
            resulted = {
                **call,
                "is_error": part["is_error"],
                "duration_ms": fact.get("duration_ms"),
            }
            for key in ("detail", "rerun"):
                if key in fact:
                    resulted[key] = fact[key]
            events.append(("ToolResulted", resulted))
    return events


def step_message(ticket: Ticket, index: int, entry: NewEntry) -> NewMessage:
    """A turn's entry as it is stored, keyed by its ticket and place in the turn: the same
    key whether it is stored as its step ends or with the finished turn."""
    return NewMessage(
        agent_uuid=ticket.uuid,
        kind=entry.kind,
        content=entry.content,
        data=entry.data,
        ticket=f"{ticket.ticket_id}:{index}",
    )


def turn_open(messages: Sequence[MessageRecord]) -> bool:
    """Whether an agent's last turn has not ended, from its own messages: the last of them is
    its prompt (not a seeded context), or a step stored as it ended (a reply calling tools, a
    tool result)."""
    if not messages:
        return False
    last = messages[-1]
    if last.kind == "assistant":
        return calls_tools(last.data)
    if last.kind == "user":
        return not last.data.get(SEEDED)
    return last.kind == "tool_result"


def seeded_messages(uuid: str, entries: Sequence[tuple[str, str]]) -> list[NewMessage]:
    """`(kind, content)` user and assistant messages as `seed` stores them: history no turn
    answers (a seeded user message is marked so, and never taken for a prompt to resume)."""
    return [
        NewMessage(
            agent_uuid=uuid,
            kind=kind,
            content=content,
            data={"parts": parts_to_data([TextPart(text=content)])}
            if kind == "assistant"
            else {SEEDED: True},
        )
        for kind, content in entries
    ]


def prompt_data(output: OutputType | None) -> dict[str, Any]:
    """What a prompt's stored message keeps beside its text: the output type the turn was
    asked for, so that the turn answers to it also when it resumes."""
    return {} if output is None else {"output": output.to_data()}


def turn_output(
    record: AgentRecord, output: OutputType | None, resumed: Sequence[MessageRecord] = ()
) -> OutputType | None:
    """The output type a turn answers to: the one it was asked for (for a resumed turn, the
    one stored with its prompt in `resumed`, the agent's messages), else the agent's own."""
    if output is None:
        prompt = next((m for m in reversed(resumed) if m.kind == "user"), None)
        if prompt is not None and "output" in prompt.data:
            return OutputType.from_data(prompt.data["output"])
        if "output" in record.metadata:
            return OutputType.from_data(record.metadata["output"])
    return output


def fork_end(store: Store, parent: AgentRecord) -> int:
    """Where a child forked from `parent` now branches off: the end of its conversation, but
    before a stored reply whose calls have not all returned (the parent's turn in flight is
    running them, a `fork` call perhaps): a child inherits whole steps only. Reads only the
    parent's newest messages (more of them only while a tool loop runs past what was read),
    so its cost does not grow with the parent's history."""
    count = NEWEST_READ
    while True:
        own = store.newest_messages(parent.uuid, count)
        if not own and (parent.parent_uuid is None or parent.fork_message_id == 0):
            return 0  # a root, or a child forked before any message: it shows nothing
        if not own:  # all it shows is inherited
            return store.conversation_end(parent.uuid)
        if own[-1].kind == CLEAR_KIND:  # its newest message leaves nothing to show
            return 0
        end = own[-1].id
        whole = len(own) < count  # the parent holds no older message than these
        point = _whole_steps_end(own, end, parent.fork_message_id if whole else None)
        if point is not None:
            return point
        count *= 4


def _whole_steps_end(own: list[MessageRecord], end: int, before_first: int | None) -> int | None:
    """`fork_end` over the parent's newest messages `own` (ending at `end`); `before_first`
    is the id before the first of them when they are all it holds. None: older messages
    decide (the tool loop reaches past the first of `own`)."""
    answered: set[str] = set()
    for index in range(len(own) - 1, -1, -1):
        message = own[index]
        parts = message.data.get("parts", [])
        if message.kind == "tool_result":
            answered.update(part.get("call_id") for part in parts)
            continue
        if message.kind != "assistant" or not calls_tools(message.data):
            return end
        calls = {part.get("call_id") for part in parts if part.get("kind") == "tool_call"}
        if calls <= answered:
            return end
        return own[index - 1].id if index else before_first
    return end if before_first is not None else None


def calls_tools(data: dict[str, Any]) -> bool:
    """Whether a stored reply calls tools (it is a step of its turn, not its answer)."""
    return any(part.get("kind") == "tool_call" for part in data.get("parts", []))


def choice_of(record: AgentRecord) -> ModelChoice | None:
    if record.provider is None or record.model is None:
        return None
    return ModelChoice(
        provider=record.provider,  # type: ignore[arg-type]
        model=record.model,
        thinking=record.thinking_level,
        tier=tier_of(record),
    )
