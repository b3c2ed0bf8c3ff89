"""Tracing as hosts and the supervisor see it: `Tracing` (off: does nothing, no SDK imported),
the `TraceParent` a tree's records carry; the spans, and `start_tracing`, are telemetry_otel.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from grove.providers.base import AssistantTurn, Request, ToolCallPart, Usage

TRACE_KEY = "trace"  # where a record's metadata keeps its TraceParent
TRACES_PATH = "/v1/traces"


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetrySettings:
    """Where a process sends its spans (the OTLP/HTTP traces URL, with `headers`), the
    `service.name` they carry, and whether they are printed rather than collected."""

    endpoint: str
    service_name: str = "grove"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Spans printed by the process that starts Grove instead of sent to a collector: to this
    # file, or to its stderr ("-"); `endpoint` is then its printer's (supervisor/trace_printer.py).
    printed: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceParent:
    """Where an agent's turns hang in its tree's trace: a W3C `traceparent` (its root's
    `create_agent` span, or the span that forked it) and the root's uuid."""

    traceparent: str
    root: str

    def to_data(self) -> dict[str, str]:
        return {"traceparent": self.traceparent, "root": self.root}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> TraceParent | None:
        """The TraceParent a record's metadata keeps (None: its tree is not traced)."""
        data = metadata.get(TRACE_KEY)
        if not isinstance(data, dict):
            return None
        return cls(traceparent=str(data["traceparent"]), root=str(data["root"]))


class Span:
    """One span, or nothing when tracing is off (this class: every method does nothing)."""

    def __enter__(self) -> Span:
        return self

    def __exit__(self, kind: object, exc: object, trace: object) -> None:
        return None

    def replied(self, turn: AssistantTurn) -> None:
        """A `chat` span's reply: its model, id, finish reason and usage."""

    def turn_ended(self, usage: Usage, error: str | None, cancelled: bool) -> None:
        """An `invoke_agent` span's outcome: what the turn used, how it failed."""

    def tool_failed(self) -> None:
        """An `execute_tool` span's tool reported an error to the model."""


NO_SPAN = Span()


class Tracing:
    """What a process traces. This class traces nothing and costs a method call per span."""

    enabled = False

    def create_agent(
        self, root: str, provider: str | None, model: str | None, parent: str | None
    ) -> TraceParent | None:
        """A root's `create_agent` span (under `parent`, a caller's traceparent), ended at
        once: its context, under which the root's tree hangs (None: not traced)."""
        return None

    def invoke_agent(
        self, agent: str, provider: str | None, model: str | None, parent: TraceParent | None
    ) -> AbstractContextManager[Span]:
        """The span of one turn of `agent`, under `parent`; the turn's own spans nest in it."""
        return NO_SPAN

    def chat(self, request: Request, provider: str) -> AbstractContextManager[Span]:
        """The span of one provider request, inside a traced turn."""
        return NO_SPAN

    def execute_tool(self, call: ToolCallPart) -> AbstractContextManager[Span]:
        """The span of one tool call, inside a traced turn."""
        return NO_SPAN

    def current(self) -> str | None:
        """The traceparent of the span in progress here (a fork's), if any."""
        return None

    def flush(self) -> None:
        """Export every ended span now."""


NO_TRACING = Tracing()


def caller_traceparent() -> str | None:
    """The traceparent of the span a program calling Grove has open, when it traces with
    OpenTelemetry itself (so a root's trace joins the caller's); None otherwise."""
    import sys

    if "opentelemetry.trace" not in sys.modules:
        return None  # the program does not trace: nothing to import
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")
