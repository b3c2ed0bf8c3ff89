"""The one path by which a child is forked, whether `/fork` or a model's `fork` tool asked:
its record (model, inherited or narrowed tools), the store, its reviewers, its first turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from grove.actors.telemetry import TRACE_KEY
from grove.providers.base import Tier
from grove.providers.model_specs import ModelSpec
from grove.supervisor.agent_tiers import tell_replaced, tier_of
from grove.supervisor.children import child_records
from grove.supervisor.tool_rules import narrowed
from grove.supervisor.turns import fork_end

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore
    from grove.supervisor.store.records import AgentRecord
    from grove.supervisor.turns import TurnTicket


@dataclass(frozen=True, slots=True)
class Forked:
    child: AgentRecord
    turn: TurnTicket | None  # the child's first turn, when it was given a prompt and a model


async def fork_child(
    core: SupervisorCore,
    parent: AgentRecord,
    model: ModelSpec | None,
    *,
    prompt: str | None,
    origin: str,
    tools: object = None,
    workspace: object = None,
    correlation_id: str | None = None,
    trace: str | None = None,
    tier: Tier | None = None,
) -> Forked:
    """Fork one child of `parent`. `tools` (a list of names) narrows what it inherits; a name
    the parent lacks refuses the fork before anything is stored. `workspace`: "shared" (the
    parent's directory) or "worktree" (a git worktree of its own); default: the config's.
    `trace`: the traceparent of the span that forks it (a `fork` tool call's), under which
    its turns' spans go instead of under its parent's context. `tier`: its price tier (default:
    its parent's)."""
    core.budgets.before_turn(parent, False)
    point = fork_end(core.store, parent)
    (child,) = child_records(parent, model, point, 1, tier=tier)
    if tools is not None:
        kept = narrowed(parent.metadata.get("tools", []), tools)
        child = child.model_copy(update={"metadata": {**child.metadata, "tools": kept}})
    inherited = child.metadata.get(TRACE_KEY)
    if trace is not None and inherited is not None:
        traced = {**inherited, "traceparent": trace}
        child = child.model_copy(update={"metadata": {**child.metadata, TRACE_KEY: traced}})
    (child,) = await core.workspaces.place(core.store, parent, [child], workspace)
    async with core.workspaces.stored([child]):
        core.store.create_agents([child])
    await core.children_created([child])
    core.event(
        "AgentForked",
        agent=child.uuid,
        parent=parent.uuid,
        fork_message_id=child.fork_message_id,
        origin=origin,
        correlation_id=correlation_id,
    )
    tell_replaced(core.event, [child], tier or tier_of(parent))
    if prompt is None:
        return Forked(child, None)
    if child.model is None:
        core.store.append_message(child.uuid, "user", prompt)
        return Forked(child, None)
    turn = await core.fork_caches.begin_child(child, lambda: core.begin_turn(child.uuid, prompt))
    return Forked(child, turn)
