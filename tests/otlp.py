"""A real OTLP/HTTP receiver for tests and benchmarks: a small http.server on a free loopback
port that decodes each ExportTraceServiceRequest with the official opentelemetry-proto.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class ReceivedSpan:
    """One span as it arrived: ids as hex (`parent` empty for a trace's first span)."""

    trace_id: str
    span_id: str
    parent: str
    name: str
    kind: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service: str


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, which) if which else None


def decoded(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status_code=span.status.code,
                        status_message=span.status.message,
                        service=str(resource.get("service.name", "")),
                    )
                )
    return spans


class Receiver:
    """What the receiver has been sent, and the request paths and headers it came with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.endpoint = ""  # http://127.0.0.1:PORT, set once listening

    def add(self, path: str, headers: dict[str, str], spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.requests.append((path, headers))
            self._spans.extend(spans)

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 30.0
    ) -> list[ReceivedSpan]:
        """The spans once `done(spans)` holds; AssertionError with what came after
        `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.spans()
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({span.name for span in spans})
                raise AssertionError(f"{len(spans)} spans after {timeout_s:g} s: {names}")
            time.sleep(0.05)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 <= length <= MAX_BODY_BYTES:
                self.send_error(413)
                return
            body = self.rfile.read(length)
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            headers = {key.lower(): value for key, value in self.headers.items()}
            receiver.add(self.path, headers, decoded(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: a test reads what arrived, not the access log

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 at a free port until the block ends."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
