"""`grove models`' rows and table (supervisor/model_table.py): the catalog with each model's
standing on a day, retired ones only on asking, one provider's on asking, the default marked.
"""

from __future__ import annotations

import json
from datetime import date

import pytest
from typer.testing import CliRunner

from grove.cli.app import app
from grove.providers.catalog import DEFAULT_MODELS, MODELS
from grove.providers.errors import GroveError
from grove.providers.lifecycle import TODAY_ENV
from grove.supervisor.model_table import model_rows, table_lines

DAY = date(2026, 12, 4)
ROW_KEYS = [
    "id", "provider", "default", "status", "retires", "successor", "context_window",
    "max_input_tokens", "max_output_tokens", "prices",
]  # fmt: skip


def test_rows_carry_what_section_17_lists() -> None:
    rows = model_rows(day=DAY)
    assert rows and all(list(row) == ROW_KEYS for row in rows)
    by_id = {row["id"]: row for row in rows}
    assert "claude-sonnet-4-5" not in by_id  # retired: only with include_retired
    assert [row["id"] for row in rows if row["default"]] == list(DEFAULT_MODELS.values())
    gpt6 = by_id["gpt-6-sol"]
    assert (gpt6["context_window"], gpt6["max_input_tokens"]) == (1_050_000, 922_000)
    assert gpt6["prices"]["long_context"]["above_input_tokens"] == 272_000
    mini = by_id["gpt-5-mini"]
    assert (mini["status"], mini["retires"], mini["successor"]) == (
        "deprecated", "2026-12-11", "gpt-6.1-terra",
    )  # fmt: skip
    assert set(by_id) <= set(MODELS)


def test_all_adds_retired_models_and_the_day_decides_what_is_retired() -> None:
    retired = [row for row in model_rows(True, day=DAY) if row["status"] == "retired"]
    assert {"claude-sonnet-4-5", "gemini-2.5-pro"} <= {row["id"] for row in retired}
    sonnet = next(row for row in retired if row["id"] == "claude-sonnet-4-5")
    assert (sonnet["retires"], sonnet["successor"]) == ("2026-11-30", "claude-sonnet-5-5")
    later = {row["id"]: row["status"] for row in model_rows(True, day=date(2026, 12, 11))}
    assert later["gpt-5-mini"] == "retired"
    assert "gpt-5-mini" not in {row["id"] for row in model_rows(day=date(2026, 12, 11))}


def test_one_providers_models_and_an_unknown_provider() -> None:
    rows = model_rows(provider="google", day=DAY)
    assert rows and {row["provider"] for row in rows} == {"google"}
    with pytest.raises(GroveError) as unknown:
        model_rows(provider="mistral", day=DAY)
    assert str(unknown.value) == "Unknown provider: mistral (one of anthropic, openai, google)"


def test_the_table_shows_status_shutdown_window_and_prices_with_the_default_marked() -> None:
    rows = [
        row
        for row in model_rows(True, "anthropic", DAY)
        if row["id"] in ("claude-sonnet-5-5", "claude-opus-4-5", "claude-sonnet-4-5")
    ]
    assert table_lines(rows) == [
        "model               provider  status     shuts down    window    input   output cache rd",
        "claude-sonnet-5-5 * anthropic current    -          1,000,000     2.00    10.00     0.20",
        "claude-opus-4-5     anthropic deprecated 2027-01-22   200,000     5.00    25.00     0.50",
        "claude-sonnet-4-5   anthropic retired    2026-11-30   200,000     3.00    15.00     0.30",
        "* the provider's default; prices in USD per million tokens",
    ]
    assert table_lines([]) == ["No models"]


def test_grove_models_prints_the_table_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Locally (no service: --store names a Grove of the command's own)."""
    env = {TODAY_ENV: DAY.isoformat(), "GROVE_CONFIG_FILE": "/nonexistent/none.toml"}
    runner = CliRunner()
    shown = runner.invoke(app, ["--store", "sqlite:////nonexistent/g.db", "models"], env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == table_lines(model_rows(day=DAY))
    listed = runner.invoke(
        app,
        ["--store", "sqlite:////nonexistent/g.db", "models", "--all", "--provider", "openai",
         "--json"],
        env=env,
    )  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == model_rows(True, "openai", DAY)
    wrong = runner.invoke(app, ["models", "--provider", "mistral"], env=env)
    assert wrong.exit_code == 2 and "'mistral' is not one of" in wrong.stderr
