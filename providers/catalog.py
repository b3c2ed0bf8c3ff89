"""The model catalog: known models, provider inference, an unknown id's family and typos, and
the reference's texts about models. Parsing is model_specs.py's, prices are pricing.py's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from grove.providers.base import THINKING_LEVELS, ProviderName
from grove.providers.catalog_file import load_catalog
from grove.providers.errors import UnknownModelError
from grove.providers.model_records import ModelInfo, StructuredOutput

PROVIDER_PREFIXES: tuple[tuple[str, ProviderName], ...] = (
    ("claude-", "anthropic"),
    ("gpt-", "openai"),
    ("gemini-", "google"),
)
PROVIDER_TITLES: dict[ProviderName, str] = {
    "anthropic": "Anthropic",
    "openai": "OpenAI",
    "google": "Google",
}


# The vendors' models, read once when Grove starts: providers/models.json, each figure with
# its source page (providers/catalog_file.py checks the file).
CATALOG = load_catalog()
_MODELS: tuple[ModelInfo, ...] = CATALOG.models
MODELS: dict[str, ModelInfo] = {info.id: info for info in _MODELS}

# Each provider's default: a current model, neither deprecated nor retiring within a year.
DEFAULT_MODELS: dict[ProviderName, str] = dict(CATALOG.defaults)
# The three models per provider that the "Unknown model" text lists, in its order.
SUPPORTED_MODELS: dict[ProviderName, tuple[str, ...]] = dict(CATALOG.listed)


def completions() -> list[str]:
    """The Tab-completion list of the reference: each model, and `/THINKING` for defaults."""
    items: list[str] = []
    for provider, models in SUPPORTED_MODELS.items():
        for model in models:
            items.append(model)
            if model == DEFAULT_MODELS[provider]:
                items.extend(f"{model}/{level}" for level in THINKING_LEVELS)
    return items


def infer_provider(model: str) -> ProviderName | None:
    for prefix, provider in PROVIDER_PREFIXES:
        if model.startswith(prefix):
            return provider
    return None


def _family(model: str, provider: ProviderName) -> ModelInfo:
    """The known model an unknown id most resembles: the longest known id it extends
    (`gemini-2.5-flash-preview` is a flash, not a flash-lite), else the one sharing the most
    leading words (`claude-opus-6` is an Opus), else the provider's default. A Claude id of
    the old naming (`claude-3-7-sonnet-latest`) is one of the oldest generation known, whose
    thinking takes budgets."""
    candidates = [info for info in _MODELS if info.provider == provider]
    if _old_claude_naming(model):
        candidates = [info for info in candidates if info.thinking_style == "anthropic_budget"]
    return max(
        candidates,
        key=lambda info: (
            len(info.id) if model.startswith(f"{info.id}-") else 0,
            _shared_prefix(info.id.split("-"), model.split("-")),
            info.id == DEFAULT_MODELS[provider],
        ),
    )


def _old_claude_naming(model: str) -> bool:
    """`claude-3-7-sonnet-latest`: the version before the name, as before Claude 4."""
    words = model.split("-")
    return words[0] == "claude" and len(words) > 1 and words[1].isdigit()


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return length


def model_info(model: str, provider: ProviderName | None = None) -> ModelInfo:
    """Figures for any model id with a known prefix, or, for a compatible server's own model
    id, the figures of `provider`'s usual family; UnknownModelError otherwise. A dated
    snapshot of a catalog id is that model (its lifecycle too); another new id takes its
    family's figures and rules as a current model."""
    info = MODELS.get(model)
    if info is not None:
        return info
    provider = infer_provider(model) or provider
    if provider is None:
        raise UnknownModelError(unknown_model_text(model), model)
    return _borrowed(model, provider)


@lru_cache(maxsize=256)
def _borrowed(model: str, provider: ProviderName) -> ModelInfo:
    """An unknown id's figures, worked out once (each request of a fan-out asks again)."""
    family = _family(model, provider)
    if _is_snapshot(model, family.id):
        return replace(family, id=model, known=False)
    return replace(
        family,
        id=model,
        known=False,
        can_disable_thinking=family.can_disable_thinking and "pro" not in model,
        structured_output=_structured_output(model, family),
        status="current",
        released=None,
        deprecated_on=None,
        retires_on=None,
        successor=None,
    )


# A dated snapshot of an id is that model (its figures and lifecycle).
_SNAPSHOT = re.compile(r"-\d{8}|-\d{4}-\d{2}-\d{2}|-\d{3}")


def _is_snapshot(model: str, known: str) -> bool:
    """Whether `model` is `known` with a date or version suffix (`claude-sonnet-4-5-20250929`,
    `gpt-5-2025-08-07`, `gemini-2.0-flash-001`)."""
    return model.startswith(known) and _SNAPSHOT.fullmatch(model[len(known) :]) is not None


_WORD = re.compile(r"[a-z]{3,}")
# Past this an id is no typo of a catalog id (the longest is a third of it): no hint is sought,
# whose cost grows with the id's words (a `/model` line may be a megabyte).
MAX_NEAR_MISS_CHARS = 100


def near_miss(model: str) -> str | None:
    """The catalog's spelling of an id whose words are a typo away from the words of its
    provider's known ids (`claude-sonet-4-5` -> `claude-sonnet-4-5`); None when the id is
    known, or its words are known or far from any (a new model, a new version number)."""
    provider = infer_provider(model)
    if provider is None or model in MODELS or len(model) > MAX_NEAR_MISS_CHARS:
        return None
    ids = [info.id for info in _MODELS if info.provider == provider]
    known = {word for known_id in ids for word in _WORD.findall(known_id)}
    corrected, changed = model, False
    for match in reversed(list(_WORD.finditer(model))):
        word = match.group()
        if word in known:
            continue
        closest = min(sorted(known), key=lambda candidate: _edits(word, candidate))
        if _edits(word, closest) <= (1 if len(closest) <= 4 else 2):
            corrected = corrected[: match.start()] + closest + corrected[match.end() :]
            changed = True
    return corrected if changed else None


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i, left in enumerate(a, 1):
        row = [i]
        for j, right in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (left != right))
            if i > 1 and j > 1 and left == b[j - 2] and a[i - 2] == right:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def near_miss_text(model: str, provider: ProviderName, suggestion: str) -> str:
    return (
        f"Unknown model: {model}. Did you mean {suggestion}? "
        f"(To send {model} as written, name it {provider}:{model}.)"
    )


def _structured_output(model: str, family: ModelInfo) -> StructuredOutput:
    """A dated snapshot of a known model takes schemas as the model does; a Claude id of the
    old naming (`claude-3-7-sonnet-latest`: models before 4.5 lack structured outputs) goes
    through the forced tool, which those take; another new id as its family does."""
    if _old_claude_naming(model):
        return "tool"
    return family.structured_output


def unknown_model_text(model: str) -> str:
    width = max(len(title) for title in PROVIDER_TITLES.values()) + 1
    lines = [f"Unknown model: {model}", "", "Supported models:"]
    for provider, models in SUPPORTED_MODELS.items():
        label = f"{PROVIDER_TITLES[provider]}:".ljust(width)
        lines.append(f"  {label} {', '.join(models)}")
    return "\n".join(lines)


def invalid_thinking_text(level: str) -> str:
    return f"Invalid thinking level: {level}\nValid levels: {', '.join(THINKING_LEVELS)}"
