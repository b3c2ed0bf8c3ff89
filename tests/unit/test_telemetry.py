"""Where traces go: `[telemetry]` and the standard OTEL_* variables (supervisor/telemetry.py),
the errors for what Grove cannot follow, and tracing off importing nothing of the SDK.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.actors.telemetry import NO_TRACING, TraceParent
from grove.actors.telemetry_otel import start_tracing
from grove.supervisor.config_service import TelemetrySection
from grove.supervisor.errors import ConfigError
from grove.supervisor.telemetry import telemetry_settings
from tests.conformance.corpus import REPO_ROOT

COLLECTOR = "http://collector.internal:4318"


def settings(env: dict[str, str], **section: object) -> object:
    return telemetry_settings(TelemetrySection.model_validate(section), env)


def test_off_unless_an_endpoint_is_named() -> None:
    assert settings({}) is None
    assert settings({"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}) is None


def test_the_base_endpoint_gets_the_traces_path_and_the_traces_endpoint_is_used_as_is() -> None:
    base = telemetry_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR + "/"})
    assert base is not None and base.endpoint == COLLECTOR + "/v1/traces"
    own = telemetry_settings(
        TelemetrySection(otlp_endpoint="http://127.0.0.1:1"),
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/ingest",
        },
    )
    assert own is not None and own.endpoint == "https://traces.example/ingest"
    table = telemetry_settings(TelemetrySection(otlp_endpoint=COLLECTOR), {})
    assert table is not None and table.endpoint == COLLECTOR + "/v1/traces"
    assert table.service_name == "grove"


def test_the_variables_win_over_the_table() -> None:
    chosen = telemetry_settings(
        TelemetrySection(otlp_endpoint="http://127.0.0.1:1", service_name="from-file"),
        {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_SERVICE_NAME": "from-env"},
    )
    assert chosen is not None
    assert (chosen.endpoint, chosen.service_name) == (COLLECTOR + "/v1/traces", "from-env")


def test_what_turns_tracing_off() -> None:
    named = {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR}
    assert settings(named | {"OTEL_SDK_DISABLED": "TRUE"}) is None
    assert settings(named | {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert settings(named, enabled=False) is None
    assert settings(named | {"OTEL_SDK_DISABLED": "false"}) is not None


def test_asking_for_otlp_alone_uses_the_default_endpoint() -> None:
    asked = telemetry_settings(TelemetrySection(), {"OTEL_TRACES_EXPORTER": "otlp"})
    assert asked is not None and asked.endpoint == "http://localhost:4318/v1/traces"


def test_the_console_exporter_prints_on_stderr_and_a_traces_file_takes_the_spans(
    tmp_path: Path,
) -> None:
    console = telemetry_settings(
        TelemetrySection(otlp_endpoint=COLLECTOR),
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "mine"},
    )
    assert console is not None
    assert (console.printed, console.endpoint, console.service_name) == ("-", "", "mine")
    traces = tmp_path / "traces.jsonl"
    for env in (
        {"GROVE_TRACES_FILE": str(traces)},
        {"GROVE_TRACES_FILE": str(traces), "OTEL_TRACES_EXPORTER": "console"},
    ):
        chosen = telemetry_settings(TelemetrySection(), env)
        assert chosen is not None and chosen.printed == str(traces)
    assert settings({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}) is None
    assert settings({"GROVE_TRACES_FILE": str(traces)}, enabled=False) is None


@pytest.mark.parametrize(
    ("env", "text"),
    [
        (
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            "OTEL_TRACES_EXPORTER=zipkin: Grove exports traces over OTLP (otlp), prints them "
            "(console, or a file with GROVE_TRACES_FILE), or neither (none)",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp,console"},
            "OTEL_TRACES_EXPORTER=otlp,console: Grove sends traces to one place; Grove exports "
            "traces over OTLP (otlp), prints them (console, or a file with GROVE_TRACES_FILE), "
            "or neither (none)",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "GROVE_TRACES_FILE": "traces.jsonl"},
            "OTEL_TRACES_EXPORTER=otlp with GROVE_TRACES_FILE: Grove sends traces to one place; "
            "Grove exports traces over OTLP (otlp), prints them (console, or a file with "
            "GROVE_TRACES_FILE), or neither (none)",
        ),
        (
            {"GROVE_TRACES_FILE": "/no/such/directory/traces.jsonl"},
            "GROVE_TRACES_FILE=/no/such/directory/traces.jsonl: the directory /no/such/directory "
            "does not exist",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: Grove exports OTLP over HTTP with protobuf "
            "(http/protobuf); point the endpoint at the collector's HTTP port (4318)",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
            "OTEL_EXPORTER_OTLP_ENDPOINT: base URL 'collector:4318' must start with http:// or "
            "https://",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_EXPORTER_OTLP_HEADERS": "a=1,tok"},
            "OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not KEY=VALUE",
        ),
    ],
)
def test_what_grove_cannot_follow_is_one_precise_line(env: dict[str, str], text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        telemetry_settings(TelemetrySection(), env)
    assert str(raised.value) == text


def test_headers_from_the_table_and_both_variables_url_decoded() -> None:
    chosen = telemetry_settings(
        TelemetrySection(otlp_endpoint=COLLECTOR, headers={"x-team": "core", "authorization": "a"}),
        {
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret, x-extra = 1",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-extra=2",
        },
    )
    assert chosen is not None
    assert dict(chosen.headers) == {
        "authorization": "Bearer s3cret",
        "x-extra": "2",
        "x-team": "core",
    }
    assert "s3cret" not in repr(chosen)


@given(st.text(max_size=60))
def test_any_headers_text_is_read_or_refused_without_its_values(text: str) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_EXPORTER_OTLP_HEADERS": text}
    try:
        chosen = telemetry_settings(TelemetrySection(), env)
    except ConfigError as exc:
        assert str(exc).startswith("OTEL_EXPORTER_OTLP_HEADERS: entry ")
        assert str(exc).endswith(" is not KEY=VALUE")
    else:
        assert chosen is not None and all(key for key, _ in chosen.headers)


def test_a_records_trace_context_round_trips_and_an_untraced_one_has_none() -> None:
    parent = TraceParent(traceparent="00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", root="r")
    assert TraceParent.from_metadata({"trace": parent.to_data()}) == parent
    assert TraceParent.from_metadata({}) is None


def test_tracing_off_imports_nothing_of_the_sdk() -> None:
    """Every module a host, the supervisor and the API load, a SQLite store opened, and
    tracing started off: neither the SDK nor the exporter is imported (the API is: the MCP
    SDK loads it)."""
    code = (
        "import sys, tempfile\n"
        "import grove.actors.host.actor, grove.supervisor.actor, grove.supervisor.api\n"
        "import grove.cli.app\n"
        "from grove.actors.telemetry import caller_traceparent\n"
        "from grove.actors.telemetry_otel import start_tracing\n"
        "from grove.supervisor.store import open_store\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    open_store(f'sqlite:///{d}/g.sqlite3').close()\n"
        "assert start_tracing(None).current() is None and caller_traceparent() is None\n"
        "heavy = ('opentelemetry.sdk', 'opentelemetry.exporter', 'redis')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"
    assert start_tracing(None) is NO_TRACING
