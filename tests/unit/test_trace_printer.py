"""Traces without a collector (supervisor/trace_printer.py): spans sent over OTLP/HTTP by the
hosts' own exporter come out as the SDK's console exporter writes them, one a line; a request
without the printer's token prints nothing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from grove.actors.otlp_wire import encode_request, span_exporter
from grove.actors.telemetry import TelemetrySettings
from grove.supervisor.trace_printer import printing_spans, span_lines

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
PARENT = SpanContext(TRACE, 0xB7AD6B7169203331, is_remote=False, trace_flags=TraceFlags(1))


def chat_span(**more: object) -> ReadableSpan:
    """A span as a host makes a turn's `chat` span (actors/telemetry_otel.py `ended`)."""
    return ReadableSpan(
        "chat claude-sonnet-5-5",
        SpanContext(TRACE, 0x1234_5678_9ABC_DEF0, is_remote=False, trace_flags=TraceFlags(1)),
        PARENT,
        resource=Resource.create({"service.name": "grove-under-test"}),
        instrumentation_scope=InstrumentationScope("grove"),
        attributes={"gen_ai.request.model": "claude-sonnet-5-5", "gen_ai.usage.input_tokens": 12},
        kind=SpanKind.CLIENT,
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_001_500_000_000,
        **more,  # type: ignore[arg-type]
    )


def test_a_span_prints_as_the_sdks_console_exporter_writes_it_on_one_line() -> None:
    span = chat_span(status=Status(StatusCode.ERROR, "overloaded"))
    (line,) = span_lines(encode_request([span])) or []
    assert "\n" not in line
    assert json.loads(line) == json.loads(span.to_json())


def test_a_first_span_has_no_parent_and_a_body_not_otlp_prints_nothing() -> None:
    root = ReadableSpan(
        "create_agent", PARENT, None, resource=Resource.create({}), start_time=1, end_time=2
    )
    (line,) = span_lines(encode_request([root])) or []
    printed = json.loads(line)
    assert printed["parent_id"] is None and printed["kind"] == "SpanKind.INTERNAL"
    assert printed["status"] == {"status_code": "UNSET"}
    assert span_lines(b"\xff\xff not protobuf") is None


def test_spans_sent_to_the_printer_are_appended_to_its_file(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("earlier\n")
    printed = TelemetrySettings(endpoint="", printed=str(traces))
    with printing_spans(printed) as settings:
        assert settings.endpoint.startswith("http://127.0.0.1:")
        exporter = span_exporter(settings.endpoint, dict(settings.headers))
        exporter.export([chat_span(), chat_span()])
        exporter.shutdown()
        request = urllib.request.Request(settings.endpoint, data=encode_request([chat_span()]))
        with pytest.raises(urllib.error.HTTPError) as refused:  # no token: not ours to print
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
    lines = traces.read_text().splitlines()
    assert lines[0] == "earlier" and len(lines) == 3
    assert [json.loads(line)["name"] for line in lines[1:]] == ["chat claude-sonnet-5-5"] * 2
