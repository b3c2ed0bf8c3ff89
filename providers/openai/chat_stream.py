"""Chat Completions stream chunks translated into Grove stream events, one attempt at a time.

Request bodies live in chat.py. Only choice 0 is read; other choices (n > 1) are ignored.
"""

from __future__ import annotations

from grove.providers.base import JSONObject, Usage
from grove.providers.errors import ProviderProtocolError
from grove.providers.openai import PROVIDER
from grove.providers.openai.errors import stream_error
from grove.providers.openai.wire import event_json
from grove.providers.sse import ServerSentEvent
from grove.providers.stream_events import (
    Completed,
    ResponseInfo,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
    UsageUpdate,
)
from grove.providers.wirejson import json_int, json_object, json_str

# Grove part indexes: the reasoning first, then the text, then each tool call in wire order.
THINKING_INDEX = 0
TEXT_INDEX = 1
FIRST_TOOL_INDEX = 2


class ChatParser:
    """One attempt's parser. `finish_reason` and `[DONE]` are both terminal signals: some
    compatible servers send no `[DONE]`, and the usage chunk comes after finish_reason.
    Refusals (structured-output only, never requested by Grove) are skipped."""

    def __init__(self) -> None:
        self._info_sent = False
        self._call_ids: dict[int, str] = {}  # wire position -> call id, for started calls
        self._latest_call = 0

    def feed(self, sse: ServerSentEvent) -> list[StreamEvent]:
        if sse.data.strip() == "[DONE]":
            return [Completed()]
        return self.feed_json(event_json(sse))

    def feed_json(self, chunk: JSONObject) -> list[StreamEvent]:
        """One chunk already read as JSON (chat_reply.py reads a whole batch reply so)."""
        error = chunk.get("error")
        if error is not None:
            raise stream_error(error if isinstance(error, dict) else {"message": str(error)})
        events: list[StreamEvent] = []
        if not self._info_sent:
            self._info_sent = True
            events.append(
                ResponseInfo(response_id=json_str(chunk, "id"), model=json_str(chunk, "model"))
            )
        choice = _first_choice(chunk)
        if choice is not None:
            events.extend(self._delta(json_object(choice, "delta")))
        native = chunk.get("usage")
        if isinstance(native, dict):
            events.append(UsageUpdate(usage=read_usage(native), native=native))
        finish_reason = None if choice is None else json_str(choice, "finish_reason")
        if finish_reason:
            events.extend((StopReason(reason=finish_reason), Completed()))
        return events

    def finish(self) -> list[StreamEvent]:
        return []

    def _delta(self, delta: JSONObject) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        # vLLM and DeepSeek say `reasoning_content`; OpenRouter and Ollama say `reasoning`.
        thinking = json_str(delta, "reasoning_content") or json_str(delta, "reasoning")
        if thinking:
            events.append(ThinkingDelta(index=THINKING_INDEX, text=thinking))
        text = json_str(delta, "content")
        if text:
            events.append(TextDelta(index=TEXT_INDEX, text=text))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    events.extend(self._tool_call(call))
        return events

    def _tool_call(self, call: JSONObject) -> list[StreamEvent]:
        position = self._position(call)
        self._latest_call = position
        index = FIRST_TOOL_INDEX + position
        function = json_object(call, "function")
        events: list[StreamEvent] = []
        if position not in self._call_ids:
            name = json_str(function, "name")
            if not name:
                raise ProviderProtocolError(
                    f"OpenAI chat tool call {position} starts without a function name",
                    provider=PROVIDER,
                )
            call_id = json_str(call, "id") or f"call_{position}"
            self._call_ids[position] = call_id
            signature = thought_signature(call)
            events.append(
                ToolCallStart(index=index, call_id=call_id, name=name, signature=signature)
            )
        arguments = json_str(function, "arguments")
        if arguments:
            events.append(ToolCallArgumentsDelta(index=index, delta=arguments))
        return events

    def _position(self, call: JSONObject) -> int:
        """The call's wire `index`. Gemini's compatible endpoint omits it: there a new id opens
        the next call, and a fragment without one continues the latest."""
        index = call.get("index")
        if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            return index
        call_id = json_str(call, "id")
        if not call_id:
            return self._latest_call
        for position, known in self._call_ids.items():
            if known == call_id:
                return position
        return max(self._call_ids, default=-1) + 1


def _first_choice(chunk: JSONObject) -> JSONObject | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def read_usage(native: JSONObject) -> Usage:
    """Grove's reading of a Chat `usage`; reasoning and cached tokens are already included in
    completion_tokens and prompt_tokens, as OpenAI counts them."""
    prompt_details = json_object(native, "prompt_tokens_details")
    completion_details = json_object(native, "completion_tokens_details")
    return Usage(
        input_tokens=json_int(native, "prompt_tokens"),
        output_tokens=json_int(native, "completion_tokens"),
        thinking_tokens=json_int(completion_details, "reasoning_tokens"),
        cache_read_tokens=json_int(prompt_details, "cached_tokens"),
        cache_write_tokens=json_int(prompt_details, "cache_write_tokens"),
    )


def thought_signature(call: JSONObject) -> str | None:
    """The thought signature Gemini's compatible endpoint attaches to a function call
    (`extra_content.google.thought_signature`); it must go back with the call."""
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None
