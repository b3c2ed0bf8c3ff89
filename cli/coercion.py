"""Plain option values without pydantic. Typer (0.2x) turns every option's text into its value
through a pydantic TypeAdapter, and importing pydantic for that nearly doubles what a command
costs to start; a `grove run` through a service must stay light. Grove's options are plain
(text, paths, numbers within bounds, lists of text, choices), so they are converted here as
typer would. An option of any other kind, or a typer without this hook, is left to typer.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import typer

Convert = Callable[[Any], Any]


class PlainValue:
    """What typer asks of an option's converter (`coerce`), for one plain type."""

    def __init__(self, convert: Convert, *, multiple: bool) -> None:
        self.convert = convert
        self.multiple = multiple

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if self.multiple else None
        try:
            if self.multiple:
                return [self.convert(item) for item in value]
            return self.convert(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None


def text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE = frozenset({"", "0", "off", "f", "false", "n", "no"})


def flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE | FALSE:
        return word in TRUE
    raise ValueError("Input should be a valid boolean, unable to interpret input")


def number(kind: type[int] | type[float], low: float | None, high: float | None) -> Convert:
    """Typer's number, with its words (pydantic's) for what is wrong."""
    noun = "an integer" if kind is int else "a number"

    def convert(value: Any) -> Any:
        try:
            found = kind(value)
        except (TypeError, ValueError):
            shown = "a valid integer" if kind is int else "a valid number"
            raise ValueError(f"Input should be {shown}, unable to parse string as {noun}") from None
        if low is not None and found < low:
            raise ValueError(f"Input should be greater than or equal to {low}")
        if high is not None and found > high:
            raise ValueError(f"Input should be less than or equal to {high}")
        return found

    return convert


def choice(choices: tuple[Any, ...]) -> Convert:
    def convert(value: Any) -> Any:
        if value in choices:
            return value
        shown = ", ".join(repr(option) for option in choices)
        raise ValueError(f"{value!r} is not one of {shown}.")

    return convert


def plain_converter(annotation: Any, info: Any) -> PlainValue | None:
    """The converter of an option annotated `annotation` (with typer's parameter info), or
    None when it is not a plain one."""
    if getattr(info, "parser", None) is not None or getattr(info, "clamp", False):
        return None
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(kinds) != 1:
            return None
        annotation = kinds[0]
    multiple = typing.get_origin(annotation) is list
    if multiple:
        (annotation,) = typing.get_args(annotation) or (None,)
    convert: Convert
    if annotation is str:
        convert = text
    elif annotation is bool:
        convert = flag
    elif annotation in (int, float):
        convert = number(annotation, getattr(info, "min", None), getattr(info, "max", None))
    elif annotation is Path and not path_checks(info):
        convert = Path
    elif typing.get_origin(annotation) is Literal:
        convert = choice(typing.get_args(annotation))
    else:
        return None
    return PlainValue(convert, multiple=multiple)


def path_checks(info: Any) -> bool:
    """Whether typer is asked to check a path (exists, kind, access) or resolve it."""
    return bool(
        getattr(info, "exists", False)
        or not getattr(info, "file_okay", True)
        or not getattr(info, "dir_okay", True)
        or getattr(info, "writable", False)
        or getattr(info, "readable", True) is not True
        or getattr(info, "resolve_path", False)
    )


def lighten(command: Any, ctx: Any) -> None:
    """Give `command`'s plain options (its --help too) the converters above, where typer has
    not built its own."""
    for param in command.get_params(ctx):
        described = getattr(param, "type_descriptor", None)
        if described is None or getattr(param, "_runtime_param", False) is not None:
            continue  # not typer's lazy converter: nothing to replace
        converter = plain_converter(described.annotation, described.parameter_info)
        if converter is not None:
            param._runtime_param = converter
