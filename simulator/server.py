"""`Simulator`: the asyncio HTTP server that answers as Anthropic, OpenAI and Gemini would,
with pacing, batching of events into writes, and scripted faults.

Routing, auth order and timing live here (a stream's pacing in pacing.py); each API's JSON
lives in its vendor's package (anthropic/, openai/, google/), provider batches in batches.py
and each vendor's batch routes, the flex tier in flex.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from grove.providers.catalog import model_info
from grove.providers.errors import GroveError
from grove.providers.ratelimit import RateLimiter
from grove.simulator.anthropic.batches import AnthropicBatches
from grove.simulator.anthropic.messages import AnthropicMessages
from grove.simulator.batches import BatchBook, BatchWire, batch_route_answer
from grove.simulator.billing import Billing
from grove.simulator.caching import CacheBook
from grove.simulator.config import SimulatorConfig
from grove.simulator.directives import STATUS_FAULTS, DirectiveError
from grove.simulator.flex import FlexGate, flex_requested, unavailable
from grove.simulator.google.batches import GeminiBatches
from grove.simulator.google.caches import ExplicitCaches
from grove.simulator.google.generate import PREFIXES as GEMINI_PREFIXES
from grove.simulator.google.generate import GeminiGenerateContent
from grove.simulator.http11 import (
    HTTPRequest,
    MalformedRequest,
    read_request,
    sized_response,
)
from grove.simulator.openai.batches import OpenAIBatches
from grove.simulator.openai.chat import OpenAIChat
from grove.simulator.openai.files import OpenAIFiles
from grove.simulator.openai.responses import OpenAIResponses
from grove.simulator.pacing import sleep_until, stream_reply
from grove.simulator.script import Inbound, Plan, Planner
from grove.simulator.wire import (
    FAULT_PROBLEMS,
    JSON_CONTENT_TYPE,
    InvalidRequest,
    Reply,
    SimulatedAPI,
    dump,
)

_log = logging.getLogger(__name__)
LISTEN_BACKLOG = 4096


RECEIVED_KEPT = 64
# GET: what the simulator has billed and refused, as JSON (for benchmarks in other processes).
STATS_PATH = "/_simulator/stats"


class Simulator:
    """One server. `start()` binds (port 0: a free port), `stop()` closes every connection."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        self._planner = Planner(self.config)
        rpm, tpm = self.config.rpm, self.config.tpm
        self._limiter = RateLimiter(rpm, tpm) if rpm or tpm else None
        self.rate_limited = 0  # requests answered 429 for being over --rpm / --tpm
        self.billing = Billing()
        self.billed, self.billed_by_api = self.billing.total, self.billing.by_api
        refuse = self.config.refuse
        self.caches = CacheBook(self.config.cache_ttl_scale)
        self._gemini = GeminiGenerateContent()
        self.explicit = self._gemini.explicit = ExplicitCaches(
            self._gemini,
            ttl_scale=self.config.cache_ttl_scale,
            refuse="cached_contents" in refuse,
        )
        self._openai_chat = OpenAIChat(refuse_cache_key="prompt_cache_key" in refuse)
        anthropic = AnthropicMessages(refuse_cache_control="cache_control" in refuse)
        self._apis: tuple[SimulatedAPI, ...] = (
            anthropic,
            OpenAIResponses(refuse_cache_key="prompt_cache_key" in refuse),
            self._openai_chat,
            self._gemini,
        )
        self.batches = BatchBook(self.config, self._answer_batched)
        files = OpenAIFiles(self._openai_chat)
        self._batch_wires: tuple[BatchWire, ...] = (
            AnthropicBatches(anthropic, self.batches, self.config.batch_max_bytes),
            files,
            GeminiBatches(self._gemini, self.batches),  # before OpenAI's `/v1/batches`
            OpenAIBatches(self._openai_chat, self.batches, files),
        )
        self.flex = FlexGate(self.config.flex_unavailable)
        self._server: asyncio.Server | None = None
        # The newest request bodies, for tests that check what a client sent.
        self.received: deque[dict[str, Any]] = deque(maxlen=RECEIVED_KEPT)
        # For tests: called with a streamed reply's request before each frame that ends the
        # reply is written (its content all written): a client gone then never reads its end.
        self.before_end: Callable[[Inbound], None] | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the simulator is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """The bare origin: Grove's wires add `/v1/...` and `/v1beta/...` themselves."""
        return f"http://{self.config.host}:{self.port}"

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the simulator is already started")
        self._server = await asyncio.start_server(
            self._serve_connection, self.config.host, self.config.port, backlog=LISTEN_BACKLOG
        )
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> Simulator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # --- one connection ---------------------------------------------------------------------

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    request = await read_request(reader, writer)
                except MalformedRequest as exc:
                    body = dump({"error": {"message": exc.message, "type": "malformed_request"}})
                    headers = [("content-type", JSON_CONTENT_TYPE)]
                    writer.write(sized_response(exc.status, headers, body, keep_alive=False))
                    await writer.drain()
                    break
                if request is None or not await self._respond(request, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() cancels this connection's task; it ends here quietly, since asyncio's
            # stream callback would otherwise log the cancellation as an error.
            pass
        except Exception:
            # A fault of the simulator itself: say so in the log (never the request's
            # headers, which hold the key) and drop the connection.
            _log.exception("the simulator failed while answering; connection dropped")
            writer.transport.abort()
        finally:
            if task is not None:
                self._connections.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _respond(self, request: HTTPRequest, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection may carry another."""
        received = asyncio.get_running_loop().time()
        keep_alive = request.keep_alive
        if request.path == STATS_PATH and request.method == "GET":
            stats = Reply(status=200, body=self.stats())
            return await _send(writer, self._openai_chat, stats, keep_alive)
        if self.explicit.handles(request.path):
            return await self._cached_contents(request, writer)
        wire = next((wire for wire in self._batch_wires if wire.handles(request)), None)
        if wire is not None:
            reply = batch_route_answer(wire, request, self.config.api_key)
            return await _send(writer, wire.api, reply, keep_alive)
        api = next((api for api in self._apis if api.handles(request.path)), None)
        if api is None:
            fallback = (
                self._gemini if request.path.startswith(GEMINI_PREFIXES) else self._openai_chat
            )
            message = f"Invalid URL ({request.method} {request.path})"
            return await _send(writer, fallback, fallback.error("not_found", message), keep_alive)
        if request.method != "POST":
            reply = api.error("method_not_allowed")
            reply = Reply(status=reply.status, body=reply.body, headers=(("allow", "POST"),))
            return await _send(writer, api, reply, keep_alive)
        problem = api.authenticate(request.headers, request.query, self.config.api_key)
        if problem is not None:
            return await _send(writer, api, api.error(problem), keep_alive)
        try:
            body = json.loads(request.body)
        except (ValueError, RecursionError):
            return await _send(writer, api, api.error("bad_json"), keep_alive)
        if not isinstance(body, dict):
            error = api.error("invalid_request", "The request body must be a JSON object.")
            return await _send(writer, api, error, keep_alive)
        self.received.append(body)
        try:
            inbound = api.read(request.path, request.query, body)
            plan = self._planner.plan(inbound)
        except InvalidRequest as exc:
            error = api.error(exc.problem, exc.message, param=exc.param)
            return await _send(writer, api, error, keep_alive)
        except DirectiveError as exc:
            error = api.error("invalid_request", f"invalid [[sim]] directive: {exc}")
            return await _send(writer, api, error, keep_alive)
        window = self._window(inbound.model)
        if window is not None and inbound.input_tokens > window:
            overflow = api.context_overflow(inbound.input_tokens, window)
            return await _send(writer, api, overflow, keep_alive)
        flex = flex_requested(api.name, body)
        if flex and self.flex.refuses():
            return await _send(writer, api, unavailable(api.name), keep_alive)
        limits: tuple[tuple[str, str], ...] = ()
        if self._limiter is not None:
            admission = self._limiter.admit(inbound.input_tokens)
            limits = api.rate_limit_headers(admission)
            if not admission.allowed:
                self.rate_limited += 1
                error = api.error("rate_limited", retry_after=admission.retry_after)
                limited = Reply(
                    status=error.status, body=error.body, headers=error.headers + limits
                )
                return await _send(writer, api, limited, keep_alive)
        await sleep_until(received + plan.headers_s)
        fault = plan.fault
        if fault is not None and fault.kind in STATUS_FAULTS:
            error = api.error(FAULT_PROBLEMS[fault.kind], retry_after=fault.retry_after)
            return await _send(writer, api, error, keep_alive)
        # What this prompt reads from the caches and writes, readable once its reply begins:
        # later when more of the prompt is to be processed (`prefill_tps`).
        prefill = self.config.prefill_tps

        def first_token(read: int) -> float:
            processed = max(inbound.input_tokens - read, 0)
            return plan.ttft_s + (processed / prefill if prefill else 0.0)

        now = asyncio.get_running_loop().time()
        use = self.caches.bill(
            api.name,
            inbound.model,
            inbound.prefixes,
            now,
            lambda read: received + max(first_token(read), plan.headers_s),
        )
        plan = replace(plan, cache=use, ttft_s=first_token(use.read))
        tier = "flex" if flex else "standard"
        if not inbound.stream:
            return await self._answer_whole(
                writer, api, inbound, plan, received, keep_alive, limits, tier
            )
        return await stream_reply(
            writer,
            api,
            inbound,
            plan,
            received=received,
            keep_alive=keep_alive,
            limits=limits,
            events_per_write=self.config.events_per_write,
            before_end=self._before_end,
            bill=lambda output: self.billing.record(api.name, tier, inbound, plan, output),
        )

    def _before_end(self, inbound: Inbound) -> None:
        if self.before_end is not None:
            self.before_end(inbound)

    def _window(self, model: str) -> int | None:
        """The longest prompt the simulator takes for `model` (None: no limit): the model's
        maximum input, which is less than its window where output keeps a share for itself
        (GPT-6: 922K of 1.05M), or the configured window."""
        if self.config.context_window is not None:
            return self.config.context_window
        try:
            return model_info(model).max_input_tokens
        except GroveError:
            return None

    async def _answer_whole(
        self,
        writer: asyncio.StreamWriter,
        api: SimulatedAPI,
        inbound: Inbound,
        plan: Plan,
        received: float,
        keep_alive: bool,
        limits: tuple[tuple[str, str], ...],
        tier: str,
    ) -> bool:
        """A non-streamed answer: sent once the whole reply would have been generated."""
        interval = 1.0 / plan.tps if plan.tps > 0 else 0.0
        await sleep_until(received + plan.ttft_s + plan.content_events * interval)
        if plan.fault is not None and plan.fault.kind == "disconnect":
            writer.transport.abort()
            return False
        if plan.fault is not None and plan.fault.kind == "error_after_200":
            return await _send(writer, api, api.error("overloaded"), keep_alive)
        reply = Reply(status=200, body=api.body(plan, inbound), headers=limits)
        # Generated: billed, read or not.
        self.billing.record(api.name, tier, inbound, plan, plan.content_events)
        return await _send(writer, api, reply, keep_alive)

    def _answer_batched(self, path: str, body: dict[str, Any]) -> Reply:
        """A batched request's answer: the one it would get sent alone, whole (no pacing and no
        rate limit: batches have their own), billed on the batch tier."""
        api = next((api for api in self._apis if api.handles(path)), None)
        if api is None:
            return self._openai_chat.error("not_found", f"Invalid URL (POST {path})")
        self.received.append(body)
        try:
            inbound = api.read(path, {}, body)
            plan = self._planner.plan(inbound)
        except InvalidRequest as exc:
            return api.error(exc.problem, exc.message, param=exc.param)
        except DirectiveError as exc:
            return api.error("invalid_request", f"invalid [[sim]] directive: {exc}")
        window = self._window(inbound.model)
        if window is not None and inbound.input_tokens > window:
            return api.context_overflow(inbound.input_tokens, window)
        if plan.fault is not None and plan.fault.kind in STATUS_FAULTS:
            return api.error(FAULT_PROBLEMS[plan.fault.kind])
        now = asyncio.get_running_loop().time()
        use = self.caches.bill(api.name, inbound.model, inbound.prefixes, now, now)
        plan = replace(plan, cache=use)
        self.billing.record(api.name, "batch", inbound, plan, plan.content_events)
        return Reply(status=200, body=api.body(plan, inbound))

    def stats(self) -> dict[str, Any]:
        """What `GET /_simulator/stats` answers."""
        return {
            "rate_limited": self.rate_limited,
            "billed": self.billed,
            "billed_by_api": self.billed_by_api,
            "billed_by_tier": self.billing.by_tier,
            "flex_refused": self.flex.refused,
            "open_connections": len(self._connections),
            "cached_contents": {
                "created": self.explicit.created,
                "deleted": self.explicit.deleted,
                "live": self.explicit.live,
            },
        }

    async def _cached_contents(self, request: HTTPRequest, writer: asyncio.StreamWriter) -> bool:
        """Gemini's `cachedContents` routes: create, get, update, delete."""
        gemini, keep_alive = self._gemini, request.keep_alive
        problem = gemini.authenticate(request.headers, request.query, self.config.api_key)
        if problem is not None:
            return await _send(writer, gemini, gemini.error(problem), keep_alive)
        body: Any = None
        if request.method in ("POST", "PATCH"):
            try:
                body = json.loads(request.body)
            except (ValueError, RecursionError):
                return await _send(writer, gemini, gemini.error("bad_json"), keep_alive)
            if not isinstance(body, dict):
                error = gemini.error("invalid_request", "The request body must be a JSON object.")
                return await _send(writer, gemini, error, keep_alive)
        reply = self.explicit.answer(request.method, request.path, body)
        return await _send(writer, gemini, reply, keep_alive)


async def _send(
    writer: asyncio.StreamWriter, api: SimulatedAPI, reply: Reply, keep_alive: bool
) -> bool:
    headers = [("content-type", reply.content_type), *api.response_headers(), *reply.headers]
    payload = dump(reply.body) if reply.raw is None else reply.raw
    writer.write(sized_response(reply.status, headers, payload, keep_alive=keep_alive))
    await writer.drain()
    return keep_alive
