"""Stored conversation entries <-> provider messages, and message parts <-> plain JSON data.

Knows nothing of the store: any object with `kind`, `content` and `data` is an entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from grove.providers.base import (
    CachePoint,
    ImageData,
    ImagePart,
    JSONObject,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

# Entry kinds a model sees as user text, with the line that introduces them.
USER_TEXT_KINDS = {
    "user": "",
    "advisor": "",
    "steering": "",
    "mail": "[mail from {sender}] ",
    "output_retry": "",  # a typed answer's problems, sent back (actors/output.py)
}
COMPACTION_TEXT = """The earlier conversation was compacted; this summary replaces it:

<summary>
{summary}
</summary>"""


class Entry(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...


def part_to_data(part: Part) -> JSONObject:
    match part:
        case TextPart(text=text):
            return {"kind": "text", "text": text}
        case ThinkingPart():
            thinking: JSONObject = {
                "kind": "thinking",
                "text": part.text,
                "signature": part.signature,
                "provider": part.provider,
                "provider_data": part.provider_data,
            }
            if part.prefix is not None:  # bound to its model and prefix
                thinking["model"], thinking["prefix"] = part.model, part.prefix
            return thinking
        case ToolCallPart():
            return {
                "kind": "tool_call",
                "call_id": part.call_id,
                "name": part.name,
                "arguments": part.arguments,
                "signature": part.signature,
            }
        case ToolResultPart():
            data: JSONObject = {
                "kind": "tool_result",
                "call_id": part.call_id,
                "name": part.name,
                "content": part.content,
                "is_error": part.is_error,
            }
            if part.images:
                data["images"] = [
                    {"media_type": image.media_type, "data": image.data} for image in part.images
                ]
            return data
        case ImagePart(image=image):
            return {"kind": "image", "media_type": image.media_type, "data": image.data}
        case CachePoint():
            raise ValueError("a cache point marks a request; it is never stored")


def part_from_data(data: JSONObject) -> Part:
    """The inverse of `part_to_data`; ValueError names what is wrong with bad data."""
    kind = data.get("kind")
    try:
        if kind == "text":
            return TextPart(text=str(data["text"]))
        if kind == "thinking":
            return ThinkingPart(
                text=str(data["text"]),
                signature=data.get("signature"),
                provider=data.get("provider"),
                provider_data=data.get("provider_data"),
                model=data.get("model"),
                prefix=data.get("prefix"),
            )
        if kind == "tool_call":
            arguments = data["arguments"]
            if not isinstance(arguments, dict):
                raise ValueError("tool call arguments must be an object")
            return ToolCallPart(
                call_id=str(data["call_id"]),
                name=str(data["name"]),
                arguments=arguments,
                signature=data.get("signature"),
            )
        if kind == "tool_result":
            return ToolResultPart(
                call_id=str(data["call_id"]),
                name=str(data["name"]),
                content=str(data["content"]),
                is_error=bool(data.get("is_error", False)),
                images=tuple(
                    ImageData(media_type=str(i["media_type"]), data=str(i["data"]))
                    for i in data.get("images", ())
                ),
            )
        if kind == "image":
            return ImagePart(
                image=ImageData(media_type=str(data["media_type"]), data=str(data["data"]))
            )
    except KeyError as exc:
        raise ValueError(f"message part of kind {kind!r} lacks {exc.args[0]!r}") from exc
    raise ValueError(f"unknown message part kind {kind!r}")


def parts_to_data(parts: Iterable[Part]) -> list[JSONObject]:
    return [part_to_data(part) for part in parts]


def parts_from_data(items: Sequence[JSONObject]) -> tuple[Part, ...]:
    return tuple(part_from_data(item) for item in items)


def entry_to_message(entry: Entry) -> Message | None:
    """The provider message for one stored entry; None for entries a model never sees."""
    if entry.kind == "assistant":
        return Message(role="assistant", parts=parts_from_data(entry.data.get("parts", [])))
    if entry.kind == "tool_result":
        return Message(role="user", parts=parts_from_data(entry.data.get("parts", [])))
    if entry.kind == "compaction":
        # snapcompact: the content is the frames' reading guide, the frames follow it.
        frames = tuple(
            ImagePart(image=ImageData(media_type="image/png", data=str(frame)))
            for frame in entry.data.get("frames", ())
        )
        text = TextPart(text=COMPACTION_TEXT.format(summary=entry.content))
        return Message(role="user", parts=(text, *frames))
    prefix = USER_TEXT_KINDS.get(entry.kind)
    if prefix is None:
        return None
    sender = entry.data.get("sender", "?")
    return Message.user(prefix.format(sender=sender) + entry.content)


def to_messages(entries: Iterable[Entry], *, fork_points: bool = False) -> list[Message]:
    """Provider messages for a conversation; consecutive same-role messages are merged.

    With `fork_points`, a `CachePoint` follows each run of one agent's entries that another
    agent's follow (where a child was forked: a stored conversation is its ancestors'
    prefixes, then its own messages), named after the run's last entry."""
    messages: list[Message] = []
    run: Entry | None = None  # the last entry that names its agent
    for entry in entries:
        owner = getattr(entry, "agent_uuid", None)
        ran = getattr(run, "agent_uuid", None)
        if fork_points and run is not None and owner is not None and owner != ran:
            add_part(messages, fork_point(run))
        if owner is not None:
            run = entry
        message = entry_to_message(entry)
        if message is None or not message.parts:
            continue
        if messages and messages[-1].role == message.role:
            previous = messages.pop()
            message = Message(role=message.role, parts=previous.parts + message.parts)
        messages.append(message)
    return messages


def fork_point(entry: Entry, cached_content: str | None = None) -> CachePoint:
    """The mark after a stored entry where a fork happened: named by its agent and id, the
    same for every child forked there."""
    return CachePoint(
        key=f"{getattr(entry, 'agent_uuid', '')}:{getattr(entry, 'id', '')}",
        cached_content=cached_content,
    )


def add_part(messages: list[Message], part: Part) -> None:
    """Put `part` at the end of the last message (nothing when there is none)."""
    if messages:
        last = messages[-1]
        messages[-1] = Message(role=last.role, parts=(*last.parts, part))


def join_messages(first: Sequence[Message], second: Sequence[Message]) -> list[Message]:
    """`first + second` as a new list, merging the seam when both sides have one role."""
    if first and second and first[-1].role == second[0].role:
        seam = Message(role=second[0].role, parts=first[-1].parts + second[0].parts)
        return [*first[:-1], seam, *second[1:]]
    return [*first, *second]
