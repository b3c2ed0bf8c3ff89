"""The batch wires' pure parts (SPEC 20): items cut by count and bytes within a vendor's
limits, an item too large alone refused, and result lines read under hostile input: unknown
ids, malformed lines, repeats and absent ids counted, never raising, never mis-mapped."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grove.providers.anthropic.batch import AnthropicBatchWire
from grove.providers.anthropic.batch import read_results as read_anthropic
from grove.providers.base import Message, Request
from grove.providers.batch_support import ResultTally, split_within
from grove.providers.batch_wire import BatchItem, BatchItemTooLarge, BatchLimits, BatchResults
from grove.providers.google.batch import GeminiBatchWire, ended_state, read_operation
from grove.providers.http import Endpoint
from grove.providers.openai.batch import read_lines as read_openai_lines
from grove.providers.openai.reply import responses_turn

IDS = [f"step-{n}" for n in range(6)]
LineKind = Literal["good", "broken", "unknown", "garbage", "no_id"]


def item(custom_id: str, text: str = "hello") -> BatchItem:
    request = Request(model="claude-sonnet-4-6", messages=(Message.user(text),), max_tokens=50)
    return BatchItem(custom_id=custom_id, request=request)


# --- cutting within limits ------------------------------------------------------------------


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=100), max_size=40),
    max_requests=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=110, max_value=400),
)
def test_split_keeps_order_and_every_batch_within_limits(
    sizes: list[int], max_requests: int, max_bytes: int
) -> None:
    items = [item(f"i{n}") for n in range(len(sizes))]
    limits = BatchLimits(max_requests=max_requests, max_bytes=max_bytes)
    batches = split_within("anthropic", items, sizes, limits, overhead=10)
    assert [i for batch in batches for i in batch] == items
    size_of = dict(zip((i.custom_id for i in items), sizes, strict=True))
    for batch in batches:
        assert 1 <= len(batch) <= max_requests
        assert sum(size_of[i.custom_id] for i in batch) + 10 <= max_bytes
    # A batch is only closed when the next item would not fit in it.
    for batch, following in pairwise(batches):
        fuller = sum(size_of[i.custom_id] for i in batch) + size_of[following[0].custom_id]
        assert len(batch) == max_requests or fuller + 10 > max_bytes


def test_an_item_larger_than_a_batch_alone_is_refused_by_name() -> None:
    items = [item("small"), item("huge"), item("other")]
    limits = BatchLimits(max_requests=10, max_bytes=1000)
    with pytest.raises(BatchItemTooLarge) as refused:
        split_within("anthropic", items, [10, 995, 10], limits, overhead=10)
    assert refused.value.custom_id == "huge"
    assert "'huge' takes 995 bytes, more than the 990" in str(refused.value)


def test_anthropic_split_measures_each_request_as_sent() -> None:
    wire = AnthropicBatchWire()
    small = [item(f"s{n}") for n in range(5)]
    entry_size = len(
        json.dumps(wire.request_entry(small[0], _any_endpoint()), separators=(",", ":"))
    )
    wire.limits = BatchLimits(max_requests=100, max_bytes=3 * (entry_size + 1) + 20)
    assert [len(batch) for batch in wire.split(small)] == [3, 2]
    wire.limits = BatchLimits(max_requests=2, max_bytes=10**6)
    assert [len(batch) for batch in wire.split(small)] == [2, 2, 1]
    wire.limits = BatchLimits(max_requests=100, max_bytes=entry_size + 20)
    with pytest.raises(BatchItemTooLarge, match="'big'"):
        wire.split([small[0], item("big", "x" * 500)])


def test_anthropic_custom_ids_the_api_refuses_are_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="1 to 64 letters"):
        AnthropicBatchWire().request_entry(item("has space"), _any_endpoint())


def _any_endpoint() -> Endpoint:
    return Endpoint(base_url="http://127.0.0.1:1", api_key="k")


# --- reading result lines -------------------------------------------------------------------


@dataclass(frozen=True)
class Vendor:
    """How one vendor's results are written (`encode`: lines of (custom id, kind)) and read."""

    good: Callable[[str], Any]  # a succeeded line whose answer is `answer(custom id)`
    broken: Callable[[str], Any]  # a line for the id whose result cannot be read
    no_id: Any  # a line without a custom id
    encode: Callable[[list[Any]], Any]
    read: Callable[[Any, list[str]], BatchResults]


def answer(custom_id: str) -> str:
    return f"The answer for {custom_id}."


def anthropic_message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }


def jsonl(lines: list[Any]) -> bytes:
    return b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )


ANTHROPIC = Vendor(
    good=lambda c: {
        "custom_id": c,
        "result": {"type": "succeeded", "message": anthropic_message(answer(c))},
    },
    broken=lambda c: {"custom_id": c, "result": {"type": "succeeded", "message": {"type": 3}}},
    no_id={"result": {"type": "expired"}},
    encode=jsonl,
    read=read_anthropic,
)


def responses_body(text: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-5-mini",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ],
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }


def read_openai(data: bytes, custom_ids: list[str]) -> BatchResults:
    tally = ResultTally(custom_ids)
    read_openai_lines(data, tally, responses_turn)
    return tally.results()


OPENAI = Vendor(
    good=lambda c: {
        "id": "batch_req_1",
        "custom_id": c,
        "response": {"status_code": 200, "request_id": "r", "body": responses_body(answer(c))},
        "error": None,
    },
    broken=lambda c: {
        "custom_id": c,
        "response": {"status_code": 200, "body": {"status": "completed", "output": 5}},
    },
    no_id={"response": None, "error": {"code": "batch_expired", "message": "late"}},
    encode=jsonl,
    read=read_openai,
)


def gemini_response(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7},
        "modelVersion": "gemini-3.0-flash",
        "responseId": "r1",
    }


def gemini_operation(inline: list[Any], state: str = "BATCH_STATE_SUCCEEDED") -> dict[str, Any]:
    """A batch's operation as GET batches/{id} gives it, its inline answers `inline` (a
    bytes entry stands for a value that is no answer object: its text)."""
    answers = [
        entry.decode("utf-8", "replace") if isinstance(entry, bytes) else entry for entry in inline
    ]
    output = {"inlinedResponses": {"inlinedResponses": answers}}
    return {"name": "batches/b1", "done": True, "metadata": {"state": state}, "response": output}


def read_gemini(operation: dict[str, Any], custom_ids: list[str]) -> BatchResults:
    state = ended_state(operation)
    assert state is not None
    return read_operation(operation, state, custom_ids)


GEMINI = Vendor(
    good=lambda c: {"response": gemini_response(answer(c)), "metadata": {"key": c}},
    broken=lambda c: {"response": {"candidates": "none"}, "metadata": {"key": c}},
    no_id={"response": gemini_response("anonymous")},
    encode=gemini_operation,
    read=read_gemini,
)
VENDORS = {"anthropic": ANTHROPIC, "openai": OPENAI, "google": GEMINI}


@pytest.mark.parametrize(
    ("state", "kind"),
    [("BATCH_STATE_EXPIRED", "expired"), ("JOB_STATE_CANCELLED", "canceled"),
     ("BATCH_STATE_FAILED", "errored")],
)  # fmt: skip
def test_a_gemini_batch_ended_whole_ends_its_unanswered_ids_so(state: str, kind: str) -> None:
    operation = gemini_operation([GEMINI.good("step-0")], state)
    operation["error"] = {"code": 3, "message": "the batch stopped", "status": "X"}
    results = read_gemini(operation, IDS[:3])
    assert results.outcomes["step-0"].kind == "succeeded"
    assert {results.outcomes[c].kind for c in IDS[1:3]} == {kind}
    assert "the batch stopped" in (results.outcomes["step-1"].error or "")
    assert results.missing_ids == ()


def test_gemini_split_keeps_each_batch_to_one_model() -> None:
    def on(model: str, custom_id: str) -> BatchItem:
        return BatchItem(
            custom_id=custom_id, request=Request(model=model, messages=(Message.user("hi"),))
        )

    items = [
        on("gemini-3.0-flash", "a"),
        on("gemini-2.5-flash-lite", "b"),
        on("gemini-3.0-flash", "c"),
    ]
    batches = GeminiBatchWire().split(items)
    assert [[i.custom_id for i in batch] for batch in batches] == [["a", "c"], ["b"]]


line_plans = st.lists(
    st.tuples(
        st.sampled_from(["good", "broken", "unknown", "garbage", "no_id"]),
        st.sampled_from(IDS),
        st.binary(max_size=30),
    ),
    max_size=20,
)


@pytest.mark.parametrize("vendor", sorted(VENDORS))
@settings(max_examples=150, deadline=None)
@given(plan=line_plans)
def test_hostile_result_lines_are_counted_never_mapped_to_another_step(
    vendor: str, plan: list[tuple[LineKind, str, bytes]]
) -> None:
    wire = VENDORS[vendor]
    lines: list[Any] = []
    answered: set[str] = set()
    unknown = malformed = 0
    for kind, custom_id, noise in plan:
        if kind == "good":
            lines.append(wire.good(custom_id))
            malformed += custom_id in answered
            answered.add(custom_id)
        elif kind == "broken":
            lines.append(wire.broken(custom_id))
            malformed += 1
        elif kind == "unknown":
            lines.append(wire.good(f"other-{custom_id}"))
            unknown += 1
        elif kind == "garbage":
            lines.append(b"#" + noise.replace(b"\n", b" ").replace(b"\r", b" "))
            malformed += 1
        else:
            lines.append(wire.no_id)
            malformed += 1
    results = wire.read(wire.encode(lines), IDS)
    assert sorted(results.outcomes) == sorted(answered)
    for custom_id, outcome in results.outcomes.items():
        assert outcome.custom_id == custom_id and outcome.kind == "succeeded"
        assert outcome.turn is not None and outcome.turn.text == answer(custom_id)
    assert (results.unknown_ids, results.malformed_lines) == (unknown, malformed)
    assert results.missing_ids == tuple(c for c in IDS if c not in answered)
