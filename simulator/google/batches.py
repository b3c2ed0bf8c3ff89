"""Gemini's batch mode as the simulator speaks it: `models/{model}:batchGenerateContent` with
inline requests, and get, list, cancel and delete of `batches/{id}` (under /v1beta/ or /v1/).

Answers come back inline in the batch, in the order of its requests, as the API gives them; a
batch whose drawn share of expired requests is not zero expires whole (the API expires batches,
not requests), with no output.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from grove.simulator.batches import Batch, BatchBook, BatchedRequest, BatchResult
from grove.simulator.google.generate import GeminiGenerateContent
from grove.simulator.http11 import HTTPRequest
from grove.simulator.wire import Reply, random_id

_CREATE = re.compile(r"/(?P<version>v1(?:beta)?)/models/(?P<model>[^/:]+):batchGenerateContent")
_BATCH = re.compile(r"/v1(?:beta)?/batches(?:/(?P<id>[^/:]+)(?P<cancel>:cancel)?)?")
_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
# The API's limit on a batch made of inline requests: 20 MB in all.
MAX_INLINE_BYTES = 20 * 1024 * 1024


class GeminiBatches:
    """The batch routes over `book`, with `api`'s (Gemini's) keys and errors."""

    vendor = "google"

    def __init__(self, api: GeminiGenerateContent, book: BatchBook) -> None:
        self.api = api
        self._book = book

    def handles(self, request: HTTPRequest) -> bool:
        """Batch creation, and `batches/...` asked with a Gemini key (OpenAI's Batch API has
        `/v1/batches/...` too)."""
        if _CREATE.fullmatch(request.path) is not None:
            return True
        keyed = "x-goog-api-key" in request.headers or "key" in request.query
        return _BATCH.fullmatch(request.path) is not None and keyed

    def answer(self, request: HTTPRequest, body: Any) -> Reply:
        create = _CREATE.fullmatch(request.path)
        if create is not None:
            if request.method != "POST":
                return self.api.error("method_not_allowed")
            return self._create(create["version"], create["model"], body, len(request.body))
        route = _BATCH.fullmatch(request.path)
        assert route is not None, "the server routes only handled paths here"
        if route["id"] is None:
            if request.method != "GET":
                return self.api.error("method_not_allowed")
            batches = [self._json(batch) for batch in self._book.newest_first(self.vendor)]
            return Reply(status=200, body={"operations": batches} if batches else {})
        batch = self._book.find(self.vendor, route["id"])
        if batch is None:
            return self.api.error("not_found")
        if route["cancel"] is not None and request.method == "POST":
            self._book.cancel(batch)
            return Reply(status=200, body={})
        if route["cancel"] is None and request.method == "GET":
            return Reply(status=200, body=self._json(batch))
        if route["cancel"] is None and request.method == "DELETE":
            self._book.forget(batch)
            return Reply(status=200, body={})
        return self.api.error("method_not_allowed")

    def _create(self, version: str, model: str, body: Any, size: int) -> Reply:
        batch_body = body.get("batch") if isinstance(body, dict) else None
        if not isinstance(batch_body, dict):
            return self.api.error(
                "invalid_request", "* BatchGenerateContentRequest.batch: required"
            )
        config = batch_body.get("inputConfig", batch_body.get("input_config"))
        holder = config.get("requests") if isinstance(config, dict) else None
        inline = holder.get("requests") if isinstance(holder, dict) else None
        if not isinstance(inline, list) or not inline:
            return self.api.error(
                "invalid_request",
                "The simulator takes inline requests only: batch.inputConfig.requests.requests.",
            )
        if size > MAX_INLINE_BYTES:
            return self.api.error(
                "invalid_request",
                f"Inline batch requests may hold at most {MAX_INLINE_BYTES} bytes; use a file.",
            )
        path = f"/{version}/models/{model}:generateContent"
        requests: list[BatchedRequest] = []
        for index, item in enumerate(inline):
            request = item.get("request") if isinstance(item, dict) else None
            if not isinstance(request, dict):
                return self.api.error(
                    "invalid_request",
                    f"* batch.input_config.requests.requests[{index}].request: required",
                )
            requests.append(BatchedRequest(str(index), path, request, item.get("metadata")))
        details = {"model": f"models/{model}", "displayName": batch_body.get("displayName")}
        batch_id = random_id("", 24, _ID_ALPHABET)
        batch = self._book.create(self.vendor, batch_id, requests, details)
        return Reply(status=200, body=self._json(batch))

    def _json(self, batch: Batch) -> dict[str, Any]:
        state = _state(batch)
        total = len(batch.requests)
        stats: dict[str, str] = {"requestCount": str(total)}
        if batch.ended:
            succeeded = batch.count("succeeded")
            stats["successfulRequestCount"] = str(succeeded)
            stats["failedRequestCount"] = str(total - succeeded)
        else:
            stats["pendingRequestCount"] = str(total)
        updated = batch.ended_at or batch.cancel_requested_at or batch.created_at
        metadata: dict[str, Any] = {
            "model": batch.details["model"],
            "displayName": batch.details["displayName"],
            "createTime": _time(batch.created_at),
            "updateTime": _time(updated),
            "batchStats": stats,
            "state": state,
            "name": f"batches/{batch.id}",
        }
        operation: dict[str, Any] = {"name": f"batches/{batch.id}", "metadata": metadata}
        if batch.ended:
            metadata["endTime"] = _time(batch.ended_at)
            operation["done"] = True
        if state == "BATCH_STATE_SUCCEEDED":
            order = {request.custom_id: index for index, request in enumerate(batch.requests)}
            results = sorted(batch.results, key=lambda result: order[result.request.custom_id])
            output = {"inlinedResponses": {"inlinedResponses": [self._inline(r) for r in results]}}
            metadata["output"] = output
            operation["response"] = output
        return operation

    def _inline(self, result: BatchResult) -> dict[str, Any]:
        reply = result.reply or self.api.error("server_error")
        inline: dict[str, Any] = (
            {"response": reply.body} if result.outcome == "succeeded" else reply.body
        )
        if result.request.metadata is not None:
            inline["metadata"] = result.request.metadata
        return inline


def _state(batch: Batch) -> str:
    if not batch.ended:
        return "BATCH_STATE_RUNNING"
    if batch.count("canceled"):
        return "BATCH_STATE_CANCELLED"
    if batch.count("expired"):
        return "BATCH_STATE_EXPIRED"
    return "BATCH_STATE_SUCCEEDED"


def _time(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
