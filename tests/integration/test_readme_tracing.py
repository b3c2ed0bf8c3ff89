"""The README's "Tracing" section, run as a reader would: its Python example prints what the
section says and exports one trace, the program's span over Grove's, to a real OTLP receiver."""

from __future__ import annotations

from pathlib import Path

from tests.integration.readme import readme_section, run_python_example
from tests.otlp import otlp_receiver


def test_the_python_example_nests_grove_under_the_programs_span(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        done = run_python_example("Tracing", tmp_path, env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[True, True]"
        assert "prints `[True, True]`" in readme_section("Tracing")
        spans = receiver.spans()
    (release,) = [span for span in spans if span.name == "release"]
    assert release.service != "grove" and release.parent == ""
    tree = [span for span in spans if span.trace_id == release.trace_id]
    (created,) = [span for span in tree if span.name == "create_agent"]
    assert created.parent == release.span_id and created.service == "grove"
    turns = [span for span in tree if span.name == "invoke_agent"]
    assert len(turns) == 2 and {turn.parent for turn in turns} == {created.span_id}
    chats = [span for span in tree if span.name == "chat claude-sonnet-5-5"]
    assert sorted(chat.parent for chat in chats) == sorted(turn.span_id for turn in turns)
    assert len(tree) == len(spans) == 6  # nothing outside the one trace
