"""`Forks`: children forked together (one store transaction, their first turns started with
one call per host) or under keys that make a repeated call idempotent.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Awaitable, Callable, Sequence

from grove.actors.contract import HostAPI
from grove.actors.host.tickets import Activation, Ticket
from grove.actors.output import OutputType
from grove.actors.telemetry import TraceParent
from grove.actors.turn_result import TurnResult
from grove.providers.model_specs import ModelSpec
from grove.providers.tier_rules import checked_tier
from grove.supervisor.agent_tiers import tell_replaced, tier_of
from grove.supervisor.budget_rules import Budget
from grove.supervisor.children import child_records, instructed
from grove.supervisor.core.recovery import Recovery
from grove.supervisor.errors import CommandError, HostDiedError
from grove.supervisor.rules import NO_MODEL_TEXT
from grove.supervisor.store.records import AgentRecord, NewMessage
from grove.supervisor.tool_rules import grant_of, narrowed
from grove.supervisor.turns import choice_of, fork_end, stored_entry


class Forks(Recovery):
    """Fan-out: many children of one parent at once, and answers found by their keys."""

    async def fork_many(
        self,
        parent_uuid: str,
        prompts: Sequence[str],
        model: ModelSpec | None,
        system: str | None = None,
        before_start: Callable[[list[AgentRecord]], Awaitable[None]] | None = None,
        keys: Sequence[str] | None = None,
        budget: Budget | None = None,
        workspace: str | None = None,
        output: OutputType | None = None,
        tools: list[str] | None = None,
        tier: str | None = None,
    ) -> list[AgentRecord]:
        """Fork one child per prompt in ONE store transaction and start every child's turn:
        one call per host, the inherited prefix shared once through `share`. `system`
        replaces the system prompt the children would inherit; `budget` is one
        the children share, besides their tree's. `keys` make the call idempotent: a child
        already forked from this parent under a key is returned as it is, not forked again
        (a caller repeating a call cut off by a restart), its turn resumed from its last
        stored step when a restart cut it off too. `workspace="worktree"` gives each
        child a git worktree of its own (supervisor/worktrees.py); `output` makes their
        answers typed; `tools` narrows what they inherit (as `fork`'s does); `tier` is their
        price tier (default: the parent's)."""
        own_tier = checked_tier(tier) if tier is not None else None
        parent = self.agent(parent_uuid)
        if not prompts:
            return []
        if keys is not None:
            if len(keys) != len(prompts):
                raise CommandError("fork_many needs one key per prompt")
            forked = self._keyed_children()
            known = {key: forked[parent.uuid, key] for key in keys if (parent.uuid, key) in forked}
            if any(key in known for key in keys):
                for record in known.values():
                    if self.cut_off(record.uuid):
                        self._resume(record, "cut off by a restart")
                fresh = [index for index, key in enumerate(keys) if key not in known]
                made = iter(
                    await self.fork_many(
                        parent_uuid,
                        [prompts[index] for index in fresh],
                        model,
                        system,
                        before_start,
                        [keys[index] for index in fresh],
                        budget,
                        workspace,
                        output,
                        tools,
                        tier,
                    )
                    if fresh
                    else []
                )
                return [known[key] if key in known else next(made) for key in keys]
        self.budgets.before_turn(parent, False)
        point = fork_end(self.store, parent)
        system, prompts = instructed(parent, model, system, prompts)
        records = child_records(
            parent, model, point, len(prompts), system, budget, keys, output, own_tier
        )
        if tools is not None:
            kept = narrowed(parent.metadata.get("tools", []), tools)
            records = [
                record.model_copy(update={"metadata": {**record.metadata, "tools": kept}})
                for record in records
            ]
        choices = [choice_of(record) for record in records]
        if None in choices:
            raise CommandError(NO_MODEL_TEXT)
        records = await self.workspaces.place(self.store, parent, records, workspace)
        async with self.workspaces.stored(records):
            prompts_stored = self.store.create_agents(
                records,
                [
                    NewMessage(agent_uuid=record.uuid, kind="user", content=prompt)
                    for record, prompt in zip(records, prompts, strict=True)
                ],
            )
        if keys is not None:
            forked = self._keyed_children()
            forked.update(((parent.uuid, key), r) for key, r in zip(keys, records, strict=True))
        # Read now, before any await: later the parent may have moved past the fork point.
        shared, tokens = self.prefixes.get(
            parent.uuid, records[0].fork_message_id, lambda: self.store.conversation(parent.uuid)
        )
        by_host: dict[str, list[tuple[Ticket, Activation]]] = {}
        hosts: dict[str, HostAPI] = {}
        # Siblings inherit the same tools: one grant object, which each host call pickles once.
        grant = grant_of(records[0].metadata)
        trace = TraceParent.from_metadata(records[0].metadata)
        for record, stored_prompt, choice in zip(records, prompts_stored, choices, strict=True):
            assert choice is not None
            state = self.live(record.uuid, record)
            ticket = Ticket(
                ticket_id=uuidlib.uuid4().hex,
                uuid=record.uuid,
                user=stored_entry(stored_prompt),
                choice=choice,
                output=output,
                trace=trace,
            )
            state.ticket_id = ticket.ticket_id
            state.turn_done.clear()
            state.active = True
            activation = self.activation(record, history=[], tools=grant)
            by_host.setdefault(state.host_id, []).append((ticket, activation))
            hosts[state.host_id] = state.host
        await self.children_created(records)
        tell_replaced(self.event, records, own_tier or tier_of(parent))
        if before_start is not None:
            await before_start(records)
        prefix = self.fork_caches.prefix(records[0], records[0].fork_message_id, tokens)
        started = await self.fork_caches.start_many(prefix, by_host, hosts, shared)
        for host_id, items, outcome in started:
            if outcome is None:  # begun: a reader may follow each turn on its host now
                for ticket, _ in items:
                    self.live(ticket.uuid).started = ticket.ticket_id
            elif isinstance(outcome, HostDiedError):
                self._retry_unseen(host_id, [ticket for ticket, _ in items])
            elif isinstance(outcome, BaseException):
                raise outcome
        at = records[0].created_at  # the children's, for a reader who asks the store for them
        self.event("AgentsForked", parent=parent.uuid, count=len(records), at=at)
        return records

    def answered(self, keys: Sequence[str]) -> dict[str, tuple[str, TurnResult]]:
        """For each key a child was ever forked under (by any parent) and whose turn has a
        stored answer: that child and its answer. A rerun of a batch that was killed takes
        these instead of running the task a second time."""
        wanted = set(keys)
        found: dict[str, tuple[str, TurnResult]] = {}
        for record in self.store.list_agents(include_ended=True):
            key = record.metadata.get("key")
            if key in wanted:
                result = self.stored_result(record.uuid)
                if result is not None:
                    found[key] = (record.uuid, result)
        return found

    def _keyed_children(self) -> dict[tuple[str, str], AgentRecord]:
        """Children forked under a key, by (parent, key): read from the store once per
        supervisor lifetime, then kept up to date as children are forked."""
        if self._forked_keys is None:
            self._forked_keys = {
                (record.parent_uuid, record.metadata["key"]): record
                for record in self.store.list_agents(include_ended=True)
                if record.parent_uuid is not None and "key" in record.metadata
            }
        return self._forked_keys

    async def children_created(self, children: Sequence[AgentRecord]) -> None:
        """Children forked here (no restart cut a turn of theirs off) get their own reviewers
        when `advisor.subagents` says so, before their first turn (each reviewer's cursor at
        the child's fork point)."""
        self._created.update(child.uuid for child in children)
        if self.advisors is None or not self.advisors.plan.subagents:
            return
        for child in children:
            await self.advisors.attach_all(child.uuid, cursor=child.fork_message_id)
