"""The read stage of a batch: task lines (id, prompt, model, system, schema, tier), the context.
Pure text handling that raises only `TaskLineError` / `ContextError`; running tasks is runner.py's.
"""

from __future__ import annotations

import io
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

from grove.providers.base import TIERS, JSONObject, Tier
from grove.providers.errors import ModelSpecError, OutputSchemaError
from grove.providers.model_specs import parse_model_spec
from grove.providers.output_dialects import provider_refusal
from grove.providers.output_schema import checked_schema
from grove.supervisor.store.sizes import DEFAULT_MAX_MESSAGE_BYTES
from grove.supervisor.text_files import UTF8_BOM, read_text_file

TASK_FIELDS = ("id", "prompt", "model", "system", "schema", "tier")
MAX_TEXT_BYTES = DEFAULT_MAX_MESSAGE_BYTES // 2  # room for the stored message's data
# One task line: a prompt and a system text at the limit, with room for JSON escapes.
MAX_LINE_BYTES = 4 * MAX_TEXT_BYTES
# A whole tasks file, and all of a .jsonl context (which every task inherits).
MAX_INPUT_BYTES = 512 * 1024 * 1024
MAX_CONTEXT_BYTES = 64 * 1024 * 1024
SKIP_CHUNK_BYTES = 1024 * 1024
ContextKind = Literal["user", "assistant"]

TaskId = str | int | float


class TaskLineError(ValueError):
    """One input line that is not a task; `message` says precisely why, `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class InputTooLarge(ValueError):
    """A whole input is past its limit: the command stops before it starts anything."""


class ContextError(ValueError):
    """The `--context` file cannot be used; the text names the file, the line and the reason."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """One task. `id` is as written; `key` is how ids are compared (7 and "7" are one id)."""

    id: TaskId
    key: str
    line: int
    prompt: str
    model: str | None = None  # canonical MODEL[/THINKING], aliases resolved
    system: str | None = None
    schema: JSONObject | None = None  # the task's own output schema, checked
    tier: Tier | None = None  # the task's own price tier, else the batch's


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskFile:
    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskLineError] = field(default_factory=list)


def id_key(value: TaskId) -> str:
    """Ids are compared by their text: a string as is, a number as JSON writes it."""
    return value if isinstance(value, str) else json.dumps(value)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class StrictJSONError(ValueError):
    """JSON that Python would accept but a task must not hold: NaN, Infinity, a repeated key."""


def _reject_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise StrictJSONError(f"field {key!r} appears twice")
        found[key] = value
    return found


def load_json(text: str) -> Any:
    """Strict JSON: no NaN or Infinity, no repeated keys."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def json_problem(exc: ValueError | RecursionError) -> str:
    """What is wrong with text that `load_json` refused."""
    if isinstance(exc, json.JSONDecodeError):  # some messages end in "at" themselves
        return f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
    if isinstance(exc, StrictJSONError):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "not valid JSON: nested too deeply"
    return f"not valid JSON: {exc}"


def _text_problem(name: str, value: str) -> str | None:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        return f"{name!r} contains an unpaired surrogate (\\u{ord(bad):04x}), not valid UTF-8"
    if size > MAX_TEXT_BYTES:
        return f"{name!r} is {size:,} bytes; the limit is {MAX_TEXT_BYTES:,}"
    return None


def _id_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return f"'id' must be a string or a number, not {_json_type(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return "'id' must be a finite number"
    if isinstance(value, str):
        if not value:
            return "'id' is an empty string"
        return _text_problem("id", value)
    return None


def _string_problem(name: str, value: object, *, required: bool) -> str | None:
    if not isinstance(value, str):
        return f"{name!r} must be a string, not {_json_type(value)}"
    if required and not value.strip():
        return f"{name!r} is empty"
    return _text_problem(name, value)


def parse_task_line(text: str, line: int, aliases: Mapping[str, str] | None = None) -> Task | None:
    """The task on one input line, None for a blank line; TaskLineError lists every problem."""
    if not text.strip():
        return None
    try:
        value = load_json(text)
    except (ValueError, RecursionError) as exc:
        raise TaskLineError(line, json_problem(exc)) from exc
    if not isinstance(value, dict):
        raise TaskLineError(line, f"a task must be a JSON object, not {_json_type(value)}")
    problems: list[str] = []
    unknown = [key for key in value if key not in TASK_FIELDS]
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        plural = "s" if len(unknown) > 1 else ""
        problems.append(f"unknown field{plural} {names} (a task has {', '.join(TASK_FIELDS)})")
    if "id" not in value:
        problems.append("missing required field 'id'")
    elif (problem := _id_problem(value["id"])) is not None:
        problems.append(problem)
    if "prompt" not in value:
        problems.append("missing required field 'prompt'")
    elif (problem := _string_problem("prompt", value["prompt"], required=True)) is not None:
        problems.append(problem)
    model = value.get("model")
    spec: str | None = None
    if model is not None:
        if (problem := _string_problem("model", model, required=True)) is not None:
            problems.append(problem)
        else:
            try:
                spec = str(parse_model_spec(model, aliases))
            except ModelSpecError as exc:
                problems.append(f"'model': {str(exc).strip()}")
    system = value.get("system")
    if (
        system is not None
        and (problem := _string_problem("system", system, required=False)) is not None
    ):
        problems.append(problem)
    schema = None
    if "schema" in value:
        schema, problem = _schema(value["schema"], spec)
        if problem is not None:
            problems.append(problem)
    tier = value.get("tier")
    if tier is not None and tier not in TIERS:
        problems.append(f"'tier' must be one of {', '.join(TIERS)}, not {json.dumps(tier)}")
    if problems:
        raise TaskLineError(line, "; ".join(problems))
    return Task(
        id=value["id"],
        key=id_key(value["id"]),
        line=line,
        prompt=value["prompt"],
        model=spec,
        system=system,
        schema=schema,
        tier=tier,
    )


def _schema(value: object, model: str | None) -> tuple[JSONObject | None, str | None]:
    """A task's own output schema, checked (and for its own model's provider, when it names
    one), or what is wrong with it."""
    if not isinstance(value, dict):
        return None, f"'schema' must be a JSON schema object, not {_json_type(value)}"
    try:
        schema = checked_schema(value)
    except OutputSchemaError as exc:
        return None, f"'schema': {exc}"
    refusal = schema_refusal(schema, model)
    return (None, refusal) if refusal else (schema, None)


def schema_refusal(schema: JSONObject, model: str | None) -> str | None:
    """Why the provider of `model` (MODEL[/THINKING], canonical) would refuse `schema`."""
    if model is None:
        return None
    refusal = provider_refusal(schema, parse_model_spec(model).provider)
    return None if refusal is None else f"'schema': {refusal}"


def decode_lines(
    source: bytes | BinaryIO, *, what: str = "the input", max_bytes: int | None = MAX_INPUT_BYTES
) -> Iterator[tuple[int, str | TaskLineError]]:
    """Each physical line of `source` with its 1-based number, as text or as the error that
    it is not UTF-8 or longer than MAX_LINE_BYTES. A leading byte order mark and trailing
    carriage returns are dropped. Read a line at a time, each capped, so an endless or huge
    input (`/dev/zero`) costs bounded memory; past `max_bytes` in all, InputTooLarge."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    limit = math.inf if max_bytes is None else max_bytes
    total = 0
    for index in itertools.count(1):
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        total += len(raw)
        too_long = len(raw) > MAX_LINE_BYTES
        while too_long and not raw.endswith(b"\n") and total <= limit:
            raw = stream.readline(SKIP_CHUNK_BYTES)  # the rest of the line, dropped
            if not raw:
                break
            total += len(raw)
        if total > limit:
            raise InputTooLarge(f"{what} is larger than {limit:,} bytes")
        if too_long:
            yield index, TaskLineError(index, f"longer than {MAX_LINE_BYTES:,} bytes")
            continue
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if index == 1:
            raw = raw.removeprefix(UTF8_BOM)
        try:
            yield index, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield (
                index,
                TaskLineError(
                    index, f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
                ),
            )


def read_tasks(
    source: bytes | BinaryIO, aliases: Mapping[str, str] | None = None, *, what: str = "the input"
) -> TaskFile:
    """Every task of a TASKS.jsonl file in order, and one error per line that is not a task
    (a repeated id is an error on each later line that repeats it)."""
    tasks: list[Task] = []
    errors: list[TaskLineError] = []
    first_line: dict[str, int] = {}
    for line, text in decode_lines(source, what=what):
        if isinstance(text, TaskLineError):
            errors.append(text)
            continue
        try:
            task = parse_task_line(text, line, aliases)
        except TaskLineError as error:
            errors.append(error)
            continue
        if task is None:
            continue
        if task.key in first_line:
            first = first_line[task.key]
            message = f"duplicate id {json.dumps(task.id)}: first on line {first}"
            errors.append(TaskLineError(line, message))
            continue
        first_line[task.key] = line
        tasks.append(task)
    return TaskFile(tasks=tasks, errors=errors)


def read_context(path: Path) -> list[tuple[ContextKind, str]]:
    """The shared context as `(kind, content)` messages: a `.jsonl` file holds one
    `{"role": "user"|"assistant", "content": "..."}` a line; any other file is plain text,
    one user message. Read with its limits enforced as it is read."""
    if path.suffix.lower() == ".jsonl":
        try:
            with path.open("rb") as stream:
                return _context_messages(path, stream)
        except OSError as exc:
            raise ContextError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except InputTooLarge as exc:
            raise ContextError(str(exc)) from exc
    text = read_text_file(
        path,
        what=str(path),
        limit=MAX_TEXT_BYTES,
        error=ContextError,
        past_limit=", the limit of one message",
    )
    if not text.strip():
        raise ContextError(f"{path} is empty")
    return [("user", text)]


def _context_messages(path: Path, stream: BinaryIO) -> list[tuple[ContextKind, str]]:
    messages = [
        message
        for line, text in decode_lines(stream, what=str(path), max_bytes=MAX_CONTEXT_BYTES)
        if (message := _context_message(path, line, text)) is not None
    ]
    if not messages:
        raise ContextError(f"{path} holds no messages")
    return messages


def _context_message(
    path: Path, line: int, text: str | TaskLineError
) -> tuple[ContextKind, str] | None:
    if isinstance(text, TaskLineError):
        raise ContextError(f"{path} line {line}: {text.message}")
    if not text.strip():
        return None
    try:
        value = load_json(text)
    except (ValueError, RecursionError) as exc:
        raise ContextError(f"{path} line {line}: {json_problem(exc)}") from exc
    if not isinstance(value, dict) or set(value) != {"role", "content"}:
        raise ContextError(
            f'{path} line {line}: expected {{"role": "user"|"assistant", "content": "..."}}'
        )
    role, content = value["role"], value["content"]
    if role not in ("user", "assistant"):
        raise ContextError(f'{path} line {line}: \'role\' must be "user" or "assistant"')
    problem = _string_problem("content", content, required=True)
    if problem is not None:
        raise ContextError(f"{path} line {line}: {problem}")
    kind: ContextKind = "user" if role == "user" else "assistant"
    return kind, content


def task_json(task: Task) -> dict[str, Any]:
    """The task as a TASKS.jsonl line holds it (its model canonical: aliases resolved)."""
    line: dict[str, Any] = {"id": task.id, "prompt": task.prompt}
    if task.model is not None:
        line["model"] = task.model
    if task.system is not None:
        line["system"] = task.system
    if task.schema is not None:
        line["schema"] = task.schema
    if task.tier is not None:
        line["tier"] = task.tier
    return line
