"""Price tiers as pure rules: a tier's name checked, the tier each provider serves (Anthropic's
flex is batch), an agent's tier read from its record and inherited by its children, the config
that chooses them, and what `grove usage` counts a tier saved."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from grove.providers.base import AssistantTurn, Message, Request, Tier, Usage
from grove.providers.batch_wire import as_streamed
from grove.providers.google.request import build_body
from grove.providers.model_specs import parse_model_spec
from grove.providers.openai import chat, responses
from grove.providers.tier_rules import UnknownTierError, checked_tier, replaced_text, served_tier
from grove.supervisor.agent_tiers import tier_of
from grove.supervisor.children import child_records
from grove.supervisor.config import load_settings
from grove.supervisor.deployment import supervisor_settings
from grove.supervisor.errors import ConfigError
from grove.supervisor.store.records import AgentRecord, MessageRecord
from grove.supervisor.turns import choice_of
from grove.supervisor.usage import UsageTotals


def record(provider: str, model: str, tier: str | None = None) -> AgentRecord:
    metadata = {} if tier is None else {"tier": tier}
    return AgentRecord(
        uuid="a1", role="root", provider=provider, model=model, created_at=1.0, metadata=metadata
    )


def test_a_tier_name_is_checked_with_the_tiers_named() -> None:
    assert [checked_tier(name) for name in ("standard", "flex", "batch")] == [
        "standard",
        "flex",
        "batch",
    ]
    with pytest.raises(UnknownTierError, match=r"^unknown tier 'Flex': the tiers are standard, "):
        checked_tier("Flex")


def test_anthropic_serves_flex_as_batch_and_says_so() -> None:
    assert served_tier("anthropic", "flex") == "batch"
    assert served_tier("openai", "flex") == "flex" and served_tier("google", "flex") == "flex"
    assert served_tier("anthropic", "standard") == "standard"
    text = replaced_text("anthropic", "claude-haiku-4-5", "flex")
    assert text is not None and "claude-haiku-4-5 runs on the batch tier instead" in text
    assert replaced_text("openai", "gpt-5-mini", "flex") is None
    assert replaced_text("anthropic", "claude-haiku-4-5", "batch") is None


def test_an_agents_tier_is_its_records_served_for_its_provider() -> None:
    assert tier_of(record("openai", "gpt-5-mini")) == "standard"
    assert tier_of(record("openai", "gpt-5-mini", "flex")) == "flex"
    assert tier_of(record("anthropic", "claude-haiku-4-5", "flex")) == "batch"  # switched model
    assert tier_of(record("openai", "gpt-5-mini", "cheap")) == "standard"  # not a tier
    choice = choice_of(record("openai", "gpt-5-mini", "flex"))
    assert choice is not None and choice.tier == "flex"


def test_children_inherit_the_tier_unless_their_fork_names_one() -> None:
    parent = record("openai", "gpt-5-mini", "flex")
    (inherited,) = child_records(parent, None, 0, 1)
    (own,) = child_records(parent, None, 0, 1, tier="standard")
    claude = parse_model_spec("claude-haiku-4-5")
    (on_claude,) = child_records(parent, claude, 0, 1)
    assert [tier_of(child) for child in (inherited, own, on_claude)] == [
        "flex",
        "standard",
        "batch",
    ]


@pytest.mark.parametrize("tier", ["flex", "standard", "batch"])
def test_the_request_builders_send_the_flex_field_only_on_flex(tier: Tier) -> None:
    request = Request(model="gpt-5-mini", messages=(Message.user("hi"),), tier=tier)
    expected = "flex" if tier == "flex" else None
    assert responses.request_body(request).get("service_tier") == expected
    assert chat.request_body(request).get("service_tier") == expected
    gemini = Request(model="gemini-3.0-flash", messages=(Message.user("hi"),), tier=tier)
    assert build_body(gemini)[0].get("serviceTier") == expected


def test_the_config_chooses_the_default_tier_and_the_tiers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    assert load_settings().defaults.tier == "standard"
    assert load_settings().tiers.flex_fallback is False
    config.write_text('[defaults]\ntier = "flex"\n[tiers]\nflex_fallback = true\nbatch_size = 50\n')
    settings = load_settings()
    assert (settings.defaults.tier, settings.tiers.batch_size) == ("flex", 50)
    hosts = supervisor_settings(settings, 1, None, None).host_settings
    assert hosts.retry.flex_fallback is True
    config.write_text('[defaults]\ntier = "cheap"\n')
    with pytest.raises(ConfigError, match=r"defaults\.tier: .*unknown tier 'cheap': the tiers are"):
        load_settings()
    config.write_text("[tiers]\nbatch_window_s = 0\n")
    with pytest.raises(ConfigError, match=r"tiers\.batch_window_s"):
        load_settings()


def reply(cost: float, tier: str | None) -> MessageRecord:
    data = {"usage": {"input_tokens": 10}, "cost_usd": cost}
    if tier is not None:
        data["tier"] = tier
    return MessageRecord(
        id=1, agent_uuid="a1", kind="assistant", content="", data=data, created_at=time.time()
    )


def test_usage_counts_what_the_half_price_tiers_saved() -> None:
    totals = UsageTotals()
    for cost, tier in ((0.5, "flex"), (0.25, "batch"), (1.0, "standard"), (2.0, None)):
        totals.add(reply(cost, tier))
    totals.add(reply(3.0, "cheap"))  # not a tier: standard, saved nothing
    assert totals.tier_saved_usd == pytest.approx(0.75)
    assert totals.as_dict()["tier_saved_usd"] == 0.75


def test_a_batched_reply_records_the_tier_it_went_on() -> None:
    request = Request(model="gpt-5-mini", messages=(Message.user("hi"),), tier="batch")
    turn = AssistantTurn(
        provider="openai", model="gpt-5-mini", message=Message.user("ok"), usage=Usage()
    )
    assert turn.tier == "standard" and as_streamed("openai", request, turn).tier == "batch"
