"""A config file's settings refused by `load_settings`: the one line of the ConfigError, for
the tests of each section's bounds to look for the setting's name and the problem in."""

from __future__ import annotations

from pathlib import Path

import pytest

from grove.supervisor.config import load_settings
from grove.supervisor.errors import ConfigError


def refused(config: Path, text: str) -> str:
    """The error `load_settings` raises once `config` (the file GROVE_CONFIG_FILE names)
    holds `text`: one line."""
    config.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    message = str(raised.value)
    assert "\n" not in message, message
    return message
