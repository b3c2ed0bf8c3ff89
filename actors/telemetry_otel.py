"""Spans of Grove's agents in the GenAI semantic conventions, made and exported over OTLP/HTTP
by the OpenTelemetry SDK, imported only when tracing is on; `start_tracing` starts it.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grove.actors.telemetry import (
    NO_SPAN,
    NO_TRACING,
    Span,
    TelemetrySettings,
    TraceParent,
    Tracing,
)
from grove.providers.base import AssistantTurn, Request, ToolCallPart, Usage
from grove.providers.secrets import mask

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

# Gen AI `gen_ai.provider.name` values of Grove's providers.
PROVIDER_NAMES = {"anthropic": "anthropic", "openai": "openai", "google": "gcp.gemini"}
# Spans a process holds for export (the SDK's default, 2,048, drops spans of a large fan-out
# that ends within one export interval); OTEL_BSP_MAX_QUEUE_SIZE still sets it.
QUEUE_SPANS = 32_768
QUEUE_VARIABLE = "OTEL_BSP_MAX_QUEUE_SIZE"


@dataclass(frozen=True, slots=True)
class _Turn:
    """The traced turn this task runs: its agent and root (the Grove attributes of its
    spans) and the SpanContext of its span (their parent)."""

    agent: str
    root: str
    context: Any


# Set for the turn's task (and the tool calls it starts) while a traced turn runs, and for
# a tool call's task while its span is open: what nested spans and `current()` read. No
# OpenTelemetry context is attached and detached per span: that machinery cost more than the
# spans themselves in a fan-out.
_TURN: contextvars.ContextVar[_Turn | None] = contextvars.ContextVar("grove_turn", default=None)
_TOOL: contextvars.ContextVar[_OtelSpan | None] = contextvars.ContextVar("grove_tool", default=None)


class _OtelSpan(Span):
    """A span of a turn, handed to the batch processor as the SDK's ReadableSpan when the
    block ends; an exception out of the block marks it failed. `reset` puts back what
    entering it set."""

    def __init__(
        self,
        tracing: OtelTracing,
        name: str,
        parent: Any,
        attributes: dict[str, Any],
        kind: Any = None,
        reset: Callable[[], None] | None = None,
    ) -> None:
        self._tracing = tracing
        self.name = name
        self.parent = parent  # a SpanContext
        self.context = tracing.child_context(parent)
        self.attributes = attributes
        self.kind = kind
        self.status: Any = None
        self.reset = reset
        self.start = time.time_ns()

    def __exit__(self, kind: object, exc: object, trace: object) -> None:
        if isinstance(exc, BaseException):  # a cancelled request too
            self.fail(type(exc).__name__, str(exc) or type(exc).__name__)
        self._tracing.ended(self, time.time_ns())
        if self.reset is not None:
            self.reset()

    def replied(self, turn: AssistantTurn) -> None:
        usage = turn.usage
        attributes = self.attributes
        attributes["gen_ai.response.model"] = turn.model
        attributes.update(_usage_attributes(usage))
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if turn.response_id:
            attributes["gen_ai.response.id"] = turn.response_id
        if turn.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = (turn.stop_reason,)

    def turn_ended(self, usage: Usage, error: str | None, cancelled: bool) -> None:
        self.attributes.update(_usage_attributes(usage))
        if cancelled:
            self.fail("cancelled", "cancelled")
        elif error is not None:
            self.fail("_OTHER", error)

    def tool_failed(self) -> None:
        self.fail("tool_error", "the tool reported an error")

    def fail(self, error_type: str, text: str) -> None:
        self.attributes["error.type"] = error_type
        self.status = self._tracing.error_status(mask(text))

    def traceparent(self) -> str:
        return _traceparent(self.context)


class OtelTracing(Tracing):
    """Spans of this process, batched and exported over OTLP/HTTP by the SDK's batch
    processor and OTLP exporter (which encodes them by actors/otlp_wire.py). A root's
    `create_agent` span goes through the SDK's tracer (its sampler decides for the tree);
    the spans of turns, a thousand times as many in a fan-out, are made here as the SDK's
    ReadableSpan when they end, under their parent's sampling decision: no tracer, lock or
    attribute checks per span."""

    enabled = True

    def __init__(self, settings: TelemetrySettings) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

        from grove.actors.otlp_wire import span_exporter

        resource = Resource.create({"service.name": settings.service_name})
        self.provider = TracerProvider(resource=resource)
        exporter = span_exporter(settings.endpoint, dict(settings.headers))
        queue = None if QUEUE_VARIABLE in os.environ else QUEUE_SPANS
        self._processor = BatchSpanProcessor(exporter, max_queue_size=queue)
        self.provider.add_span_processor(self._processor)
        self.tracer: Tracer = self.provider.get_tracer("grove")
        self._readable = functools.partial(
            ReadableSpan, resource=resource, instrumentation_scope=InstrumentationScope("grove")
        )
        self._span_context = SpanContext
        self._new_span_id = self.provider.id_generator.generate_span_id
        self._client, self._internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self._unset = Status(StatusCode.UNSET)
        self._error = functools.partial(Status, StatusCode.ERROR)
        atexit.register(self.provider.shutdown)

    def create_agent(
        self, root: str, provider: str | None, model: str | None, parent: str | None
    ) -> TraceParent | None:
        attributes = _agent_attributes("create_agent", root, root, provider, model)
        span = self.tracer.start_span("create_agent", _context(parent), attributes=attributes)
        span.end()
        return TraceParent(traceparent=_traceparent(span.get_span_context()), root=root)

    def invoke_agent(
        self, agent: str, provider: str | None, model: str | None, parent: TraceParent | None
    ) -> AbstractContextManager[Span]:
        context = None if parent is None else _span_context(parent.traceparent)
        if parent is None or context is None or not context.trace_flags.sampled:
            return NO_SPAN  # not traced, or its root's trace is not sampled
        attributes = _agent_attributes("invoke_agent", agent, parent.root, provider, model)
        span = _OtelSpan(self, "invoke_agent", context, attributes)
        token = _TURN.set(_Turn(agent, parent.root, span.context))
        span.reset = lambda: _TURN.reset(token)
        return span

    def chat(self, request: Request, provider: str) -> AbstractContextManager[Span]:
        turn = _TURN.get()
        if turn is None:
            return NO_SPAN
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAMES.get(provider, provider),
            "gen_ai.request.model": request.model,
            "grove.agent.id": turn.agent,
            "grove.root.id": turn.root,
        }
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        return _OtelSpan(self, f"chat {request.model}", turn.context, attributes, self._client)

    def execute_tool(self, call: ToolCallPart) -> AbstractContextManager[Span]:
        turn = _TURN.get()
        if turn is None:
            return NO_SPAN
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "grove.agent.id": turn.agent,
            "grove.root.id": turn.root,
        }
        span = _OtelSpan(self, f"execute_tool {call.name}", turn.context, attributes)
        token = _TOOL.set(span)
        span.reset = lambda: _TOOL.reset(token)
        return span

    def current(self) -> str | None:
        span = _TOOL.get()
        return None if span is None else span.traceparent()

    def flush(self) -> None:
        self.provider.force_flush()

    def child_context(self, parent: Any) -> Any:
        """A new span's SpanContext under `parent` (same trace, flags and state)."""
        return self._span_context(
            parent.trace_id,
            self._new_span_id(),
            is_remote=False,
            trace_flags=parent.trace_flags,
            trace_state=parent.trace_state,
        )

    def error_status(self, text: str) -> Any:
        return self._error(text)

    def ended(self, span: _OtelSpan, end_ns: int) -> None:
        """Hand an ended span to the batch processor (it exports from its own thread)."""
        readable = self._readable(
            span.name,
            span.context,
            span.parent,
            attributes=span.attributes,
            kind=span.kind or self._internal,
            status=span.status or self._unset,
            start_time=span.start,
            end_time=end_ns,
        )
        self._processor.on_end(readable)


@functools.lru_cache(maxsize=1024)
def _context(traceparent: str | None) -> Any:
    """The context a traceparent names (None: none); the children of one fork share it."""
    if traceparent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


@functools.lru_cache(maxsize=1024)
def _span_context(traceparent: str) -> Any:
    """The SpanContext a traceparent names (None: not a valid one); the children of one
    fork share it."""
    from opentelemetry.trace import get_current_span

    context = get_current_span(_context(traceparent)).get_span_context()
    return context if context.is_valid else None


def _traceparent(context: Any) -> str:
    """The W3C traceparent of a SpanContext."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _agent_attributes(
    operation: str, agent: str, root: str, provider: str | None, model: str | None
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.agent.id": agent,
        **_grove_attributes(agent, root),
    }
    if provider is not None:
        attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(provider, provider)
    if model is not None:
        attributes["gen_ai.request.model"] = model
    return attributes


def _grove_attributes(agent: str, root: str) -> dict[str, str]:
    return {"grove.agent.id": agent, "grove.root.id": root}


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }


_STARTED: dict[TelemetrySettings, OtelTracing] = {}


def start_tracing(settings: TelemetrySettings | None) -> Tracing:
    """This process's tracing under `settings` (one exporter per process and settings);
    NO_TRACING when they are None."""
    if settings is None:
        return NO_TRACING
    tracing = _STARTED.get(settings)
    if tracing is None:
        tracing = _STARTED[settings] = OtelTracing(settings)
    return tracing
