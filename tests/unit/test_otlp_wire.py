"""The spans Grove exports, encoded straight to the wire (actors/otlp_wire.py): decoded with
opentelemetry-proto, each batch is the very request the SDK's own encoder makes of it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from grove.actors.otlp_wire import (
    WireExporter,
    encode_request,
    scalar_attribute,
    span_exporter,
    varint,
)
from tests.otlp import decoded as received
from tests.otlp import otlp_receiver

REMOTE = SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C,
    0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(1),
    trace_state=TraceState([("vendor", "value")]),
)


def decoded(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(encode_request(spans))
    return request


def traced(resource: Resource) -> tuple[trace.Tracer, InMemorySpanExporter]:
    provider = TracerProvider(resource=resource)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider.get_tracer("grove", "1.0", schema_url="https://example.test/s"), memory


def turn_span(
    name: str, parent: SpanContext, attributes: dict[str, Any], **more: Any
) -> ReadableSpan:
    """A span made as the hosts make a turn's (actors/telemetry_otel.py `ended`)."""
    context = SpanContext(parent.trace_id, 0x1234_5678_9ABC_DEF0, is_remote=False)
    return ReadableSpan(
        name,
        context,
        parent,
        resource=Resource.create({"service.name": "grove"}),
        instrumentation_scope=InstrumentationScope("grove"),
        attributes=attributes,
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_001_500_000_000,
        **more,
    )


def test_a_fan_outs_spans_and_a_traced_roots_are_what_the_sdk_would_send() -> None:
    tracer, memory = traced(Resource.create({"service.name": "grove", "deployment": "test"}))
    context = trace.set_span_in_context(trace.NonRecordingSpan(REMOTE))
    root = tracer.start_span("create_agent", context, attributes={"gen_ai.agent.id": "r"})
    root.end()
    with tracer.start_as_current_span("plain", kind=SpanKind.SERVER) as plain:
        plain.set_status(Status(StatusCode.OK))
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "grove.root.id": "r",
    }
    spans = [
        *memory.get_finished_spans(),
        turn_span("invoke_agent", REMOTE, {**common, "gen_ai.usage.input_tokens": 12}),
        turn_span(
            "chat claude",
            root.get_span_context(),
            {**common, "gen_ai.response.finish_reasons": ("end_turn",), "cost": 0.25},
            kind=SpanKind.CLIENT,
            status=Status(StatusCode.ERROR, "the provider refused"),
        ),
        turn_span("execute_tool read", REMOTE, {**common, "ok": False, "limit": -3}),
    ]
    assert decoded(spans) == encode_spans(spans)
    made = scalar_attribute.cache_info()
    assert decoded(spans[:1]) == encode_spans(spans[:1])  # from the attributes made before
    assert scalar_attribute.cache_info().hits > made.hits
    assert scalar_attribute.cache_info().misses == made.misses
    assert encode_request([]) == b""


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text()
    | st.binary()
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(attributes=st.dictionaries(st.text(max_size=8), values, max_size=6))
def test_any_attributes_encode_as_the_sdk_encodes_them(attributes: dict[str, Any]) -> None:
    spans = [turn_span("any", REMOTE, attributes), turn_span("again", REMOTE, attributes)]
    assert decoded(spans) == encode_spans(spans)


@given(st.integers(0, 2**64 - 1))
def test_varints_are_protobufs(number: int) -> None:
    from google.protobuf.internal.encoder import _VarintBytes

    assert varint(number) == _VarintBytes(number)


def test_the_exporter_sends_through_the_sdks_client() -> None:
    """Over real HTTP to a receiver on loopback: the SDK client's path, headers and content
    type, a body that decodes to the SDK encoder's request; nothing once shut down."""
    spans = [turn_span("invoke_agent", REMOTE, {"gen_ai.operation.name": "chat", "n": 3})]
    with otlp_receiver() as receiver:
        exporter = span_exporter(f"{receiver.endpoint}/v1/traces", {"authorization": "x"})
        assert isinstance(exporter, WireExporter)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()  # type: ignore[no-untyped-call]
        assert exporter.export(spans) is SpanExportResult.FAILURE
        ((path, headers),) = receiver.requests
        assert receiver.spans() == received(encode_spans(spans).SerializeToString())
    assert path == "/v1/traces"
    assert headers["authorization"] == "x"
    assert headers["content-type"] == "application/x-protobuf"
