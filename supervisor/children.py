"""The records of forked children: the model, what they inherit from their parent's record,
and what the fork adds (a system prompt, a shared budget, retries, batch keys).
"""

from __future__ import annotations

import time
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from grove.actors.output import OutputType
from grove.actors.telemetry import TRACE_KEY
from grove.providers.base import Tier
from grove.providers.model_specs import ModelSpec
from grove.providers.preserved_thinking import preserves_thinking
from grove.supervisor.agent_tiers import tier_entry, tier_of
from grove.supervisor.budget_rules import BUDGET_KEYS, Budget, group_entry
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.tool_rules import INHERITED_TOOL_METADATA

# What a forked child takes over from its parent's record besides the model.
# `budget_root`: the root whose `budget` the agent draws on; `budget_groups`: the budgets of
# the fork_many calls it (or an ancestor) came from (supervisor/budget.py); `workspace`: the
# directory its tools work in, when not the hosts' (a worktree: supervisor/worktrees.py);
# `trace`: where its turns hang in its tree's trace (actors/telemetry.py), unless its fork
# names a span of its own. `tier` is set apart (`child_records`): a child on another provider
# may be served its parent's tier on another.
INHERITED_METADATA = ("system", "workspace", TRACE_KEY, *BUDGET_KEYS, *INHERITED_TOOL_METADATA)
# A child's own instructions, at the end of the conversation it inherits (see `instructed`).
INSTRUCTIONS_TEXT = """<instructions>
{system}
</instructions>

{prompt}"""


def instructed(
    parent: AgentRecord, model: ModelSpec | None, system: str | None, prompts: Sequence[str]
) -> tuple[str | None, list[str]]:
    """The system prompt children forked on `model` get, and their prompts. On the parent's
    own model when it preserves thinking, the children keep the parent's system prompt and
    read `system` as instructions at the head of their prompt: their conversation only grows
    from the parent's, which keeps its thinking and its cached prefix (a new system prompt
    would invalidate both). Elsewhere `system` replaces the parent's, as asked."""
    same_model = model is None or (model.provider, model.model) == (parent.provider, parent.model)
    if system is None or not same_model or parent.provider != "anthropic":
        return system, list(prompts)
    if parent.model is None or not preserves_thinking(parent.model):
        return system, list(prompts)
    return None, [INSTRUCTIONS_TEXT.format(system=system, prompt=prompt) for prompt in prompts]


def child_records(
    parent: AgentRecord,
    model: ModelSpec | None,
    point: int,
    count: int,
    system: str | None = None,
    budget: Budget | None = None,
    keys: Sequence[str] | None = None,
    output: OutputType | None = None,
    tier: Tier | None = None,
) -> list[AgentRecord]:
    """`count` children of `parent` forked after its message `point`, all made at one time:
    `model` or the parent's, the metadata they inherit, and what this fork adds: a system
    prompt in place of the parent's, a `budget` they share, a
    key each (`keys`), a typed answer (`output`), a price tier (else the parent's)."""
    shared: dict[str, Any] = {
        key: parent.metadata[key] for key in INHERITED_METADATA if key in parent.metadata
    }
    if system is not None:
        shared["system"] = system
    if budget is not None:
        groups = parent.metadata.get("budget_groups", [])
        shared["budget_groups"] = [*groups, group_entry(budget, parent.uuid)]
    if output is not None:
        shared["output"] = output.to_data()
    provider = model.provider if model else parent.provider
    shared.update(tier_entry(provider, tier or tier_of(parent)))
    now = time.time()
    return [
        AgentRecord(
            uuid=str(uuidlib.uuid4()),
            parent_uuid=parent.uuid,
            role="child",
            fork_message_id=point,
            provider=provider,
            model=model.model if model else parent.model,
            thinking_level=model.thinking if model else parent.thinking_level,
            created_at=now,
            metadata={**shared, **({"key": keys[index]} if keys is not None else {})},
        )
        for index in range(count)
    ]
