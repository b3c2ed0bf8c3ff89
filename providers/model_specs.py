"""`MODEL[/THINKING]` as users write it, parsed into a `ModelSpec` with the reference's error
texts (spec/commands-model-fork.md), word for word; what the catalog knows is catalog.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from grove.providers.base import THINKING_LEVELS, ProviderName, ThinkingLevel
from grove.providers.catalog import (
    MODELS,
    PROVIDER_TITLES,
    infer_provider,
    invalid_thinking_text,
    near_miss,
    near_miss_text,
    unknown_model_text,
)
from grove.providers.errors import InvalidThinkingLevelError, UnknownModelError


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A parsed `MODEL[/THINKING]`; `thinking=None` means the provider's default."""

    provider: ProviderName
    model: str
    thinking: ThinkingLevel | None = None
    # Named `PROVIDER:MODEL` (directly or by an alias): sent as written, never judged by the
    # catalog (a typo's hint, a retired id's refusal).
    as_written: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        """What parses back to this spec: a model named with its provider, or one the
        catalog does not place on this provider, keeps its `PROVIDER:` prefix."""
        bare = not self.as_written and infer_provider(self.model) == self.provider
        named = self.model if bare else self.qualified
        return named if self.thinking is None else f"{named}/{self.thinking}"

    @property
    def qualified(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_spec(text: str, aliases: Mapping[str, str] | None = None) -> ModelSpec:
    """Parse `MODEL[/THINKING]` as the reference says; aliases map a name to such a string.
    `PROVIDER:MODEL_ID` (given or as an alias's target) names a model the catalog does not
    know: a compatible server's own model on that provider's wire.

    Raises only UnknownModelError or InvalidThinkingLevelError, with the reference's texts.
    """
    model, slash, level = text.strip().partition("/")
    thinking: ThinkingLevel | None = None
    if slash:
        thinking = _thinking_level(level)
    if aliases and model in aliases:
        target, _, alias_level = aliases[model].strip().partition("/")
        if thinking is None and alias_level:
            thinking = _thinking_level(alias_level)
        model = target
    named, colon, model_id = model.partition(":")
    if colon and named in PROVIDER_TITLES and model_id:
        # "openai:my-local-model": a compatible server's model id on a provider's wire.
        return ModelSpec(provider=named, model=model_id, thinking=thinking, as_written=True)
    provider = infer_provider(model)
    if provider is None:
        raise UnknownModelError(unknown_model_text(model), model)
    return ModelSpec(provider=provider, model=model, thinking=thinking)


def parse_model_choice(text: str, aliases: Mapping[str, str] | None = None) -> ModelSpec:
    """A model a user picks now (a flag, /model, /fork --model): `parse_model_spec`, and an id
    a typo away from a catalog id refused with a "did you mean" (UnknownModelError); one
    named `PROVIDER:MODEL`, directly or by an alias, is taken as written."""
    spec = parse_model_spec(text, aliases)
    name = text.strip().partition("/")[0]
    written = (aliases or {}).get(name, name).strip().partition("/")[0]
    suggestion = None if ":" in written else _current_spelling(near_miss(spec.model))
    if suggestion is not None:
        raise UnknownModelError(near_miss_text(spec.model, spec.provider, suggestion), spec.model)
    return spec


def _current_spelling(suggestion: str | None) -> str | None:
    """A near miss to suggest: a retired model's successor in its place (`claude-sonet-4-5`
    was meant as the retired claude-sonnet-4-5: suggest claude-sonnet-5-5)."""
    info = MODELS.get(suggestion or "")
    if info is not None and info.status == "retired" and info.successor is not None:
        return info.successor
    return suggestion


def _thinking_level(level: str) -> ThinkingLevel:
    for known in THINKING_LEVELS:
        if level == known:
            return known
    raise InvalidThinkingLevelError(invalid_thinking_text(level), level)
