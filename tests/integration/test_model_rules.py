"""Every model of the catalog at every thinking level: the requests Grove's own providers build
(a question, a conversation that goes on, a typed answer with tools) are ones the simulator's
per-model rules, the vendors' own, accept, over real HTTP; a retired model answers 404.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grove.providers.base import Message, OutputSchema, Request, TextPart, ThinkingLevel, ToolSpec
from grove.providers.catalog import MODELS
from grove.providers.errors import ProviderHTTPError
from grove.providers.factory import OpenAIAPI, create_provider
from grove.providers.http import Endpoint, HTTPProvider
from grove.providers.retry import RetryPolicy
from grove.providers.stream_events import Finished, ProviderWarning, StreamEvent
from grove.providers.thinking import CANNOT_DISABLE_WARNING
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.model_rules import retired

KEY = "sim-model-rules-key-3e1d"
LEVELS: tuple[ThinkingLevel | None, ...] = (None, "none", "low", "med", "high")
NO_RETRY = RetryPolicy(max_attempts=1)
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a term up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
ANSWER = OutputSchema(
    name="answer",
    schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
# Outside Anthropic's structured-output subset: a Claude model takes it only as a final tool,
# forced where forced tool choice is taken.
PAIR = OutputSchema(
    name="pair",
    schema={
        "type": "object",
        "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
        },
        "required": ["pair"],
        "additionalProperties": False,
    },
)
WIRES: list[tuple[str, OpenAIAPI]] = [
    (model, api)
    for model, info in MODELS.items()
    for api in (("responses", "chat") if info.provider == "openai" else ("responses",))
]
LIVE = [(model, api) for model, api in WIRES if not retired(model)]
RETIRED = [(model, api) for model, api in WIRES if retired(model)]


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimulatorConfig(api_key=KEY, tokens=3)) as running:
        yield running


def provider(simulator: SimulatorThread, model: str, api: OpenAIAPI) -> HTTPProvider:
    return create_provider(
        MODELS[model].provider,
        endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY),
        openai_api=api,
        retry=NO_RETRY,
    )


def requests(model: str, level: ThinkingLevel | None) -> list[Request]:
    """A question; a conversation going on after a reply; a typed answer with a tool (and on
    Claude one only a final tool can give)."""
    reply = Message(role="assistant", parts=(TextPart(text="Paris, I think."),))
    question = (Message.user("Which city is the Louvre in?"),)
    final_tool = [Request(model=model, messages=question, thinking=level, output=PAIR)]
    return [
        Request(model=model, messages=(Message.user("Where is the Louvre?"),), thinking=level),
        Request(
            model=model,
            messages=(Message.user("Where is the Louvre?"), reply, Message.user("Sure?")),
            system="Be brief.",
            thinking=level,
        ),
        Request(model=model, messages=question, tools=(LOOKUP,), thinking=level, output=ANSWER),
        *(final_tool if MODELS[model].provider == "anthropic" else []),
    ]


async def stream(p: HTTPProvider, request: Request) -> list[StreamEvent]:
    return [event async for event in p.stream(request)]


@pytest.mark.parametrize("level", LEVELS, ids=str)
@pytest.mark.parametrize(("model", "api"), LIVE, ids=[f"{m}-{a}" for m, a in LIVE])
async def test_every_request_grove_builds_is_one_the_model_accepts(
    simulator: SimulatorThread, model: str, api: OpenAIAPI, level: ThinkingLevel | None
) -> None:
    p = provider(simulator, model, api)
    try:
        for request in requests(model, level):
            events = await stream(p, request)  # a refusal raises ProviderHTTPError
            assert isinstance(events[-1], Finished), events[-1]
            warnings = [e.text for e in events if isinstance(e, ProviderWarning)]
            assert set(warnings) <= {CANNOT_DISABLE_WARNING}
            assert (CANNOT_DISABLE_WARNING in warnings) is (
                level == "none" and not _can_stop_thinking(model)
            )
            body = simulator.simulator.received[-1]
            assert "temperature" not in body and "top_p" not in body and "top_k" not in body
    finally:
        await p.aclose()


def _can_stop_thinking(model: str) -> bool:
    """Whether the catalog lists a setting that stops the model thinking."""
    info = MODELS[model]
    return bool({"disabled", "none", "minimal", "off", "disable"} & set(info.thinking_accepts))


@pytest.mark.parametrize(("model", "api"), RETIRED, ids=[f"{m}-{a}" for m, a in RETIRED])
async def test_a_retired_model_answers_404(
    simulator: SimulatorThread, model: str, api: OpenAIAPI
) -> None:
    p = provider(simulator, model, api)
    try:
        with pytest.raises(ProviderHTTPError) as refused:
            await stream(p, requests(model, None)[0])
    finally:
        await p.aclose()
    assert refused.value.status == 404
    assert model in str(refused.value)
