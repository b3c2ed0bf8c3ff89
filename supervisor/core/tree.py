"""`AgentTree`: the agents' tree as the core keeps it: roots made, records read, trees held.

Nothing here runs a turn or places an agent on a host (placement.py, turn_protocol.py).
"""

from __future__ import annotations

import time
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from grove.actors.telemetry import TRACE_KEY
from grove.providers.model_specs import ModelSpec
from grove.providers.tier_rules import checked_tier
from grove.supervisor.agent_tiers import TIER_KEY, tell_replaced, tier_entry
from grove.supervisor.core.state import CoreState
from grove.supervisor.store.records import AgentRecord


class AgentTree(CoreState):
    """Roots, records and the trees of agents this Grove holds."""

    def create_root(
        self,
        spec: ModelSpec | None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: Mapping[str, Any] | None = None,
        trace_parent: str | None = None,
    ) -> AgentRecord:
        """`tools` holds the tool entries of the record's metadata (supervisor/tool_rules.py)
        and its price `tier` (default: standard); `trace_parent`: the caller's span, under which
        the root's trace goes (when traced)."""
        uuid = str(uuidlib.uuid4())
        metadata: dict[str, Any] = dict(tools or {})
        provider, model = (spec.provider, spec.model) if spec else (None, None)
        asked = checked_tier(str(metadata.pop(TIER_KEY, "standard")))
        metadata.update(tier_entry(provider, asked))
        trace = self.tracing.create_agent(uuid, provider, model, trace_parent)
        if trace is not None:
            metadata[TRACE_KEY] = trace.to_data()
        if "budget" in metadata:
            metadata["budget_root"] = uuid
        if system:
            metadata["system"] = system
        if isolation:
            metadata["isolation"] = isolation
        record = AgentRecord(
            uuid=uuid,
            role="root",
            provider=spec.provider if spec else None,
            model=spec.model if spec else None,
            thinking_level=spec.thinking if spec else None,
            created_at=time.time(),
            metadata=metadata,
        )
        self.store.create_agents([record])
        self.store.set_focus(record.uuid, record.uuid)
        self.event("AgentCreated", agent=record.uuid, role="root")
        tell_replaced(self.event, [record], asked)
        self._created.add(record.uuid)
        self.hold(record)
        return record

    def hold(self, record: AgentRecord) -> None:
        """This Grove holds the agent's tree from now on (supervisor/holding.py)."""
        self.holding.hold(record)

    def holds(self, uuid: str) -> bool:
        """Whether `hold` of the agent would do nothing (its tree is held): then its record
        need not be read for it."""
        return self.holding.holds(uuid)

    def agent(self, uuid_or_prefix: str) -> AgentRecord:
        return self.store.resolve_agent(uuid_or_prefix)

    def root_of(self, record: AgentRecord) -> AgentRecord:
        while record.parent_uuid is not None:
            parent = self.store.get_agent(record.parent_uuid)
            if parent is None:
                break
            record = parent
        return record

    def descendants(self, uuid: str) -> list[AgentRecord]:
        found: list[AgentRecord] = []
        stack = [uuid]
        while stack:
            for child in self.store.children(stack.pop()):
                found.append(child)
                stack.append(child.uuid)
        return found
