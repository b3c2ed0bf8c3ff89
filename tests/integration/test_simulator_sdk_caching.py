"""The vendors' SDKs as referees of the simulator's prompt caching: Anthropic's breakpoints and
usage fields (and its 400 past four breakpoints), OpenAI's `prompt_cache_key` and
`cached_tokens` on both APIs, Gemini's `cachedContents` create / get / update / delete and
`cached_content_token_count`, and entries that expire (`cache_ttl_scale`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread

KEY = "sim-sdk-caching-key-77c3"
SCALE = 0.01  # a five-minute entry lives 3 s
CONTEXT = " ".join(f"chapter-{n}" for n in range(2_000))  # about 5,000 tokens
EPHEMERAL: Any = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=3, cache_ttl_scale=SCALE)
    with SimulatorThread(config) as running:
        yield running


def claude_ask(client: anthropic.Anthropic, question: str, **fields: Any) -> Any:
    system: Any = [{"type": "text", "text": CONTEXT, "cache_control": EPHEMERAL}]
    with client.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=256,
        system=system,
        messages=[{"role": "user", "content": question}],
        **fields,
    ) as stream:
        return stream.get_final_message().usage


def test_anthropic_reports_writes_then_reads_then_expiry(simulator: SimulatorThread) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)
    first = claude_ask(client, "one")
    assert first.cache_creation_input_tokens > 4_000 and first.cache_read_input_tokens == 0
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    second = claude_ask(client, "two")
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0 and second.input_tokens < 20
    time.sleep(300 * SCALE + 0.5)
    expired = claude_ask(client, "three")
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens > 4_000


def test_anthropic_refuses_a_fifth_breakpoint(simulator: SimulatorThread) -> None:
    client = anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)
    content: Any = [
        {"type": "text", "text": f"part {n}", "cache_control": EPHEMERAL} for n in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            messages=[{"role": "user", "content": content}],
        )
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(raised.value)


def test_openai_reports_cached_tokens_in_128_token_steps(simulator: SimulatorThread) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)
    for _ in range(2):
        answer = client.responses.create(
            model="gpt-5-mini",
            instructions=CONTEXT,
            input="a question",
            prompt_cache_key="book-1",
        )
    assert answer.usage is not None
    cached = answer.usage.input_tokens_details.cached_tokens
    assert cached > 4_000 and cached % 128 == 0
    chat = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "system", "content": CONTEXT}, {"role": "user", "content": "q"}],
        prompt_cache_key="book-1",
    )
    chat = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "system", "content": CONTEXT}, {"role": "user", "content": "q2"}],
        prompt_cache_key="book-1",
    )
    assert chat.usage is not None and chat.usage.prompt_tokens_details is not None
    assert (chat.usage.prompt_tokens_details.cached_tokens or 0) > 4_000


def test_gemini_explicit_cache_lifecycle(simulator: SimulatorThread) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    entry = client.caches.create(
        model="gemini-3.0-flash",
        config=genai_types.CreateCachedContentConfig(
            contents=[genai_types.Content(role="user", parts=[genai_types.Part(text=CONTEXT)])],
            system_instruction="Answer from the book.",
            ttl="600s",
        ),
    )
    assert entry.name is not None and entry.name.startswith("cachedContents/")
    assert entry.usage_metadata is not None
    assert (entry.usage_metadata.total_token_count or 0) > 4_000
    fetched = client.caches.get(name=entry.name)
    assert fetched.expire_time is not None and fetched.model == "models/gemini-3.0-flash"
    updated = client.caches.update(
        name=entry.name, config=genai_types.UpdateCachedContentConfig(ttl="900s")
    )
    assert updated.expire_time is not None and updated.expire_time > fetched.expire_time
    answer = client.models.generate_content(
        model="gemini-3.0-flash",
        contents="Which chapter is first?",
        config=genai_types.GenerateContentConfig(cached_content=entry.name),
    )
    assert answer.usage_metadata is not None
    assert (
        answer.usage_metadata.cached_content_token_count == entry.usage_metadata.total_token_count
    )
    client.caches.delete(name=entry.name)
    with pytest.raises(genai_errors.ClientError):
        client.caches.get(name=entry.name)
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(
            model="gemini-3.0-flash",
            contents="again",
            config=genai_types.GenerateContentConfig(cached_content=entry.name),
        )
    assert "CachedContent not found" in str(raised.value)


def test_gemini_refuses_a_cache_below_the_models_minimum(simulator: SimulatorThread) -> None:
    client = genai.Client(
        api_key=KEY, http_options=genai_types.HttpOptions(base_url=simulator.base_url)
    )
    with pytest.raises(genai_errors.ClientError) as raised:
        client.caches.create(
            model="gemini-3.0-pro",
            config=genai_types.CreateCachedContentConfig(
                contents=[genai_types.Content(role="user", parts=[genai_types.Part(text="short")])]
            ),
        )
    assert "Cached content is too small" in str(raised.value)
