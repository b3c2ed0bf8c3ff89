"""`[[sim KEY=VALUE ...]]` directives: parsing, validation and stripping from message text.

Pure text handling: what a directive does to a reply is script.py's business.

Grammar: `[[sim` or `[[sim@reviewer`, then whitespace-separated `KEY=VALUE` pairs, then `]]`.
A VALUE is a bare word (no whitespace, no quote, not containing `]]`) or a string in single or
double quotes, where a backslash before that quote character stands for the quote itself
(every other backslash is kept as written, so a quoted value cannot end in a backslash).
`[[sim` directly followed by anything else (`[[simple]]`) is ordinary text.

Keys: `reply` (the answer text), `thinking` (the thinking text, streamed only when the request
asks for thinking), `tokens` (default reply length), `headers_ms` (delay before the response
head), `ttft_ms`, `tps`, `fault` (429|500|503|529|error_after_200|disconnect), `retry_after`
(seconds, with a status fault), `after` (content events before a disconnect), `times` (only the
first N requests carrying this exact directive text fail), `tool` and `args` (a JSON object: call
that tool instead of answering in text), `calls` (a JSON array of `{"name": ..., "args": {...}}`
objects, `args` optional: make all these calls in one reply; not with `tool` or `args`), `step`
(1 or more: the directive applies only to that reply, see below), `model` (a model id: the
directive applies only to requests for that model, e.g. one of several reviewers), `stop`
(`length`: the reply ends as one cut off by its output limit, with each wire's own reason),
`invalid_output` (N: the first N answers to a structured request, counted from the message
that carries it, are malformed JSON; each user message after it, text or tool results, counts
one answer, as an answer sent back with its problems is followed by one).

Which directives count (script.py applies this): the script is the last user message that
carries text; the reply to it is step 1, and each tool-result round trip after it adds one. At
step 1 the script's directives without `step` or with `step=1` count; at a later step N those
with `step=N`. When none does, those without `step` in the last user message count: in its tool
results' text (a file a tool read), or in the script itself when no results follow it. Among
those that count, the last wins. A plain `[[sim ...]]` is for requests without the `advise`
tool, `[[sim@reviewer ...]]` for those with it.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from grove.providers import wirejson
from grove.providers.errors import GroveError

Audience = Literal["agent", "reviewer"]
FaultKind = Literal["429", "500", "503", "529", "error_after_200", "disconnect"]
STATUS_FAULTS: frozenset[str] = frozenset({"429", "500", "503", "529"})
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

KEYS = (
    "reply",
    "thinking",
    "tokens",
    "headers_ms",
    "ttft_ms",
    "tps",
    "fault",
    "retry_after",
    "after",
    "times",
    "tool",
    "args",
    "calls",
    "step",
    "model",
    "stop",
    "invalid_output",
)
MAX_TOKENS = 100_000
MAX_STEP = 10_000
MAX_MILLISECONDS = 600_000
MAX_RETRY_AFTER_S = 3_600

_OPEN = "[[sim"
_CLOSE = "]]"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AUDIENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHOLE = re.compile(r"[0-9]{1,9}")
_NUMBER = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_TOOL_NAME_RULE = "a tool name (letters, digits, _ . : -)"
_CALL_KEYS = ("name", "args")


class DirectiveError(GroveError):
    """A malformed or inconsistent `[[sim ...]]` directive; the text says what and where."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """One tool call a directive asks for."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Directive:
    """One directive. `source` is its exact text: the key that `times=N` counts by."""

    source: str
    audience: Audience
    reply: str | None = None
    thinking: str | None = None
    tokens: int | None = None
    headers_ms: float | None = None
    ttft_ms: float | None = None
    tps: float | None = None
    fault: FaultKind | None = None
    retry_after: float | None = None
    after: int | None = None
    times: int | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    calls: tuple[ScriptedCall, ...] | None = None
    step: int | None = None
    model: str | None = None  # only requests for this model id (several reviewers at once)
    stop: Literal["length"] | None = None  # end the reply as cut off by the output limit
    invalid_output: int | None = None  # the first N structured answers are malformed

    @property
    def scripted_calls(self) -> tuple[ScriptedCall, ...]:
        """Every tool call this directive asks for, in order: `calls`, or `tool` with `args`."""
        if self.calls is not None:
            return self.calls
        if self.tool is not None:
            return (ScriptedCall(name=self.tool, args=self.args or {}),)
        return ()


@dataclass(frozen=True, kw_only=True, slots=True)
class DirectedText:
    """A message's text with every directive cut out, and the directives in order."""

    text: str
    directives: tuple[Directive, ...]

    def last(
        self, audience: Audience, steps: Container[int | None], model: str | None = None
    ) -> Directive | None:
        """The last directive meant for `audience` whose `step` (None when it has no `step`
        key) is in `steps` and whose `model`, if it names one, is `model`; a quoted
        transcript may hold several."""
        for directive in reversed(self.directives):
            if (
                directive.audience == audience
                and directive.step in steps
                and directive.model in (None, model)
            ):
                return directive
        return None


def parse_directives(text: str) -> DirectedText:
    """Find, validate and strip every directive; raises `DirectiveError` on a malformed one."""
    kept: list[str] = []
    found: list[Directive] = []
    position = 0
    while True:
        start = text.find(_OPEN, position)
        if start < 0:
            kept.append(text[position:])
            break
        opened = _opening(text, start)
        if opened is None:
            kept.append(text[position : start + len(_OPEN)])
            position = start + len(_OPEN)
            continue
        audience, cursor = opened
        fields, end = _fields(text, start, cursor)
        kept.append(text[position:start])
        found.append(_directive(text[start:end], audience, fields))
        position = end
    return DirectedText(text="".join(kept), directives=tuple(found))


def _opening(text: str, start: int) -> tuple[Audience, int] | None:
    """The audience and where the pairs begin, or None when `[[sim` starts plain text."""
    cursor = start + len(_OPEN)
    audience: Audience = "agent"
    if text.startswith("@", cursor):
        match = _AUDIENCE.match(text, cursor + 1)
        name = match.group() if match else ""
        if name != "reviewer":
            raise DirectiveError(
                f"unknown directive audience '@{name}' at offset {start}: "
                "only [[sim@reviewer ...]] exists"
            )
        audience = "reviewer"
        cursor = match.end() if match else cursor
    if cursor < len(text) and not text[cursor].isspace() and not text.startswith(_CLOSE, cursor):
        if audience == "reviewer":
            raise DirectiveError(
                f"[[sim@reviewer at offset {start} must be followed by a space or ']]'"
            )
        return None
    return audience, cursor


def _fields(text: str, start: int, cursor: int) -> tuple[dict[str, str], int]:
    """The KEY=VALUE pairs of the directive opened at `start`, and the offset after `]]`."""
    fields: dict[str, str] = {}
    while True:
        while cursor < len(text) and text[cursor].isspace():
            cursor += 1
        if cursor >= len(text):
            raise DirectiveError(f"directive at offset {start} is never closed with ']]'")
        if text.startswith(_CLOSE, cursor):
            return fields, cursor + len(_CLOSE)
        match = _KEY.match(text, cursor)
        if match is None or not text.startswith("=", match.end()):
            found = text[cursor : cursor + 20]
            raise DirectiveError(
                f"expected KEY=VALUE in the directive at offset {start}, found {found!r}"
            )
        key = match.group()
        if key not in KEYS:
            raise DirectiveError(
                f"unknown directive key '{key}' at offset {cursor}; known keys: {', '.join(KEYS)}"
            )
        if key in fields:
            raise DirectiveError(f"directive key '{key}' given twice at offset {cursor}")
        value, cursor = _value(text, key, match.end() + 1)
        fields[key] = value


def _value(text: str, key: str, cursor: int) -> tuple[str, int]:
    quote = text[cursor : cursor + 1]
    if quote in ("'", '"'):
        chars: list[str] = []
        index = cursor + 1
        while index < len(text):
            char = text[index]
            if char == "\\" and text.startswith(quote, index + 1):
                chars.append(quote)
                index += 2
                continue
            if char == quote:
                end = index + 1
                if end < len(text) and not text[end].isspace() and not text.startswith(_CLOSE, end):
                    raise DirectiveError(
                        f"the quoted value of '{key}' must be followed by a space or ']]' "
                        f"(offset {end})"
                    )
                return "".join(chars), end
            chars.append(char)
            index += 1
        raise DirectiveError(f"the value of '{key}' at offset {cursor} has no closing {quote}")
    end = cursor
    while end < len(text) and not text[end].isspace() and not text.startswith(_CLOSE, end):
        if text[end] in ("'", '"'):
            raise DirectiveError(
                f"the value of '{key}' at offset {cursor} has a quote inside a bare word; "
                "quote the whole value"
            )
        end += 1
    if end == cursor:
        raise DirectiveError(f"directive key '{key}' at offset {cursor} has no value")
    return text[cursor:end], end


def _directive(source: str, audience: Audience, fields: dict[str, str]) -> Directive:
    fault = fields.get("fault")
    if fault is not None and fault not in FAULT_KINDS:
        raise DirectiveError(f"fault must be one of {', '.join(FAULT_KINDS)}; got {fault!r}")
    retry_after = _number(fields, "retry_after", MAX_RETRY_AFTER_S)
    after = _whole(fields, "after", MAX_TOKENS)
    times = _whole(fields, "times", MAX_TOKENS)
    if retry_after is not None and fault not in STATUS_FAULTS:
        raise DirectiveError("retry_after needs fault=429, 500, 503 or 529")
    if after is not None and fault != "disconnect":
        raise DirectiveError("after needs fault=disconnect")
    if times is not None and fault is None:
        raise DirectiveError("times needs a fault")
    if times == 0:
        raise DirectiveError("times must be 1 or more")
    tool = fields.get("tool")
    if tool is not None and not _TOOL_NAME.fullmatch(tool):
        raise DirectiveError(f"tool must be {_TOOL_NAME_RULE}; got {tool!r}")
    args = _arguments(fields.get("args"), tool)
    calls = _calls(fields.get("calls"))
    if calls is not None and (tool is not None or args is not None):
        raise DirectiveError("calls cannot be combined with tool or args in one directive")
    step = _whole(fields, "step", MAX_STEP, minimum=1)
    stop = fields.get("stop")
    if stop is not None and stop != "length":
        raise DirectiveError(f"stop must be length; got {stop!r}")
    return Directive(
        source=source,
        audience=audience,
        reply=fields.get("reply"),
        thinking=fields.get("thinking"),
        tokens=_whole(fields, "tokens", MAX_TOKENS),
        headers_ms=_number(fields, "headers_ms", MAX_MILLISECONDS),
        ttft_ms=_number(fields, "ttft_ms", MAX_MILLISECONDS),
        tps=_number(fields, "tps", MAX_TOKENS),
        fault=cast("FaultKind | None", fault),
        retry_after=retry_after,
        after=after,
        times=times,
        tool=tool,
        args=args,
        calls=calls,
        step=step,
        model=fields.get("model"),
        stop="length" if stop else None,
        invalid_output=_whole(fields, "invalid_output", MAX_STEP, minimum=1),
    )


def _arguments(text: str | None, tool: str | None) -> dict[str, Any] | None:
    if text is None:
        return {} if tool is not None else None
    if tool is None:
        raise DirectiveError("args needs tool=NAME")
    value = _json("args", text)
    if not isinstance(value, dict):
        raise DirectiveError(f"args must be a JSON object; got {text!r}")
    return value


def _calls(text: str | None) -> tuple[ScriptedCall, ...] | None:
    if text is None:
        return None
    value = _json("calls", text)
    if not isinstance(value, list) or not value:
        raise DirectiveError(
            'calls must be a non-empty JSON array of {"name": ..., "args": {...}} objects; '
            f"got {text!r}"
        )
    calls: list[ScriptedCall] = []
    for index, call in enumerate(value):
        where = f"calls[{index}]"
        if not isinstance(call, dict):
            raise DirectiveError(f'{where} must be a JSON object with "name" and "args"')
        unknown = sorted(key for key in call if key not in _CALL_KEYS)
        if unknown:
            raise DirectiveError(
                f'{where} has unknown key {unknown[0]!r}; a call has only "name" and "args"'
            )
        if "name" not in call:
            raise DirectiveError(f'{where} needs a "name"')
        name = call["name"]
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise DirectiveError(f"{where}.name must be {_TOOL_NAME_RULE}; got {name!r}")
        args = call.get("args", {})
        if not isinstance(args, dict):
            raise DirectiveError(f"{where}.args must be a JSON object; got {args!r}")
        calls.append(ScriptedCall(name=name, args=args))
    return tuple(calls)


def _json(key: str, text: str) -> Any:
    """`text` decoded as strict JSON (no NaN or Infinity, which no API would accept; a number
    too large for a float stays its text, as Grove's own parsers keep it)."""
    try:
        return wirejson.loads(text)
    except RecursionError as exc:
        raise DirectiveError(f"{key} is not valid JSON (nested too deeply)") from exc
    except ValueError as exc:
        raise DirectiveError(f"{key} is not valid JSON ({exc.args[0]}): {text!r}") from exc


def _whole(fields: dict[str, str], key: str, maximum: int, *, minimum: int = 0) -> int | None:
    text = fields.get(key)
    if text is None:
        return None
    if not _WHOLE.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise DirectiveError(
            f"{key} must be a whole number from {minimum} to {maximum}; got {text!r}"
        )
    return int(text)


def _number(fields: dict[str, str], key: str, maximum: int) -> float | None:
    text = fields.get(key)
    if text is None:
        return None
    if not _NUMBER.fullmatch(text) or float(text) > maximum:
        raise DirectiveError(f"{key} must be a number from 0 to {maximum}; got {text!r}")
    return float(text)
