"""`[hosts]` settings read from a config file and the environment: `idle_pools` bounded, with
an error that names it, and the environment winning over the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config import ConfigError, load_settings


def test_idle_pools_is_bounded_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    assert load_settings().hosts.idle_pools == 512
    for value, problem in (
        ("-1", "hosts.idle_pools: Input should be greater than or equal to 0"),
        ("100001", "hosts.idle_pools: Input should be less than or equal to 100000"),
        ("2.5", "hosts.idle_pools: Input should be a valid integer"),
    ):
        config.write_text(f"[hosts]\nidle_pools = {value}\n")
        with pytest.raises(ConfigError) as raised:
            load_settings()
        assert problem in str(raised.value) and "\n" not in str(raised.value), raised.value
    config.write_text("[hosts]\nidle_pools = 0\n")  # every pool closed as its turn ends
    assert load_settings().hosts.idle_pools == 0
    monkeypatch.setenv("GROVE_HOSTS__IDLE_POOLS", "64")
    assert load_settings().hosts.idle_pools == 64
