"""Anthropic's Message Batches as the simulator speaks them: create, list, retrieve, cancel and
delete under `/v1/messages/batches`, results as JSONL at the batch's `results_url`.

Each request's `params` are checked as it is processed, as the API does: a request the Messages
API refuses alone is an `errored` result carrying that refusal.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from grove.simulator.batches import Batch, BatchBook, BatchedRequest, BatchResult
from grove.simulator.http11 import HTTPRequest
from grove.simulator.wire import BINARY_CONTENT_TYPE, Reply, SimulatedAPI, dump, random_id

PATH = "/v1/messages/batches"
_ROUTE = re.compile(r"/v1/messages/batches(?:/(?P<id>[^/]+)(?P<action>/results|/cancel)?)?")
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# The API's limits on one batch (docs: "Batch limitations"): 100,000 requests or 256 MB.
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024
EXPIRES_AFTER = timedelta(hours=24)
DEFAULT_PAGE = 20
MAX_PAGE = 1000


class AnthropicBatches:
    """The `/v1/messages/batches` routes over `book`, with `api`'s auth and errors."""

    vendor = "anthropic"

    def __init__(self, api: SimulatedAPI, book: BatchBook, max_bytes: int | None = None) -> None:
        self.api = api
        self._book = book
        self._max_bytes = MAX_BYTES if max_bytes is None else max_bytes

    def handles(self, request: HTTPRequest) -> bool:
        return _ROUTE.fullmatch(request.path) is not None

    def answer(self, request: HTTPRequest, body: Any) -> Reply:
        route = _ROUTE.fullmatch(request.path)
        assert route is not None, "the server routes only handled paths here"
        batch_id, action = route["id"], route["action"]
        if batch_id is None:
            if request.method == "POST":
                return self._create(request, body)
            if request.method == "GET":
                return self._list(request)
            return self.api.error("method_not_allowed")
        batch = self._book.find(self.vendor, batch_id)
        if batch is None:
            return self.api.error("not_found")
        if action is None and request.method == "GET":
            return Reply(status=200, body=self._json(batch, request))
        if action is None and request.method == "DELETE":
            if not batch.ended:
                return self.api.error(
                    "invalid_request",
                    f"Batch {batch_id} cannot be deleted while it is in progress. Cancel it first.",
                )
            self._book.forget(batch)
            return Reply(status=200, body={"id": batch_id, "type": "message_batch_deleted"})
        if action == "/cancel" and request.method == "POST":
            self._book.cancel(batch)
            return Reply(status=200, body=self._json(batch, request))
        if action == "/results" and request.method == "GET":
            if not batch.ended:
                return self.api.error(
                    "invalid_request", f"Batch {batch_id} has not finished processing."
                )
            lines = [dump(self._result_line(result)) for result in batch.results]
            return Reply(
                status=200,
                body={},
                raw=b"".join(line + b"\n" for line in lines),
                content_type=BINARY_CONTENT_TYPE,
            )
        return self.api.error("method_not_allowed")

    def _create(self, request: HTTPRequest, body: Any) -> Reply:
        if not isinstance(body, dict):
            return self.api.error("invalid_request", "The request body must be a JSON object.")
        given = body.get("requests")
        if not isinstance(given, list) or not given:
            return self.api.error("invalid_request", "requests: Field required (at least one)")
        if len(request.body) > self._max_bytes:  # refused before it reaches the API
            return self.api.error("request_too_large")
        if len(given) > MAX_REQUESTS:
            return self.api.error(
                "invalid_request", f"A batch may hold at most {MAX_REQUESTS} requests."
            )
        requests: list[BatchedRequest] = []
        seen: set[str] = set()
        for index, item in enumerate(given):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or _CUSTOM_ID.fullmatch(custom_id) is None:
                return self.api.error(
                    "invalid_request",
                    f"requests.{index}.custom_id: String should match pattern "
                    "'^[a-zA-Z0-9_-]{1,64}$'",
                )
            if custom_id in seen:
                return self.api.error(
                    "invalid_request",
                    f"Duplicate custom_id '{custom_id}': each request in a batch needs its own.",
                )
            if not isinstance(params, dict):
                return self.api.error("invalid_request", f"requests.{index}.params: Field required")
            seen.add(custom_id)
            requests.append(BatchedRequest(custom_id, "/v1/messages", params))
        batch = self._book.create(self.vendor, random_id("msgbatch_01", 22), requests)
        return Reply(status=200, body=self._json(batch, request))

    def _list(self, request: HTTPRequest) -> Reply:
        batches = self._book.newest_first(self.vendor)
        after = request.query.get("after_id")
        if after is not None:
            ids = [batch.id for batch in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        limit_text = request.query.get("limit", str(DEFAULT_PAGE))
        limit = int(limit_text) if limit_text.isdigit() else 0
        if not 1 <= limit <= MAX_PAGE:
            return self.api.error(
                "invalid_request", f"limit: Input should be between 1 and {MAX_PAGE}"
            )
        page = batches[:limit]
        return Reply(
            status=200,
            body={
                "data": [self._json(batch, request) for batch in page],
                "has_more": len(batches) > limit,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            },
        )

    def _json(self, batch: Batch, request: HTTPRequest) -> dict[str, Any]:
        ended = batch.ended
        if ended:
            status = "ended"
        elif batch.cancel_requested_at is not None:
            status = "canceling"
        else:
            status = "in_progress"
        host = request.headers.get("host", "127.0.0.1")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {
                "processing": 0 if ended else len(batch.requests),
                "succeeded": batch.count("succeeded"),
                "errored": batch.count("errored"),
                "canceled": batch.count("canceled"),
                "expired": batch.count("expired"),
            },
            "ended_at": _time(batch.ended_at),
            "created_at": _time(batch.created_at),
            "expires_at": _time(batch.created_at + EXPIRES_AFTER.total_seconds()),
            "archived_at": None,
            "cancel_initiated_at": _time(batch.cancel_requested_at),
            "results_url": f"http://{host}{PATH}/{batch.id}/results" if ended else None,
        }

    def _result_line(self, result: BatchResult) -> dict[str, Any]:
        outcome: dict[str, Any] = {"type": result.outcome}
        if result.outcome == "succeeded" and result.reply is not None:
            outcome["message"] = result.reply.body
        elif result.outcome == "errored":
            reply = result.reply or self.api.error("server_error")
            outcome["error"] = reply.body
        return {"custom_id": result.request.custom_id, "result": outcome}


def _time(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
