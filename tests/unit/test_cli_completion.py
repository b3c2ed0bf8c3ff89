"""Tab completion of the chat REPL: command names, and the catalog's models after /model."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grove.cli.completion import candidates
from grove.providers.catalog import completions

COMMANDS = ["agents", "clear", "exit", "fork", "help", "kill", "model"]


def test_command_names_complete_after_a_slash() -> None:
    assert candidates("/", COMMANDS, []) == ("/", [f"/{name}" for name in COMMANDS])
    assert candidates("/f", COMMANDS, []) == ("/f", ["/fork"])
    assert candidates("/zz", COMMANDS, []) == ("/zz", [])


def test_models_complete_after_model_and_fork_model() -> None:
    models = completions()
    word, found = candidates("/model claude-sonnet-5-5/", COMMANDS, models)
    assert word == "claude-sonnet-5-5/"
    assert found == [f"claude-sonnet-5-5/{level}" for level in ("none", "low", "med", "high")]
    word, found = candidates("/fork --model gpt-6", COMMANDS, models)
    assert word == "gpt-6"
    assert found == [m for m in models if m.startswith("gpt-6")]
    assert "gpt-6.1-terra/med" in found
    assert candidates("/model ", COMMANDS, models) == ("", models)


def test_nothing_completes_in_prompts_or_after_the_model_word() -> None:
    models = completions()
    assert candidates("hello /mo", COMMANDS, models) == ("hello /mo", [])
    assert candidates("/fork --model gpt-5 ", COMMANDS, models)[1] == []
    assert candidates("/agents --a", COMMANDS, models)[1] == []


@given(st.text(max_size=40))
def test_every_candidate_extends_the_word(text: str) -> None:
    word, found = candidates(text, COMMANDS, completions())
    assert text.endswith(word)
    assert all(item.startswith(word) for item in found)
