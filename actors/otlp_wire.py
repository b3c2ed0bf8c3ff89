"""The OTLP/HTTP span exporter of Grove's processes: the SDK's, with a batch of spans encoded
straight to the protobuf wire format instead of into a protobuf message per span and attribute.

A fan-out ends two spans a child whose attributes mostly repeat (the operation, provider,
model, root): each attribute's bytes are made once and reused, and the resource and scope
once per batch. Imported only where tracing is on (it imports the SDK).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

# opentelemetry/proto/trace/v1/trace.proto: Span.SpanKind and Span.flags.
SPAN_KINDS = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
HAS_IS_REMOTE = 0x100
IS_REMOTE = 0x200
SCALARS = (str, int, bool, float)
DOUBLE = struct.Struct("<d")
ONE_BYTE = tuple(bytes((number,)) for number in range(0x80))


def varint(number: int) -> bytes:
    """A protobuf varint (an int64 below zero as its 64-bit two's complement)."""
    if 0 <= number < 0x80:
        return ONE_BYTE[number]
    number &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes or a nested message."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def any_value(value: Any) -> bytes:
    """An AnyValue's body, typed as the SDK's encoder types it."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return field(1, value.encode())
    if isinstance(value, int):
        return b"\x18" + varint(value)
    if isinstance(value, float):
        return b"\x21" + DOUBLE.pack(value)
    if isinstance(value, bytes):
        return field(7, value)
    if isinstance(value, Sequence):
        return field(5, b"".join(field(1, any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return field(6, b"".join(field(1, key_value(str(k), v)) for k, v in value.items()))
    raise TypeError(f"an attribute cannot be a {type(value).__name__}")


def key_value(key: str, value: Any) -> bytes:
    return field(1, key.encode()) + field(2, any_value(value))


@functools.lru_cache(maxsize=4096)
def scalar_attribute(number: int, key: str, value: Any, kind: str) -> bytes:
    """A KeyValue field of a scalar, made once (its type is part of the key: 1 is not True)."""
    return field(number, key_value(key, value))


def attributes(number: int, values: Mapping[str, Any] | None) -> bytes:
    """`values` as repeated KeyValue fields numbered `number`."""
    if not values:
        return b""
    return b"".join(
        scalar_attribute(number, key, value, type(value).__name__)
        if type(value) in SCALARS
        else field(number, key_value(key, value))
        for key, value in values.items()
    )


def span_bytes(span: ReadableSpan) -> bytes:
    """One Span message's body, field for field what the SDK's encoder gives."""
    if span.events or span.links:
        raise ValueError("spans with events or links are not encoded here")
    context, parent = span.context, span.parent
    assert context is not None and span.start_time is not None and span.end_time is not None
    parts = [
        b"\x0a\x10",
        context.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        context.span_id.to_bytes(8, "big"),
    ]
    if context.trace_state:
        state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
        parts.append(field(3, state.encode()))
    if parent is not None:
        parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    parts += (
        field(5, span.name.encode()),
        b"\x30",
        varint(SPAN_KINDS[span.kind]),
        b"\x39",
        span.start_time.to_bytes(8, "little"),
        b"\x41",
        span.end_time.to_bytes(8, "little"),
        attributes(9, span.attributes),
    )
    if span.dropped_attributes:
        parts += (b"\x50", varint(span.dropped_attributes))
    status = span.status
    message = field(2, status.description.encode()) if status.description else b""
    code = status.status_code.value
    parts.append(field(15, message + (b"\x18" + varint(code) if code else b"")))
    flags = HAS_IS_REMOTE | (IS_REMOTE if parent is not None and parent.is_remote else 0)
    parts += (b"\x85\x01", flags.to_bytes(4, "little"))
    return b"".join(parts)


def scope_bytes(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return b""
    name = field(1, scope.name.encode()) if scope.name else b""
    version = field(2, scope.version.encode()) if scope.version else b""
    return name + version + attributes(3, scope.attributes)


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """An ExportTraceServiceRequest of `spans`, grouped by resource and scope as the SDK
    groups them (each resource's hash, a JSON dump, taken once per object, not per span)."""
    groups: dict[Resource, dict[InstrumentationScope | None, list[bytes]]] = {}
    same: dict[tuple[int, int], list[bytes]] = {}  # by the ids of a resource and a scope
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        encoded = same.get((id(resource), id(scope)))
        if encoded is None:
            encoded = groups.setdefault(resource, {}).setdefault(scope, [])
            same[id(resource), id(scope)] = encoded
        encoded.append(field(2, span_bytes(span)))
    requests = []
    for resource, scopes in groups.items():
        resource_spans = field(1, attributes(1, resource.attributes))
        for scope, encoded in scopes.items():
            scope_spans = field(1, scope_bytes(scope)) + b"".join(encoded)
            if scope is not None and scope.schema_url:
                scope_spans += field(3, scope.schema_url.encode())
            resource_spans += field(2, scope_spans)
        if resource.schema_url:
            resource_spans += field(3, resource.schema_url.encode())
        requests.append(field(1, resource_spans))
    return b"".join(requests)


class WireExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (its endpoint, headers, compression, retries, timeout),
    sending what `encode_request` makes."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        sent = self._client.export(encode_request(spans))
        return SpanExportResult.SUCCESS if sent.success else SpanExportResult.FAILURE


def span_exporter(endpoint: str, headers: Mapping[str, str]) -> SpanExporter:
    """The exporter of a process's spans: `WireExporter`, or the SDK's own where its sending
    part is not where this SDK version keeps it."""
    exporter = WireExporter(endpoint=endpoint, headers=dict(headers))
    if hasattr(exporter, "_client") and hasattr(exporter, "_shutdown"):
        return exporter
    return OTLPSpanExporter(endpoint=endpoint, headers=dict(headers))
