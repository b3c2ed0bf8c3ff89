"""The simulator's provider caches: Anthropic's breakpoints (readable once the writing reply
began, a 20-block look-back, per-model minimums, lifetimes refreshed by reads, an hour's
writes apart) and OpenAI's and Gemini's prefixes (from 1,024 tokens, in 128-token steps).

Pure bookkeeping, driven with explicit times.
"""

from __future__ import annotations

from typing import Any

from grove.simulator.caching import (
    LOOKBACK_BLOCKS,
    STEP_TOKENS,
    Breakpoint,
    CacheBook,
    CacheUse,
    PromptPrefixes,
    block_points,
    route_of,
    step_points,
    strings,
    whole_digest,
)

SONNET = "claude-sonnet-4-5"  # 1,024-token minimum
HAIKU = "claude-haiku-4-5"  # 4,096


def blocks(count: int, chars: int = 400, tag: str = "") -> list[tuple[str, Any]]:
    return [("user", {"type": "text", "text": f"{tag}{n:04d}" + "x" * chars}) for n in range(count)]


def prompt(sequence: list[tuple[str, Any]], *marks: int, ttl: str = "5m") -> PromptPrefixes:
    return PromptPrefixes(
        points=block_points(sequence),
        breakpoints=tuple(Breakpoint(index=mark, ttl=ttl) for mark in marks),
    )


def test_an_entry_is_read_only_once_the_reply_that_wrote_it_began() -> None:
    book, shared = CacheBook(), blocks(12)
    first = book.bill("anthropic", SONNET, prompt(shared, 11), now=0.0, ready_at=1.0)
    assert first.read == 0 and first.written == first.written == prompt(shared).points[11][0]
    early = book.bill("anthropic", SONNET, prompt(shared, 11), now=0.5, ready_at=1.5)
    assert early.read == 0 and early.written > 0  # sent together: both write
    late = book.bill("anthropic", SONNET, prompt(shared, 11), now=1.0, ready_at=2.0)
    assert late == CacheUse(read=first.written)


def test_the_look_back_reaches_twenty_blocks_before_a_breakpoint() -> None:
    book = CacheBook()
    base = blocks(12)
    book.bill("anthropic", SONNET, prompt(base, 11), now=0.0, ready_at=0.0)
    within = base + blocks(LOOKBACK_BLOCKS - 1, 10, "w")
    tokens = prompt(base).points[11][0]
    assert book.bill("anthropic", SONNET, prompt(within, len(within) - 1), 1.0, 1.0).read == tokens
    beyond = base + blocks(LOOKBACK_BLOCKS, 10, "b")
    assert book.bill("anthropic", SONNET, prompt(beyond, len(beyond) - 1), 2.0, 2.0).read == 0


def test_nothing_is_cached_below_the_models_minimum() -> None:
    book, shared = CacheBook(), blocks(30)  # about 3,000 tokens
    for model in (SONNET, HAIKU):
        book.bill("anthropic", model, prompt(shared, 29), 0.0, 0.0)
    assert book.bill("anthropic", SONNET, prompt(shared, 29), 1.0, 1.0).read > 0
    assert book.bill("anthropic", HAIKU, prompt(shared, 29), 1.0, 1.0) == CacheUse()


def test_entries_expire_after_their_lifetime_unless_read() -> None:
    book, shared = CacheBook(ttl_scale=0.01), blocks(12)  # 5 min: 3 s; 1 h: 36 s
    book.bill("anthropic", SONNET, prompt(shared, 11), 0.0, 0.0)
    assert book.bill("anthropic", SONNET, prompt(shared, 11), 2.9, 2.9).read > 0
    assert book.bill("anthropic", SONNET, prompt(shared, 11), 5.8, 5.8).read > 0  # refreshed
    assert book.bill("anthropic", SONNET, prompt(shared, 11), 9.0, 9.0).read == 0  # expired
    hour = book.bill("anthropic", SONNET, prompt(blocks(12, tag="h"), 11, ttl="1h"), 0.0, 0.0)
    assert hour.written == hour.written_1h > 0


def steps(text: str, key: str | None = None) -> PromptPrefixes:
    parts = [{"role": "user", "content": text}]
    points = step_points(strings(parts))
    return PromptPrefixes(points=points, route=route_of(key, points, whole_digest(parts)))


def test_openai_caches_prefixes_in_128_token_steps_from_1024() -> None:
    book = CacheBook()
    context = "y" * 4 * 5_000
    book.bill("openai-responses", "gpt-5-mini", steps(context + "first task"), 0.0, 0.0)
    use = book.bill("openai-responses", "gpt-5-mini", steps(context + "other task"), 1.0, 1.0)
    assert use.read % STEP_TOKENS == 0 and 4_864 <= use.read <= 5_000
    short = "z" * 4 * 900
    book.bill("openai-responses", "gpt-5-mini", steps(short + "a"), 0.0, 0.0)
    assert book.bill("openai-responses", "gpt-5-mini", steps(short + "b"), 1.0, 1.0).read == 0


def test_past_fifteen_requests_a_minute_on_one_route_some_land_cold() -> None:
    book = CacheBook()
    context = "q" * 4 * 3_000
    book.bill("openai-responses", "gpt-5-mini", steps(context, "k"), 0.0, 0.0)
    reads = [
        book.bill("openai-responses", "gpt-5-mini", steps(context + str(n), "k"), 1.0, 1.0).read
        for n in range(40)
    ]
    assert all(reads[:14]) and reads.count(0) > 0  # the overflow goes to other machines
    other = [
        book.bill(
            "openai-responses", "gpt-5-mini", steps(context + str(n), f"k{n // 14}"), 2.0, 2.0
        ).read
        for n in range(28)
    ]
    assert other.count(0) <= 2  # one miss per fresh key at most, nothing overflows
