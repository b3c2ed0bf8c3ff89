"""Where a model stands in its vendor's lifecycle on a given day (the catalog's status, dates
and successor): retired models refused, deprecated or soon-retiring ones warned about.

"Today" is `GROVE_TODAY` (YYYY-MM-DD) when set, so tests and reruns see a fixed day.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from grove.providers.catalog import model_info
from grove.providers.errors import ClockError, RetiredModelError, UnknownModelError
from grove.providers.model_records import ModelInfo
from grove.providers.model_specs import ModelSpec, parse_model_choice

TODAY_ENV = "GROVE_TODAY"
# A model shutting down within this many days runs with a warning.
WARNING_DAYS = 30
LIST_HINT = "`grove models` lists the current ones"


def today() -> date:
    """The day lifecycle verdicts are made for: `GROVE_TODAY`, else the local date."""
    given = os.environ.get(TODAY_ENV)
    if not given:
        return date.today()
    try:
        return date.fromisoformat(given)
    except ValueError:
        raise ClockError(f"{TODAY_ENV} must be a date as YYYY-MM-DD, not {given!r}") from None


@dataclass(frozen=True, slots=True)
class Standing:
    """A model's lifecycle on `day`: retired (shut down), deprecated (shutting down, the
    vendor says), retiring (its shutdown is within WARNING_DAYS), or none of these."""

    model: str
    retired: bool
    deprecated: bool
    retiring: bool
    retires_on: date | None
    successor: str | None

    @property
    def instead(self) -> str:
        return f"use {self.successor}" if self.successor else LIST_HINT

    @property
    def retired_text(self) -> str:
        """`claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5`."""
        return f"{self.model} was retired{self._on}; {self.instead}"

    @property
    def warning(self) -> str | None:
        """The one-line warning of a deprecated or retiring model; None otherwise (a retired
        one is refused, not warned about)."""
        if self.retired or not (self.deprecated or self.retiring):
            return None
        state = "is deprecated and shuts down" if self.deprecated else "shuts down"
        if self.retires_on is None:
            state = "is deprecated"
        return f"Warning: {self.model} {state}{self._on}; {self.instead}"

    @property
    def notice(self) -> str | None:
        """What to tell of a model in use: that it was retired, or its warning."""
        return self.retired_text if self.retired else self.warning

    @property
    def resume_text(self) -> str:
        """What to do with a stored agent on a retired model."""
        switch = f"/model {self.successor}" if self.successor else f"/model MODEL ({LIST_HINT})"
        return f"This agent's model {self.model} was retired{self._on}; switch it with {switch}"

    @property
    def _on(self) -> str:
        return f" on {self.retires_on.isoformat()}" if self.retires_on is not None else ""


def standing_of(info: ModelInfo, day: date, model: str | None = None) -> Standing:
    """`info`'s standing on `day` (named `model`, e.g. a dated snapshot of `info`)."""
    ends = info.retires_on
    retired = ends <= day if ends is not None else info.status == "retired"
    deprecated = info.status in ("deprecated", "retired") or (
        info.deprecated_on is not None and info.deprecated_on <= day
    )
    retiring = ends is not None and ends - day <= timedelta(days=WARNING_DAYS)
    return Standing(
        model=model or info.id,
        retired=retired,
        deprecated=deprecated,
        retiring=retiring,
        retires_on=ends,
        successor=info.successor,
    )


def standing(model: str, day: date | None = None) -> Standing | None:
    """The standing of a model id (a dated snapshot shares its model's); None for an id
    without a known prefix."""
    try:
        info = model_info(model)
    except UnknownModelError:
        return None
    return standing_of(info, day or today(), model)


@dataclass(frozen=True, slots=True)
class Choice:
    """A chosen model and the warning to show with it (deprecated, or shutting down soon)."""

    spec: ModelSpec
    warning: str | None


def choose_model(
    text: str, aliases: Mapping[str, str] | None = None, day: date | None = None
) -> Choice:
    """A model a user or a model picks (a flag, a config file, /model, /fork --model, a task
    line, a tool's argument): `parse_model_choice`'s checks, and a retired model refused
    (RetiredModelError). One named `PROVIDER:MODEL` is sent as written: never refused or
    warned about here."""
    spec = parse_model_choice(text, aliases)
    if spec.as_written:
        return Choice(spec, None)
    found = standing(spec.model, day)
    if found is None:
        return Choice(spec, None)
    if found.retired:
        raise RetiredModelError(found.retired_text, spec.model)
    return Choice(spec, found.warning)


def chosen_model(
    text: str, aliases: Mapping[str, str] | None = None, day: date | None = None
) -> ModelSpec:
    """`choose_model`'s spec."""
    return choose_model(text, aliases, day).spec


def stale_agents(
    agents: Iterable[tuple[str, str]], day: date | None = None
) -> list[tuple[str, Standing]]:
    """Of `(agent, model)` pairs, each agent whose model is retired, deprecated or shuts down
    within WARNING_DAYS, with that model's standing, in the order given."""
    when = day or today()
    judged: dict[str, Standing | None] = {}
    found = []
    for agent, model in agents:
        if model not in judged:
            known = standing(model, when)
            judged[model] = known if known is not None and known.notice is not None else None
        if (verdict := judged[model]) is not None:
            found.append((agent, verdict))
    return found
