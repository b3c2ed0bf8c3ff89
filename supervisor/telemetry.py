"""Whether and where Grove's processes export traces: the standard `OTEL_*` variables over
`[telemetry]`, read once where Grove starts and handed to the supervisor and every host.

Without a collector, `OTEL_TRACES_EXPORTER=console` prints the spans on stderr and
`GROVE_TRACES_FILE` appends them to a file (supervisor/trace_printer.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote

from grove.actors.telemetry import TRACES_PATH, TelemetrySettings
from grove.providers.credentials import base_url_problem
from grove.supervisor.config_service import TelemetrySection
from grove.supervisor.errors import ConfigError

DEFAULT_ENDPOINT = "http://localhost:4318"  # the OTLP/HTTP default, when only asked for
PROTOCOL = "http/protobuf"
TRACES_FILE_VARIABLE = "GROVE_TRACES_FILE"  # the file spans are appended to, without a collector
STDERR = "-"  # `TelemetrySettings.printed` for the console exporter
EXPORTERS_TEXT = (
    "Grove exports traces over OTLP (otlp), prints them (console, or a file with "
    f"{TRACES_FILE_VARIABLE}), or neither (none)"
)


def telemetry_settings(
    section: TelemetrySection, environ: Mapping[str, str] | None = None
) -> TelemetrySettings | None:
    """Where spans go, or None when tracing is off: off unless an OTLP endpoint is named
    (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `[telemetry]
    otlp_endpoint`), `OTEL_TRACES_EXPORTER=otlp` asks for the default one, or the spans are to
    be printed (`OTEL_TRACES_EXPORTER=console`, `GROVE_TRACES_FILE`); off whatever else says
    so with `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none` or `[telemetry] enabled =
    false`. ConfigError names a variable Grove cannot follow."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or not section.enabled:
        return None
    exporters = {name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",")}
    exporters.discard("")
    if exporters == {"none"}:
        return None
    if exporters - {"otlp", "console"}:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']}: {EXPORTERS_TEXT}")
    service_name = env.get("OTEL_SERVICE_NAME", "").strip() or section.service_name
    printed = _printed(env, exporters)
    if printed is not None:
        return TelemetrySettings(endpoint="", service_name=service_name, printed=printed)
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(variable, PROTOCOL).strip()
        if protocol != PROTOCOL:
            raise ConfigError(
                f"{variable}={protocol}: Grove exports OTLP over HTTP with protobuf "
                f"({PROTOCOL}); point the endpoint at the collector's HTTP port (4318)"
            )
    endpoint = _endpoint(section, env, asked="otlp" in exporters)
    if endpoint is None:
        return None
    headers = dict(section.headers)
    for variable in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        headers.update(_headers(variable, env.get(variable, "")))
    return TelemetrySettings(
        endpoint=endpoint, service_name=service_name, headers=tuple(sorted(headers.items()))
    )


def _printed(env: Mapping[str, str], exporters: set[str]) -> str | None:
    """Where spans are printed instead of collected: GROVE_TRACES_FILE's file (an absolute
    path), else stderr for the console exporter; None: a collector's."""
    traces_file = env.get(TRACES_FILE_VARIABLE, "").strip()
    if not traces_file and "console" not in exporters:
        return None
    if "otlp" in exporters:
        given = f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']}"
        if traces_file:
            given += f" with {TRACES_FILE_VARIABLE}"
        raise ConfigError(f"{given}: Grove sends traces to one place; {EXPORTERS_TEXT}")
    if not traces_file:
        return STDERR
    path = Path(traces_file).expanduser().absolute()
    if not path.parent.is_dir():
        raise ConfigError(
            f"{TRACES_FILE_VARIABLE}={traces_file}: the directory {path.parent} does not exist"
        )
    if path.is_dir():
        raise ConfigError(f"{TRACES_FILE_VARIABLE}={traces_file}: that is a directory")
    return str(path)


def _endpoint(section: TelemetrySection, env: Mapping[str, str], asked: bool) -> str | None:
    """The traces URL: a traces endpoint as it is, a base endpoint with /v1/traces added."""
    candidates = (
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), ""),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), TRACES_PATH),
        ("[telemetry] otlp_endpoint", section.otlp_endpoint, TRACES_PATH),
    )
    for source, url, path in candidates:
        if url and url.strip():
            problem = base_url_problem(url.strip())
            if problem:
                raise ConfigError(f"{source}: {problem}")
            return url.strip().rstrip("/") + path if path else url.strip()
    return DEFAULT_ENDPOINT + TRACES_PATH if asked else None


def _headers(variable: str, text: str) -> dict[str, str]:
    """`key1=value1,key2=value2` (values URL-encoded), as the OTLP exporter's variables hold
    them; a malformed entry is named by its position, never by its value (a token, often)."""
    headers: dict[str, str] = {}
    for index, entry in enumerate(text.split(","), start=1):
        if not entry.strip():
            continue
        key, equals, value = entry.partition("=")
        if not equals or not key.strip():
            raise ConfigError(f"{variable}: entry {index} is not KEY=VALUE")
        headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers
