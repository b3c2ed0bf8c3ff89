"""Traces seen without a collector: a loopback OTLP/HTTP receiver in the process that starts
Grove, writing each span it gets from the supervisor and the hosts as one line of JSON.

Spans are made in Ray's worker processes, whose stdout is Ray's log, not the terminal: they
export to this receiver as to a collector, and it prints them on stderr or to a file, in the
form of the SDK's console exporter (`ReadableSpan.to_json`) on one line.
"""

from __future__ import annotations

import gzip
import secrets
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from grove.actors.telemetry import TRACES_PATH, TelemetrySettings
from grove.supervisor.telemetry import STDERR

MAX_BODY_BYTES = 64 * 1024 * 1024  # an export batch of a large fan-out is a few MB
PROTOBUF = "application/x-protobuf"
_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "": lambda body: body,
    "identity": lambda body: body,
    "gzip": gzip.decompress,
    "deflate": zlib.decompress,
}


@contextmanager
def printing_spans(settings: TelemetrySettings) -> Iterator[TelemetrySettings]:
    """While the block runs, a receiver printing the spans sent to it where `settings.printed`
    says; the settings to hand to the supervisor and hosts (its URL, and a token of its own
    that only they know, so another local user's process cannot print on this terminal)."""
    token = secrets.token_hex(16)
    with _output(settings.printed or STDERR) as output:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(output, threading.Lock(), token))
        server.daemon_threads = True
        serving = threading.Thread(target=server.serve_forever, name="grove-trace-printer")
        serving.start()
        try:
            yield replace(
                settings,
                endpoint=f"http://127.0.0.1:{server.server_address[1]}{TRACES_PATH}",
                headers=(("authorization", f"Bearer {token}"),),
            )
        finally:
            server.shutdown()
            serving.join()
            server.server_close()


@contextmanager
def _output(printed: str) -> Iterator[TextIO]:
    if printed == STDERR:
        yield sys.stderr
        return
    with open(printed, "a", encoding="utf-8") as traces_file:
        yield traces_file


def _handler(output: TextIO, lock: threading.Lock, token: str) -> type[BaseHTTPRequestHandler]:
    class SpanPrinter(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != TRACES_PATH:
                self._answer(404)
            elif self.headers.get("authorization") != f"Bearer {token}":
                self._answer(401)
            else:
                self._print(self._body())

        def _body(self) -> bytes | None:
            length = int(self.headers.get("content-length") or 0)
            decompress = _DECOMPRESS.get(self.headers.get("content-encoding", "").lower())
            if not 0 < length <= MAX_BODY_BYTES or decompress is None:
                return None
            try:
                return decompress(self.rfile.read(length))
            except (OSError, EOFError, zlib.error):
                return None

        def _print(self, body: bytes | None) -> None:
            lines = None if body is None else span_lines(body)
            if lines is None:
                self._answer(400)
                return
            with lock:
                output.write("".join(line + "\n" for line in lines))
                output.flush()
            self._answer(200, _empty_response())

        def _answer(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("content-type", PROTOBUF)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Nothing: requests are not the terminal's business."""

    return SpanPrinter


def _empty_response() -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    return bytes(ExportTraceServiceResponse().SerializeToString())


def span_lines(body: bytes) -> list[str] | None:
    """Each span of an OTLP ExportTraceServiceRequest as the SDK's console exporter writes it
    (`ReadableSpan.to_json`), on one line; None when `body` is not such a request."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError:
        return None
    return [
        readable.to_json(indent=None)
        for resource_spans in request.resource_spans
        for readable in _readable_spans(resource_spans)
    ]


def _readable_spans(resource_spans: Any) -> Iterator[Any]:
    """The SDK's ReadableSpan of each span of one ResourceSpans message."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = Resource(_attributes(resource_spans.resource.attributes))
    for scope_spans in resource_spans.scope_spans:
        scope = InstrumentationScope(scope_spans.scope.name, scope_spans.scope.version or None)
        for span in scope_spans.spans:
            trace_id = int.from_bytes(span.trace_id, "big")
            flags = TraceFlags(span.flags & 0xFF)
            context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), False, flags)
            parent = None
            if span.parent_span_id:
                parent_id = int.from_bytes(span.parent_span_id, "big")
                parent = SpanContext(trace_id, parent_id, False, flags)
            failed = span.status.code == StatusCode.ERROR.value
            status = Status(StatusCode.ERROR, span.status.message) if failed else Status()
            yield ReadableSpan(
                span.name,
                context,
                parent,
                resource=resource,
                attributes=_attributes(span.attributes),
                kind=SpanKind(max(span.kind - 1, 0)),  # OTLP counts from 1 (0: unspecified)
                status=status,
                start_time=span.start_time_unix_nano,
                end_time=span.end_time_unix_nano,
                instrumentation_scope=scope,
            )


def _attributes(key_values: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in key_values}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return str({item.key: _value(item.value) for item in value.kvlist_value.values})
    return getattr(value, which) if which else None
