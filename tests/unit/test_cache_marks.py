"""Cache marks on the other wires and where they come from: fork points in a stored
conversation, OpenAI's `prompt_cache_key` and its spread over keys, Gemini's `cachedContent`
standing for a prefix, and `[cache]` in the configuration.

Pure functions and plain objects, called directly (a clock is handed in, never patched).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from grove.actors.transcript import fork_point, to_messages
from grove.providers.base import CachePoint, CachePolicy, Message, Request, TextPart, ToolSpec
from grove.providers.google.cache import cached_content_body
from grove.providers.google.request import build_body
from grove.providers.http import Endpoint
from grove.providers.openai.cache import REQUESTS_PER_KEY_MINUTE, WINDOW_S, CacheKeys, KeySpread
from grove.providers.openai.chat import OpenAIChatWire
from grove.providers.openai.responses import OpenAIResponsesWire
from grove.supervisor.config import load_settings
from grove.supervisor.config_providers import CacheSection
from grove.supervisor.errors import ConfigError
from grove.supervisor.store.records import MessageRecord

ENDPOINT = Endpoint(base_url="https://api.openai.com", api_key="sk-test-key-0123456789")


def record(number: int, agent: str, kind: str = "user") -> MessageRecord:
    return MessageRecord(
        id=number, agent_uuid=agent, kind=kind, content=f"m{number}", created_at=0.0
    )


def points(messages: list[Message]) -> list[str]:
    return [part.key for m in messages for part in m.parts if isinstance(part, CachePoint)]


def test_a_stored_conversation_gets_a_fork_point_where_each_ancestor_stops() -> None:
    conversation = [
        record(1, "root"),
        record(2, "root", "assistant"),
        record(5, "child"),
        record(6, "child", "assistant"),
        record(9, "grandchild"),
    ]
    assert points(to_messages(conversation, fork_points=True)) == ["root:2", "child:6"]
    assert points(to_messages(conversation)) == []
    assert fork_point(record(6, "child")) == CachePoint(key="child:6")


ON = CachePolicy()


def request(*parts: object, cache: CachePolicy | None = ON) -> Request:
    message = Message(role="user", parts=tuple(parts))  # type: ignore[arg-type]
    return Request(model="gpt-5-mini", messages=(message,), cache=cache)


def test_siblings_send_one_prompt_cache_key_named_after_their_fork_point() -> None:
    spread = KeySpread()
    first, second = CacheKeys(spread), CacheKeys(spread)
    sibling = request(TextPart(text="ctx"), CachePoint(key="root:2"), TextPart(text="a"))
    other = request(TextPart(text="ctx"), CachePoint(key="root:2"), TextPart(text="b"))
    assert first.key_for(sibling) == second.key_for(other)
    assert first.key_for(sibling) != first.key_for(request(CachePoint(key="root:3")))
    assert first.key_for(request(TextPart(text="no fork point"))) is None
    assert first.key_for(request(CachePoint(key="root:2"), cache=None)) is None


def test_both_openai_wires_send_the_key_and_skip_the_mark() -> None:
    forked = request(TextPart(text="ctx"), CachePoint(key="root:2"), TextPart(text="task"))
    for wire in (OpenAIResponsesWire(), OpenAIChatWire()):
        body = wire.prepare(forked, ENDPOINT).body
        assert str(body["prompt_cache_key"]).startswith("grove-")
        assert "cache_point" not in str(body)


def test_keys_spread_past_the_guidance_on_requests_a_minute() -> None:
    now = [1_000.0]
    spread = KeySpread(clock=lambda: now[0])
    agents = [CacheKeys(spread) for _ in range(40)]
    forked = request(CachePoint(key="root:2"))
    keys = [agent.key_for(forked) for agent in agents]
    per_key = {key: keys.count(key) for key in keys}
    assert sorted(per_key.values()) == [10, REQUESTS_PER_KEY_MINUTE, REQUESTS_PER_KEY_MINUTE]
    opened = agents[-1].key_for(forked)  # its key has carried ten: this one opens the next
    assert opened is not None and opened.endswith("-3") and opened not in keys
    assert agents[0].key_for(forked) == keys[-1]  # its key had its minute's worth: it moves
    now[0] += WINDOW_S
    assert [agents[n].key_for(forked) for n in (5, 20)] == [keys[5], keys[20]]


TOOL = ToolSpec(name="lookup", description="Look up.", parameters={"type": "object"})


def test_a_gemini_request_names_its_cached_content_instead_of_sending_the_prefix() -> None:
    marked = CachePoint(key="r:2", cached_content="cachedContents/abc")
    messages = (
        Message(role="user", parts=(TextPart(text="context " * 500),)),
        Message(role="assistant", parts=(TextPart(text="Understood."), marked)),
        Message(role="user", parts=(TextPart(text="the task"),)),
    )

    def gemini(messages: tuple[Message, ...], cache: CachePolicy | None = None) -> Request:
        return Request(
            model="gemini-3.0-flash", messages=messages, system="rules", tools=(TOOL,), cache=cache
        )

    body, _ = build_body(gemini(messages, ON))
    assert body["cachedContent"] == "cachedContents/abc"
    assert "systemInstruction" not in body and "tools" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "the task"}]}]
    plain, _ = build_body(gemini(messages))  # no caching: all of it
    assert "cachedContent" not in plain and len(plain["contents"]) == 3
    entry = cached_content_body(gemini(messages[:2]), 300)
    assert entry["model"] == "models/gemini-3.0-flash" and entry["ttl"] == "300s"
    assert entry["contents"] == plain["contents"][:2]
    assert entry["systemInstruction"] == plain["systemInstruction"]
    assert entry["tools"] == plain["tools"]


def test_cache_settings_default_on_and_refuse_wrong_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert CacheSection().policy() == CachePolicy(ttl="5m")
    assert CacheSection(enabled=False).policy() is None
    assert CacheSection(ttl="1h").policy() == CachePolicy(ttl="1h")
    config = tmp_path / "config.toml"
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(config))
    for table, problem in (
        ('ttl = "10m"', "cache.ttl: Input should be '5m' or '1h'"),
        ("enabled = 2", "cache.enabled: Input should be a valid boolean"),
        ('enabled = "maybe"', "cache.enabled: Input should be a valid boolean"),
        ("size = 3", "cache.size: Extra inputs are not permitted"),
    ):
        config.write_text(f"[cache]\n{table}\n")
        with pytest.raises(ConfigError) as raised:
            load_settings()
        assert problem in str(raised.value) and "\n" not in str(raised.value)
    config.write_text('[cache]\nttl = "1h"\n')
    assert load_settings().cache.policy() == CachePolicy(ttl="1h")
    monkeypatch.setenv("GROVE_CACHE__ENABLED", "false")
    assert load_settings().cache.policy() is None


def test_the_first_request_on_a_cold_key_goes_alone() -> None:
    async def scenario() -> list[str]:
        spread, order = KeySpread(), []
        first, second, third = CacheKeys(spread), CacheKeys(spread), CacheKeys(spread)
        forked = request(CachePoint(key="root:2"))

        async def send(keys: CacheKeys, name: str) -> None:
            await keys.admit(forked)
            order.append(f"{name} sent")

        await send(first, "first")  # the key is cold: it goes, and warms it
        waiting = asyncio.ensure_future(send(second, "second"))
        await asyncio.sleep(0.05)
        order.append("first began")
        first.began(True)
        await waiting
        await send(third, "third")  # warm now: no waiting
        return order

    assert asyncio.run(scenario()) == ["first sent", "first began", "second sent", "third sent"]
