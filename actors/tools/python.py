"""Python functions as tools: the schema from the signature and docstring through pydantic,
arguments validated before the call, sync code in a thread, a timeout and a capped result.

Nothing here knows where a function came from (the caller's process ships it: see kit.py).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from grove.actors.agent.tool import Tool
from grove.actors.errors import ToolError
from grove.providers.base import ToolSpec
from grove.providers.errors import GroveError

DEFAULT_TIMEOUT_S = 60.0
RESULT_CAP_CHARS = 50_000
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
_OPTIONS = "__grove_tool__"
F = TypeVar("F", bound=Callable[..., Any])
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolDefinitionError(GroveError):
    """A function Grove cannot make a tool of; the text names the tool and the reason."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOptions:
    name: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    sequential: bool = False
    idempotent: bool = False  # a call cut off by a host's death may run again


@overload
def tool(function: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sequential: bool = False,
    idempotent: bool = False,
) -> Callable[[F], F]: ...


def tool(
    function: F | None = None,
    /,
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sequential: bool = False,
    idempotent: bool = False,
) -> F | Callable[[F], F]:
    """Mark a function as a tool, bare (`@tool`) or with options (`@tool(timeout_s=5)`).
    Any typed function is a tool without it; this only overrides the defaults.
    `idempotent=True`: a call its host's death cut off runs again when the turn resumes
    (otherwise the model is told it may or may not have taken effect)."""
    options = ToolOptions(
        name=name, timeout_s=timeout_s, sequential=sequential, idempotent=idempotent
    )

    def mark(target: F) -> F:
        setattr(target, _OPTIONS, options)
        return target

    return mark(function) if function is not None else mark


@dataclass(frozen=True, kw_only=True, slots=True)
class PythonTool:
    """A function with its schema and the model that validates its arguments."""

    function: Callable[..., Any]
    spec: ToolSpec
    arguments: type[BaseModel]
    options: ToolOptions

    @property
    def name(self) -> str:
        return self.spec.name

    def as_tool(self) -> Tool:
        return Tool(
            spec=self.spec,
            run=self.run,
            sequential=self.options.sequential,
            idempotent=self.options.idempotent,
        )

    async def run(self, arguments: dict[str, Any]) -> str:
        """The function's result as text; a ToolError carries what the model is told."""
        try:
            validated = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(validation_text(self.name, exc)) from None
        values = {name: getattr(validated, name) for name in self.arguments.model_fields}
        try:
            async with asyncio.timeout(self.options.timeout_s):
                if inspect.iscoroutinefunction(self.function):
                    result = await self.function(**values)
                else:  # a thread: the host's event loop keeps serving its other agents
                    result = await asyncio.to_thread(self.function, **values)
        except ToolError:
            raise  # already the text the model is to see
        except TimeoutError:
            raise ToolError(
                f"Tool {self.name} timed out after {self.options.timeout_s:g} s"
            ) from None
        except Exception as exc:
            raise ToolError(
                f"{type(exc).__name__}: {exc}", detail="".join(traceback.format_exception(exc))
            ) from None
        return capped(result_text(self.name, result))


def python_tool(function: Callable[..., Any]) -> PythonTool:
    """`function` as a tool; ToolDefinitionError when its signature cannot be a schema."""
    options: ToolOptions = getattr(function, _OPTIONS, None) or ToolOptions()
    name = str(options.name or getattr(function, "__name__", ""))
    if not TOOL_NAME.match(name):
        raise ToolDefinitionError(
            f"tool {name!r}: a name is letters, digits, _ and -, at most 64, not a digit first"
        )
    if not (0 < options.timeout_s <= 24 * 3600):
        raise ToolDefinitionError(f"tool {name}: timeout_s must be above 0 and at most a day")
    description, parameter_notes = parse_docstring(inspect.getdoc(function) or "")
    try:
        signature = inspect.signature(function)
        hints = get_type_hints(function, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(f"tool {name}: cannot read its signature: {exc}") from exc
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {name}: *args and **kwargs cannot be described")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"tool {name}: positional-only parameters are not named")
        default = ... if parameter.default is parameter.empty else parameter.default
        note = parameter_notes.get(parameter.name)
        fields[parameter.name] = (
            hints.get(parameter.name, Any),
            Field(default, description=note) if note else Field(default),
        )
    try:
        arguments = create_model(
            f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = arguments.model_json_schema()
    except Exception as exc:  # pydantic's schema errors are of several kinds
        raise ToolDefinitionError(f"tool {name}: pydantic cannot build its schema: {exc}") from exc
    schema.pop("title", None)
    spec = ToolSpec(name=name, description=str(description or name), parameters=schema)
    return PythonTool(function=function, spec=spec, arguments=arguments, options=options)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and each parameter's text from a Google-style `Args:` section
    (`inspect.getdoc` has taken the common indentation off, so sections start at column 0)."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER.match(line):
            break
        summary.append(line.strip())
    notes: dict[str, str] = {}
    inside, base, current = False, -1, ""
    for line in lines:
        if _ARGS_HEADER.match(line):
            inside = True
            continue
        if not inside or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break  # the next section
        found = _ARG_LINE.match(line)
        if found and base in (-1, indent):
            base, current = indent, found.group(1).lstrip("*")
            notes[current] = found.group(2).strip()
        elif current:
            notes[current] = f"{notes[current]} {line.strip()}".strip()
    return " ".join(summary), notes


def validation_text(name: str, error: ValidationError) -> str:
    """What the model needs to retry: each field, what was wrong and what it gave."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        given = item.get("input")
        shown = "" if item["type"] == "missing" else f" (got {_short(given)})"
        problems.append(f"{where}: {item['msg']}{shown}")
    return f"Invalid arguments for {name}: " + "; ".join(problems)


def result_text(name: str, result: Any) -> str:
    """Text as is; None as nothing; models, dicts, lists and numbers as JSON."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    try:
        return pydantic_core.to_json(result).decode("utf-8")
    except pydantic_core.PydanticSerializationError:
        raise ToolError(
            f"Tool {name} returned a value of type {type(result).__name__}, "
            "which is neither text nor JSON"
        ) from None


def capped(text: str, limit: int = RESULT_CAP_CHARS) -> str:
    """`text`, or its head and tail with a note of how much was cut between them."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters cut ...]\n{text[-tail:]}"


def _short(value: Any, limit: int = 80) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
