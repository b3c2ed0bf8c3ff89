"""Plain option values converted as typer would, without pydantic (cli/coercion.py): each kind
of option Grove has, its errors, and the commands' options all taken over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import typer

from grove.cli.coercion import plain_converter
from tests.conformance.corpus import REPO_ROOT


class Info:
    """What typer's parameter info says about bounds and checks (defaults: none)."""

    def __init__(self, **given: object) -> None:
        self.parser = None
        self.clamp = False
        self.min = self.max = None
        self.exists = self.writable = self.resolve_path = False
        self.file_okay = self.dir_okay = self.readable = True
        self.__dict__.update(given)


def convert(annotation: object, value: object, **info: object) -> object:
    converter = plain_converter(annotation, Info(**info))
    assert converter is not None
    return converter.coerce(value, param=None, ctx=None)


def test_each_plain_kind_converts_as_typer_does() -> None:
    assert convert(str | None, "hi") == "hi"
    assert convert(str | None, None) is None
    assert convert(int, "32", min=1) == 32
    assert convert(float | None, "0.5") == 0.5
    assert convert(Path | None, "out.jsonl") == Path("out.jsonl")
    assert convert(list[str] | None, ("a", "b")) == ["a", "b"]
    assert convert(list[str] | None, None) == ()
    assert convert(Literal["agent", "model"], "model") == "model"
    assert convert(bool, "yes") is True and convert(bool, False) is False


@pytest.mark.parametrize(
    ("annotation", "value", "info", "error"),
    [
        (int, "many", {}, "Input should be a valid integer, unable to parse string as an integer"),
        (int, "0", {"min": 1}, "Input should be greater than or equal to 1"),
        (int, "70000", {"max": 65535}, "Input should be less than or equal to 65535"),
        (float, "x", {}, "Input should be a valid number, unable to parse string as a number"),
        (Literal["agent", "day"], "week", {}, "'week' is not one of 'agent', 'day'."),
        (bool, "perhaps", {}, "Input should be a valid boolean, unable to interpret input"),
    ],
)
def test_a_bad_value_is_a_bad_parameter_saying_why(
    annotation: object, value: str, info: dict[str, object], error: str
) -> None:
    converter = plain_converter(annotation, Info(**info))
    assert converter is not None
    with pytest.raises(typer.BadParameter) as refused:
        converter.coerce(value, param=None, ctx=None)
    assert refused.value.message == error


def test_what_is_not_plain_is_left_to_typer() -> None:
    assert plain_converter(dict[str, int], Info()) is None
    assert plain_converter(int, Info(clamp=True)) is None
    assert plain_converter(Path, Info(exists=True)) is None
    assert plain_converter(str, Info(parser=str.upper)) is None
    assert plain_converter(int | str, Info()) is None


def test_typer_asked_directly_says_the_same_words() -> None:
    from typer.main import get_command

    from grove.cli.app import app

    group = get_command(app)
    context = group.make_context("grove", ["batch"])
    batch = group.get_command(context, "batch")  # type: ignore[attr-defined]
    for value, words in (("0", "greater than or equal to 1"), ("x", "a valid integer")):
        with pytest.raises(typer.BadParameter, match=words):
            batch.make_context("batch", ["t.jsonl", "--concurrency", value], parent=context)


def test_a_command_line_loads_no_pydantic_for_its_options() -> None:
    probe = (
        "import sys\n"
        "from grove.cli.app import app\n"
        "try:\n"
        "    app(['usage', '--by', 'week'], prog_name='grove')\n"
        "except SystemExit as exit:\n"
        "    print(exit.code, 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert "'week' is not one of 'agent', 'model', 'provider', 'tier', 'day'." in done.stderr
