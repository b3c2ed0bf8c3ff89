"""What the routers share: the limits of the texts and names a request carries, the options
every forked child gets alike (a fork's body, a batch's query), and the store's reads.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from grove.providers.base import Tier
from grove.providers.tier_rules import TIER_HELP
from grove.supervisor.api import Grove
from grove.supervisor.batch.tasks import MAX_TEXT_BYTES
from grove.supervisor.reads import StoreReads

MAX_NAME_CHARS = 200
MAX_NAMES = 256


def _within_text_limit(text: str) -> str:
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"is {size:,} bytes; the limit is {MAX_TEXT_BYTES:,}")
    return text


# Every text a root or a prompt takes: a prompt's size (as a batch task's), or a name's.
Text = Annotated[str, AfterValidator(_within_text_limit)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
Names = Annotated[list[Name], Field(max_length=MAX_NAMES)]


class ForkOptionsIn(BaseModel):
    """supervisor/fork_options.py's ForkOptions as a request carries them: each field goes to
    fork_many (or run_batch) as it is."""

    workspace: Literal["shared", "worktree"] | None = Field(
        default=None, description="worktree: each child in a git worktree of its own"
    )
    tools: Names | None = Field(
        default=None, description="the parent's tools the children keep (default: all)"
    )
    tier: Tier | None = Field(
        default=None, description=f"the children's price tier (default: the parent's): {TIER_HELP}"
    )


def store_reads(grove: Grove) -> StoreReads:
    """The reads of the store `grove` keeps its agents in (to close after use)."""
    return StoreReads(grove.settings.store, keep_days=grove.settings.events.keep_days)
