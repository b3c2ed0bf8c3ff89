"""A scripted fan-out over real HTTP on every wire, streamed and not: three `fork` calls in one
reply, then `wait` once their results are back, then a text answer once that result is back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
import pytest

from grove.providers.sse import ServerSentEvent, SSEDecoder
from grove.simulator import Simulator, SimulatorConfig
from grove.simulator.script import generated_words

KEY = "sim-steps-test-key-3b8e"
TOKENS = 7
FAN_OUT = (
    """[[sim calls='[{"name":"fork","args":{"prompt":"a"}},{"name":"fork","args":{"prompt":"b"}},"""
    """{"name":"fork","args":{"prompt":"c"}}]']] [[sim step=2 tool=wait args='{"timeout":5}']]"""
)
SCRIPT = f"Split this three ways. {FAN_OUT}"
FORKS = [("fork", {"prompt": prompt}) for prompt in "abc"]
WAIT = [("wait", {"timeout": 5})]
FORK_RESULTS = ["child a: done", "child b: done", "child c: done"]
WAIT_RESULTS = ["all three finished"]


@dataclass
class Call:
    call_id: str | None
    name: str
    args: dict[str, Any]


@dataclass
class Answer:
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None

    @property
    def named(self) -> list[tuple[str, dict[str, Any]]]:
        return [(call.name, call.args) for call in self.calls]


class Anthropic:
    name = "anthropic"
    headers: ClassVar[dict[str, str]] = {"x-api-key": KEY}
    history = "messages"
    id_prefix: str | None = "toolu_01"
    finishes = ("tool_use", "end_turn")

    def path(self, stream: bool) -> str:
        return "/v1/messages"

    def start(self, text: str, stream: bool) -> dict[str, Any]:
        return {
            "model": "claude-x",
            "max_tokens": 1024,
            "stream": stream,
            "tools": [{"name": name, "input_schema": {"type": "object"}} for name in TOOLS],
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        }

    def streamed(self, events: list[ServerSentEvent]) -> Answer:
        blocks: dict[int, dict[str, Any]] = {}
        answer = Answer()
        for event in events:
            payload = json.loads(event.data)
            if payload["type"] == "content_block_start":
                blocks[payload["index"]] = {**payload["content_block"], "json": ""}
            elif payload["type"] == "content_block_delta":
                block, delta = blocks[payload["index"]], payload["delta"]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                elif delta["type"] == "input_json_delta":
                    block["json"] += delta["partial_json"]
            elif payload["type"] == "message_delta":
                answer.finish = payload["delta"]["stop_reason"]
        for _, block in sorted(blocks.items()):
            if block["type"] == "text":
                answer.text += block["text"]
            elif block["type"] == "tool_use":
                answer.calls.append(Call(block["id"], block["name"], json.loads(block["json"])))
        return answer

    def whole(self, body: dict[str, Any]) -> Answer:
        return Answer(
            text="".join(block["text"] for block in body["content"] if block["type"] == "text"),
            calls=[
                Call(block["id"], block["name"], block["input"])
                for block in body["content"]
                if block["type"] == "tool_use"
            ],
            finish=body["stop_reason"],
        )

    def extend(self, body: dict[str, Any], answer: Answer, results: list[str]) -> dict[str, Any]:
        said = [{"type": "text", "text": answer.text}] if answer.text else []
        uses = [
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.args}
            for call in answer.calls
        ]
        outcome = [
            {"type": "tool_result", "tool_use_id": call.call_id, "content": result}
            for call, result in zip(answer.calls, results, strict=True)
        ]
        messages = [
            *body["messages"],
            {"role": "assistant", "content": said + uses},
            {"role": "user", "content": outcome},
        ]
        return {**body, "messages": messages}

    def results_prompt(self, results: list[str]) -> str:
        return "\n".join(results)


class Responses:
    name = "responses"
    headers: ClassVar[dict[str, str]] = {"authorization": f"Bearer {KEY}"}
    history = "input"
    id_prefix: str | None = "call_"
    finishes = ("completed", "completed")

    def path(self, stream: bool) -> str:
        return "/v1/responses"

    def start(self, text: str, stream: bool) -> dict[str, Any]:
        return {
            "model": "gpt-x",
            "stream": stream,
            "tools": [{"type": "function", "name": name, "parameters": {}} for name in TOOLS],
            "input": [{"role": "user", "content": text}],
        }

    def streamed(self, events: list[ServerSentEvent]) -> Answer:
        items: dict[int, dict[str, Any]] = {}
        answer = Answer()
        for event in events:
            payload = json.loads(event.data)
            kind = payload["type"]
            if kind == "response.output_item.added":
                items[payload["output_index"]] = {**payload["item"], "arguments": ""}
            elif kind == "response.function_call_arguments.delta":
                items[payload["output_index"]]["arguments"] += payload["delta"]
            elif kind == "response.output_text.delta":
                answer.text += payload["delta"]
            elif kind == "response.completed":
                final = self.whole(payload["response"])
        calls = [item for _, item in sorted(items.items()) if item["type"] == "function_call"]
        answer.calls = [
            Call(item["call_id"], item["name"], json.loads(item["arguments"])) for item in calls
        ]
        answer.finish = final.finish
        assert (final.text, final.calls) == (answer.text, answer.calls)
        return answer

    def whole(self, body: dict[str, Any]) -> Answer:
        output = body["output"]
        return Answer(
            text="".join(
                part["text"]
                for item in output
                if item["type"] == "message"
                for part in item["content"]
            ),
            calls=[
                Call(item["call_id"], item["name"], json.loads(item["arguments"]))
                for item in output
                if item["type"] == "function_call"
            ],
            finish=body["status"],
        )

    def extend(self, body: dict[str, Any], answer: Answer, results: list[str]) -> dict[str, Any]:
        said = [{"role": "assistant", "content": answer.text}] if answer.text else []
        calls = [
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(call.args),
            }
            for call in answer.calls
        ]
        outputs = [
            {"type": "function_call_output", "call_id": call.call_id, "output": result}
            for call, result in zip(answer.calls, results, strict=True)
        ]
        return {**body, "input": [*body["input"], *said, *calls, *outputs]}

    def results_prompt(self, results: list[str]) -> str:
        return "\n".join(results)


class Chat:
    name = "chat"
    headers: ClassVar[dict[str, str]] = {"authorization": f"Bearer {KEY}"}
    history = "messages"
    id_prefix: str | None = "call_"
    finishes = ("tool_calls", "stop")

    def path(self, stream: bool) -> str:
        return "/v1/chat/completions"

    def start(self, text: str, stream: bool) -> dict[str, Any]:
        return {
            "model": "gpt-x",
            "stream": stream,
            "tools": [{"type": "function", "function": {"name": name}} for name in TOOLS],
            "messages": [{"role": "user", "content": text}],
        }

    def streamed(self, events: list[ServerSentEvent]) -> Answer:
        assert events[-1].data == "[DONE]"
        calls: dict[int, dict[str, Any]] = {}
        answer = Answer()
        for event in events[:-1]:
            choice = json.loads(event.data)["choices"][0]
            delta = choice["delta"]
            answer.text += delta.get("content") or ""
            for piece in delta.get("tool_calls", []):
                call = calls.setdefault(piece["index"], {"arguments": ""})
                if "id" in piece:
                    call.update(id=piece["id"], name=piece["function"]["name"])
                call["arguments"] += piece["function"]["arguments"]
            answer.finish = choice["finish_reason"] or answer.finish
        answer.calls = [
            Call(call["id"], call["name"], json.loads(call["arguments"]))
            for _, call in sorted(calls.items())
        ]
        return answer

    def whole(self, body: dict[str, Any]) -> Answer:
        choice = body["choices"][0]
        message = choice["message"]
        return Answer(
            text=message["content"] or "",
            calls=[
                Call(
                    call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])
                )
                for call in message.get("tool_calls", [])
            ],
            finish=choice["finish_reason"],
        )

    def extend(self, body: dict[str, Any], answer: Answer, results: list[str]) -> dict[str, Any]:
        assistant = {
            "role": "assistant",
            "content": answer.text or None,
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.args)},
                }
                for call in answer.calls
            ],
        }
        tools = [
            {"role": "tool", "tool_call_id": call.call_id, "content": result}
            for call, result in zip(answer.calls, results, strict=True)
        ]
        return {**body, "messages": [*body["messages"], assistant, *tools]}

    def results_prompt(self, results: list[str]) -> str:
        return "\n".join(results)


class Gemini:
    name = "google"
    headers: ClassVar[dict[str, str]] = {"x-goog-api-key": KEY}
    history = "contents"
    id_prefix: str | None = None  # the Gemini Developer API sends function calls without ids
    finishes = ("STOP", "STOP")

    def path(self, stream: bool) -> str:
        if stream:
            return "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
        return "/v1beta/models/gemini-x:generateContent"

    def start(self, text: str, stream: bool) -> dict[str, Any]:
        return {
            "tools": [{"functionDeclarations": [{"name": name} for name in TOOLS]}],
            "contents": [{"role": "user", "parts": [{"text": text}]}],
        }

    def streamed(self, events: list[ServerSentEvent]) -> Answer:
        answer = Answer()
        for event in events:
            self._add(answer, json.loads(event.data))
        return answer

    def whole(self, body: dict[str, Any]) -> Answer:
        answer = Answer()
        self._add(answer, body)
        return answer

    def _add(self, answer: Answer, chunk: dict[str, Any]) -> None:
        candidate = chunk["candidates"][0]
        for part in candidate["content"]["parts"]:
            if "functionCall" in part:
                call = part["functionCall"]
                answer.calls.append(Call(call.get("id"), call["name"], call["args"]))
            elif not part.get("thought"):
                answer.text += part.get("text", "")
        answer.finish = candidate.get("finishReason", answer.finish)

    def extend(self, body: dict[str, Any], answer: Answer, results: list[str]) -> dict[str, Any]:
        said = [{"text": answer.text}] if answer.text else []
        model = {
            "role": "model",
            "parts": said
            + [{"functionCall": {"name": call.name, "args": call.args}} for call in answer.calls],
        }
        user = {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": call.name, "response": {"output": result}}}
                for call, result in zip(answer.calls, results, strict=True)
            ],
        }
        return {**body, "contents": [*body["contents"], model, user]}

    def results_prompt(self, results: list[str]) -> str:
        return "\n".join(json.dumps({"output": result}) for result in results)


TOOLS = ("fork", "wait")
Wire = Anthropic | Responses | Chat | Gemini
WIRES: list[Wire] = [Anthropic(), Responses(), Chat(), Gemini()]
WIRE_IDS = [wire.name for wire in WIRES]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with (
        Simulator(SimulatorConfig(api_key=KEY, tokens=TOKENS)) as simulator,
        httpx.AsyncClient(base_url=simulator.base_url, timeout=10) as http,
    ):
        yield http


async def ask(client: httpx.AsyncClient, wire: Wire, body: dict[str, Any], stream: bool) -> Answer:
    path = wire.path(stream)
    if not stream:
        response = await client.post(path, headers=wire.headers, json=body)
        assert response.status_code == 200, response.text
        return wire.whole(response.json())
    async with client.stream("POST", path, headers=wire.headers, json=body) as response:
        if response.status_code != 200:
            pytest.fail(f"{response.status_code}: {(await response.aread()).decode()}")
        decoder = SSEDecoder()
        events = [
            event async for chunk in response.aiter_bytes() for event in decoder.decode(chunk)
        ]
    return wire.streamed(events + decoder.flush())


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_fan_out_then_wait_then_answer(
    client: httpx.AsyncClient, wire: Wire, stream: bool
) -> None:
    tool_finish, text_finish = wire.finishes
    body = wire.start(SCRIPT, stream)
    forks = await ask(client, wire, body, stream)
    assert forks.named == FORKS
    assert forks.text == "" and forks.finish == tool_finish
    ids = [call.call_id for call in forks.calls]
    if wire.id_prefix is None:
        assert ids == [None, None, None]
    else:
        assert len(set(ids)) == 3
        assert all(call_id and call_id.startswith(wire.id_prefix) for call_id in ids)

    body = wire.extend(body, forks, FORK_RESULTS)
    wait = await ask(client, wire, body, stream)
    assert wait.named == WAIT
    assert wait.text == "" and wait.finish == tool_finish

    body = wire.extend(body, wait, WAIT_RESULTS)
    answer = await ask(client, wire, body, stream)
    assert answer.calls == [] and answer.finish == text_finish
    assert answer.text == "".join(generated_words(wire.results_prompt(WAIT_RESULTS), TOKENS))


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_step_one_replies_again_when_the_conversation_restarts(
    client: httpx.AsyncClient, wire: Wire
) -> None:
    """A new user text is a new script: the fan-out in it starts again at step 1, and an
    earlier script's step-2 directive no longer applies."""
    body = wire.start("[[sim step=2 reply=never]] first", True)
    first = await ask(client, wire, body, True)
    assert first.calls == [] and first.text == "".join(generated_words("first", TOKENS))
    body = wire.extend(body, Answer(calls=[Call("call_x", "wait", {})]), ["done"])
    restarted = wire.start(SCRIPT, True)[wire.history]
    body = {**body, wire.history: [*body[wire.history], *restarted]}
    again = await ask(client, wire, body, True)
    assert again.named == FORKS


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_call_to_a_tool_not_offered_is_refused(
    client: httpx.AsyncClient, wire: Wire
) -> None:
    body = wire.start("""[[sim calls='[{"name":"fork"},{"name":"spawn"}]']]""", False)
    response = await client.post(wire.path(False), headers=wire.headers, json=body)
    assert response.status_code == 400
    assert "asks for tool 'spawn', which this request does not offer (offered: fork, wait)" in (
        response.text
    )
