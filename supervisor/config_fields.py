"""What every section of Grove's configuration shares: the section base that refuses unknown
keys, and the checked field types (a usable URL, a model spec) several sections use.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from grove.providers.credentials import base_url_problem
from grove.providers.errors import ModelSpecError
from grove.providers.lifecycle import chosen_model


def _usable_url(value: str) -> str:
    problem = base_url_problem(value)
    if problem:
        raise ValueError(problem)
    return value


UsableUrl = Annotated[str, AfterValidator(_usable_url)]  # http(s), with a host


class ConfigSection(BaseModel):
    """A table of config.toml: a key it does not know is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


def checked_model_spec(value: str) -> str:
    """A model a config file names: the checks of a model chosen on the command line (an
    unknown id, a typo of a known one, a retired one refused in one line)."""
    try:
        chosen_model(value)
    except ModelSpecError as exc:
        raise ValueError(str(exc)) from exc
    return value
