"""An agent's price tier as its record keeps it (metadata `tier`, SPEC 20): read, set for its
provider, and what says once that agents asked for flex run on batch instead (an event, a log
line in the caller's process). Light imports: the service's client uses it too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from grove.providers.base import TIERS, Tier
from grove.providers.tier_rules import replaced_text, served_tier

if TYPE_CHECKING:
    from grove.supervisor.store.records import AgentRecord

TIER_KEY = "tier"  # absent (an agent made before tiers): the standard tier
log = logging.getLogger(__name__)
_said: set[str] = set()  # what this process has told its user


class TieredAgent(Protocol):
    """What of an agent's record says its tier (an `AgentRecord` and an `AgentView` have it)."""

    @property
    def provider(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


def tier_of(record: TieredAgent) -> Tier:
    """The tier the agent's requests go on: its record's, served for its provider now (an agent
    switched onto a model without flex runs on batch); standard when none or not a tier."""
    stored = record.metadata.get(TIER_KEY)
    tier: Tier = next((known for known in TIERS if known == stored), "standard")
    return served_tier(record.provider, tier)


def marked_tier(tier: str | None) -> str | None:
    """The tier as listings and the chat's status line mark it beside the model: None for the
    standard tier (or none), which they leave unsaid, so ordinary agents show as before."""
    return None if tier in (None, "standard") else tier


def tier_entry(provider: str | None, tier: Tier) -> dict[str, Any]:
    """The metadata entry of an agent on `provider` asked onto `tier`."""
    return {TIER_KEY: served_tier(provider, tier)}


def tell_replaced(event: Callable[..., None], records: Sequence[AgentRecord], asked: Tier) -> None:
    """One `TierReplaced` event for the agents made together that asked for `asked` and run on
    another tier (Anthropic's flex: batch), however many they are."""
    replaced = [record for record in records if tier_of(record) != asked]
    text = replaced_text(replaced[0].provider, replaced[0].model, asked) if replaced else None
    if text is not None:
        event(
            "TierReplaced",
            agents=[record.uuid for record in replaced],
            asked=asked,
            tier=tier_of(replaced[0]),
            text=text,
        )


class PlacedAgent(Protocol):
    """What of an agent's record says where its requests go (an `AgentView` has it)."""

    @property
    def provider(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...


class AgentLookup(Protocol):
    """A Grove, local or served: its agents' records by uuid."""

    def agent(self, prefix: str) -> PlacedAgent: ...


def say_replaced(provider: str | None, model: str | None, tier: str | None) -> None:
    """Tell the user, once in this process for each model, that agents asked onto `tier` run
    on another: a warning of the `grove` logger (the command line prints it)."""
    text = replaced_text(provider, model, tier)
    if text is not None and text not in _said:
        _said.add(text)
        log.warning(text)


def say_children_tier(grove: AgentLookup, children: Sequence[str], tier: str | None) -> None:
    """`say_replaced` for `children` forked together onto `tier` (their first one's model is
    read only when the tier is one a provider may replace)."""
    if children and replaced_text("anthropic", None, tier) is not None:
        child = grove.agent(children[0])
        say_replaced(child.provider, child.model, tier)
