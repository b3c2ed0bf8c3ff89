"""`ModelChoice`: which provider, model, thinking level and price tier an agent runs on (plain
frozen data, sent across Ray with turns and activations), and the factory of a provider for one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grove.providers.base import ProviderName, ThinkingLevel, Tier
from grove.providers.stream_events import Provider


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    provider: ProviderName
    model: str
    thinking: ThinkingLevel | None = None
    tier: Tier = "standard"  # SPEC 20: each of the agent's requests goes on this tier


ProviderFactory = Callable[[ModelChoice], Provider]
