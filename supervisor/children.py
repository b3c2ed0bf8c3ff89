"""The records of forked children: the model, what they inherit from their parent's record,
and what the fork adds (a system prompt, a shared budget, retries, batch keys).
"""

from __future__ import annotations

import time
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from actors.output import OutputType
from actors.telemetry import TRACE_KEY
from providers.catalog import ModelSpec
from supervisor.budget_rules import BUDGET_KEYS, Budget, group_entry
from supervisor.store.records import AgentRecord
from supervisor.tool_rules import INHERITED_TOOL_METADATA

# What a forked child takes over from its parent's record besides the model.
# `budget_root`: the root whose `budget` the agent draws on; `budget_groups`: the budgets of
# the fork_many calls it (or an ancestor) came from (supervisor/budget.py); `workspace`: the
# directory its tools work in, when not the hosts' (a worktree: supervisor/worktrees.py);
# `trace`: where its turns hang in its tree's trace (actors/telemetry.py), unless its fork
# names a span of its own.
INHERITED_METADATA = ("system", "workspace", TRACE_KEY, *BUDGET_KEYS, *INHERITED_TOOL_METADATA)


def child_records(
    parent: AgentRecord,
    model: ModelSpec | None,
    point: int,
    count: int,
    system: str | None = None,
    budget: Budget | None = None,
    keys: Sequence[str] | None = None,
    output: OutputType | None = None,
) -> list[AgentRecord]:
    """`count` children of `parent` forked after its message `point`, all made at one time:
    `model` or the parent's, the metadata they inherit, and what this fork adds: a system
    prompt in place of the parent's, a `budget` they share, a
    key each (`keys`), a typed answer (`output`)."""
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
    now = time.time()
    return [
        AgentRecord(
            uuid=str(uuidlib.uuid4()),
            parent_uuid=parent.uuid,
            role="child",
            fork_message_id=point,
            provider=model.provider if model else parent.provider,
            model=model.model if model else parent.model,
            thinking_level=model.thinking if model else parent.thinking_level,
            created_at=now,
            metadata={**shared, **({"key": keys[index]} if keys is not None else {})},
        )
        for index in range(count)
    ]
