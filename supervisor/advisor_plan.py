"""The deployment's advisor settings, resolved once: which reviewers watch, on which models,
where and how strictly; the desk that runs them is advisor_desk.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from grove.providers.model_specs import ModelSpec

SyncBacklog = Literal["off", 1, 3, 5]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReviewerConfig:
    name: str
    model: ModelSpec
    prompt: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class AdvisorPlan:
    """The deployment's advisor settings, resolved: who reviews, where, and how strictly."""

    enabled: bool = False
    subagents: bool = False
    sync_backlog: SyncBacklog = "off"
    reviewers: tuple[ReviewerConfig, ...] = ()
    workspace: str = "."
    watchdog: str = ""
