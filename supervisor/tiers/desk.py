"""`TierDesk`: the supervisor's collectors of steps on the batch tier, one per provider and key,
each made on its first step; after a restart, the batches the store holds are polled again.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection

from grove.actors.agent.batched import BatchAnswer
from grove.providers.base import ProviderName, Request
from grove.providers.batch_wire import BatchWire
from grove.providers.errors import GroveError
from grove.providers.factory import resolve_endpoint
from grove.providers.http import Endpoint
from grove.supervisor.store.base import Store
from grove.supervisor.store.batch_steps import BatchStepRecord
from grove.supervisor.tiers.collector import BatchCollector, Event
from grove.supervisor.tiers.plan import BatchPlan, account

# Each vendor's batch wire: its module and class, imported when first needed.
BATCH_WIRES: dict[ProviderName, tuple[str, str]] = {
    "anthropic": ("grove.providers.anthropic.batch", "AnthropicBatchWire"),
    "openai": ("grove.providers.openai.batch", "OpenAIBatchWire"),
    "google": ("grove.providers.google.batch", "GeminiBatchWire"),
}


def batch_wire(provider: ProviderName, openai_api: str) -> BatchWire:
    """A new batch wire for the provider (OpenAI's for the API its requests go to)."""
    module, name = BATCH_WIRES[provider]
    made = getattr(importlib.import_module(module), name)
    wire: BatchWire = made(openai_api) if provider == "openai" else made()
    return wire


class TierDesk:
    """Hands each step on the batch tier to its provider and key's collector."""

    def __init__(self, store: Store, plan: BatchPlan, event: Event) -> None:
        self._store = store
        self._plan = plan
        self._event = event
        self._collectors: dict[tuple[ProviderName, str], BatchCollector] = {}

    async def reply(
        self, agent: str, provider: ProviderName, step: str, request: Request
    ) -> BatchAnswer:
        """A step's answer from its provider's batch API."""
        try:
            collector = self._collector(provider, self._endpoint(provider))
        except GroveError as exc:  # no key for it, say
            return BatchAnswer(error=str(exc))
        return await collector.reply(agent, step, request)

    async def cancel(self, agent: str) -> None:
        """The agent's turn was cancelled: its steps, and batches only they wait on."""
        for collector in list(self._collectors.values()):
            await collector.cancel(agent)

    def resume(self, ours: Callable[[], Collection[str]]) -> None:
        """When the supervisor starts (Ray restarted it, or a service starts again on its
        store): every batch the store holds steps of this Grove's agents in (`ours`: those of
        the trees no other live Grove holds) is polled again by its provider and key's
        collector. A step stored but never known sent (the restart came as it went) is
        dropped: its turn asks for it again. Steps of a key no longer configured stay stored,
        and are told of."""
        records = self._store.batch_steps.all()
        if not records:
            return
        agents = set(ours())
        records = [record for record in records if record.agent in agents]
        unsent = [record.step for record in records if record.batch_id is None]
        if unsent:
            self._store.batch_steps.drop(unsent)
            self._event("BatchStepsDropped", steps=len(unsent), why="not known sent")
        groups: dict[tuple[ProviderName, str], list[BatchStepRecord]] = {}
        for record in records:
            if record.batch_id is not None:
                groups.setdefault((record.provider, record.account), []).append(record)
        for (provider, key), group in groups.items():
            try:
                endpoint = self._endpoint(provider)
            except GroveError:  # no key for it here now
                endpoint = None
            if endpoint is None or account(endpoint) != key:
                self._event("BatchStepsOrphaned", provider=provider, steps=len(group))
                continue
            self._collector(provider, endpoint).resume(group)

    async def aclose(self) -> None:
        for collector in self._collectors.values():
            await collector.aclose()

    def _endpoint(self, provider: ProviderName) -> Endpoint:
        return resolve_endpoint(provider, self._plan.base_urls.get(provider), self._plan.simulator)

    def _collector(self, provider: ProviderName, endpoint: Endpoint) -> BatchCollector:
        key = (provider, account(endpoint))
        collector = self._collectors.get(key)
        if collector is None:
            wire = batch_wire(provider, self._plan.openai_api)
            collector = BatchCollector(wire, endpoint, key[1], self._store, self._plan, self._event)
            self._collectors[key] = collector
        return collector
