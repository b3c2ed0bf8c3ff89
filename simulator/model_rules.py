"""What every vendor's per-model rules share: what they read of a model (`ModelRules`), whether
it is retired today, and the sampling parameters' defaults. Each vendor's refusals are its rules.py.

Which model refuses what is the catalog's (`ModelRules`, which `ModelInfo` is), and whether it
is retired the lifecycle's verdict for today (providers/lifecycle.py, as Grove's own); the error
texts are the vendors' own, each quoted from the page named beside it. Each API module calls
its vendor's check once a body is read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import date
from functools import lru_cache
from typing import Any, Protocol

from grove.providers.catalog import model_info
from grove.providers.errors import ClockError, GroveError
from grove.providers.lifecycle import TODAY_ENV, standing_of, today
from grove.simulator.wire import InvalidRequest, Problem


class ModelRules(Protocol):
    """What the checks read of a model (`providers.catalog.ModelInfo` is one)."""

    @property
    def thinking_style(self) -> str: ...
    @property
    def thinking_accepts(self) -> tuple[str, ...]: ...
    @property
    def thinking_refuses(self) -> tuple[str, ...]: ...
    @property
    def effort_levels(self) -> tuple[str, ...]: ...
    @property
    def forced_tool_choice(self) -> bool: ...
    @property
    def sampling_parameters(self) -> bool: ...
    @property
    def assistant_prefill(self) -> bool: ...
    @property
    def can_disable_thinking(self) -> bool: ...


@lru_cache(maxsize=4096)
def rules_for(model: str) -> ModelRules | None:
    """The rules of a model the catalog knows, looked up once per id; None for any other id (a
    new model or a compatible server's own: the simulator has nothing to hold it to)."""
    try:
        info = model_info(model)
    except GroveError:
        return None
    return info if info.known else None


def retired(model: str) -> bool:
    """Whether the vendor no longer serves `model` today (`GROVE_TODAY`, as for Grove's own
    verdicts): a catalog model, or a dated snapshot of one, past its shutdown."""
    return _retired_on(model, _day(os.environ.get(TODAY_ENV), int(time.monotonic())))


@lru_cache(maxsize=8)
def _day(given: str | None, second: int) -> date:
    """Today, read again each second (or when `GROVE_TODAY` changes), not at every request."""
    try:
        return today()
    except ClockError:
        return date.today()


@lru_cache(maxsize=4096)
def _retired_on(model: str, day: date) -> bool:
    try:
        info = model_info(model)
    except GroveError:
        return False
    return standing_of(info, day, model).retired


# The values a request may leave at their defaults (the API's defaults: temperature 1, top_p 1;
# top_k has none).
SAMPLING_DEFAULTS: Mapping[str, float | None] = {"temperature": 1.0, "top_p": 1.0, "top_k": None}


def check_sampling(body: Mapping[str, Any], text: str, *, problem: Problem) -> None:
    for name, default in SAMPLING_DEFAULTS.items():
        value = body.get(name)
        if value is not None and value != default:
            raise InvalidRequest(text.format(name=name), param=name, problem=problem)
