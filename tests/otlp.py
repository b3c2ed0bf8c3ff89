"""A real OTLP/HTTP receiver for tests and benchmarks: a small http.server on a free loopback
port that decodes each ExportTraceServiceRequest with the official opentelemetry-proto; in
this process, or in one of its own (`python -m tests.otlp`, what a benchmark uses).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

MAX_BODY_BYTES = 64 * 1024 * 1024
SPANS_PATH = "/spans"  # GET ?since=N: the spans received from the N-th on, as JSON
START_TIMEOUT_S = 30.0


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

    def spans(self, since: int = 0) -> list[ReceivedSpan]:
        with self._lock:
            return self._spans[since:]

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

        def do_GET(self) -> None:
            path, _, since = self.path.partition("?since=")
            if path != SPANS_PATH or not since.isdigit():
                self.send_error(404)
                return
            spans = [asdict(span) for span in receiver.spans(int(since))]
            body = json.dumps(spans).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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


class ReceiverProcess(Receiver):
    """A receiver in a process of its own (its decoding is not the traced program's CPU):
    what it has been sent, fetched from it as it comes."""

    def spans(self, since: int = 0) -> list[ReceivedSpan]:
        with self._lock:
            url = f"{self.endpoint}{SPANS_PATH}?since={len(self._spans)}"
            with urllib.request.urlopen(url, timeout=30) as response:
                arrived = json.loads(response.read())
            self._spans.extend(ReceivedSpan(**span) for span in arrived)
            return self._spans[since:]


@contextmanager
def otlp_receiver_process() -> Iterator[Receiver]:
    """`python -m tests.otlp` listening on 127.0.0.1 at a free port until the block ends,
    stopped through its handle."""
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.otlp"], cwd=root, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        receiver = ReceiverProcess()
        receiver.endpoint = process.stdout.readline().strip()
        if not receiver.endpoint.startswith("http://127.0.0.1:"):
            raise RuntimeError("the OTLP receiver process did not start")
        yield receiver
    finally:
        assert process.stdin is not None
        process.stdin.close()  # it stops when its input ends
        try:
            process.wait(START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    with otlp_receiver() as serving:
        print(serving.endpoint, flush=True)
        sys.stdin.read()
