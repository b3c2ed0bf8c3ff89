"""The config sections of how agents work: `[limits]` of a tree, `[budget]`, `[advisor]` and
its reviewers, and `[compaction]` of long histories.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from grove.providers.catalog import DEFAULT_MODELS
from grove.supervisor.config_fields import ConfigSection, checked_model_spec


class LimitSettings(ConfigSection):
    fork_depth: int = Field(default=4, ge=1, description="Levels of children below a root")
    children_per_agent: int = Field(default=32, ge=1, description="Children one agent may fork")
    tool_steps: int = Field(
        default=50, ge=1, le=1000, description="Model steps one turn may take calling tools"
    )


RESERVE_OUTPUT_TOKENS = 4_096  # what a budgeted request holds for its reply, by default


class BudgetSection(ConfigSection):
    """`[budget]`: a limit over each tree that run, chat and batch start (none by default)."""

    tokens: int | None = Field(default=None, gt=0, description="Input plus output tokens")
    cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    turns: int | None = Field(default=None, gt=0)
    soft: float = Field(default=0.8, gt=0, le=1, description="Share that warns, once")
    reserve_output: int = Field(
        default=RESERVE_OUTPUT_TOKENS, gt=0, description="Reply tokens each request holds"
    )
    strict: bool = Field(default=False, description="Cap max_tokens at what a request holds")
    hard_stop: Literal["finish", "cancel"] = Field(
        default="finish", description="cancel: stop replies that outgrow the budget"
    )

    def budget(self) -> dict[str, Any] | None:
        """The budget as a root's metadata holds it; None when no limit is set."""
        limits = {"tokens": self.tokens, "cost_usd": self.cost_usd, "seconds": self.seconds}
        limits["turns"] = self.turns
        if all(value is None for value in limits.values()):
            return None
        return self.model_dump()


class ReviewerSection(ConfigSection):
    name: str = Field(min_length=1, max_length=64)
    model: str
    prompt: str = ""

    @field_validator("model")
    @classmethod
    def _valid_model(cls, value: str) -> str:
        return checked_model_spec(value)


class AdvisorSection(ConfigSection):
    enabled: bool = False
    # The catalog's Anthropic default: a current model, never a retired one.
    model: str = f"{DEFAULT_MODELS['anthropic']}/med"
    subagents: bool = False
    sync_backlog: Literal["off", 1, 3, 5] = "off"
    retry_delay_s: float = Field(
        default=1.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="A reviewer's wait after a failed review, before it tries again",
    )
    reviewers: list[ReviewerSection] = Field(default_factory=list)

    @field_validator("model")
    @classmethod
    def _valid_model(cls, value: str) -> str:
        return checked_model_spec(value)

    @field_validator("sync_backlog", mode="before")
    @classmethod
    def _number_from_text(cls, value: Any) -> Any:
        return int(value) if isinstance(value, str) and value.isdigit() else value

    def reviewer_sections(self) -> list[ReviewerSection]:
        """The named reviewers, or one called `advisor` on `model` when none are named."""
        return self.reviewers or [ReviewerSection(name="advisor", model=self.model)]


class CompactionSection(ConfigSection):
    """`[compaction]`: when and how an agent's older history is summarised."""

    enabled: bool = Field(default=True, description="Compact automatically (overflow, threshold)")
    threshold: float = Field(
        default=0.8, gt=0, le=1, description="Compact after a turn past this share of the window"
    )
    keep_recent_tokens: int = Field(
        default=20_000, ge=0, le=10_000_000, description="Recent history kept word for word"
    )
    model: str | None = Field(default=None, description="Model of summaries (default: the agent's)")
    strategy: Literal["summary", "snapcompact"] = Field(
        default="summary",
        description="summary: a model writes one; snapcompact: history printed on images",
    )
