"""OpenAI's Batch API as the simulator speaks it: create, list, retrieve and cancel under
`/v1/batches`, over JSONL files kept by files.py; results in an output and an error file.

An input file is checked line by line when its batch is made: a line that is not JSON, lacks a
`custom_id`, repeats one or names another endpoint fails the batch (`status: "failed"`, the
lines in `errors`), as the API fails one in validation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from grove.simulator.batches import Batch, BatchBook, BatchedRequest, BatchResult
from grove.simulator.http11 import HTTPRequest
from grove.simulator.openai.chat import OpenAIChat
from grove.simulator.openai.files import OpenAIFiles
from grove.simulator.wire import Reply, dump, random_id

_ROUTE = re.compile(r"/v1/batches(?:/(?P<id>[^/]+)(?P<cancel>/cancel)?)?")
ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
COMPLETION_WINDOW = "24h"
WINDOW_S = 24 * 3600
# The API's limits on one input file: 50,000 requests, 200 MB.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
_HEX = "0123456789abcdef"
# How the error file reports requests a batch never ran (the codes its docs list).
NOT_RUN = {
    "expired": {
        "code": "batch_expired",
        "message": "This request could not be executed before the completion window expired.",
    },
    "canceled": {
        "code": "batch_cancelled",
        "message": "This request was not executed because the batch was cancelled.",
    },
}


class OpenAIBatches:
    """The `/v1/batches` routes over `book`, reading and writing files in `files`."""

    vendor = "openai"

    def __init__(self, api: OpenAIChat, book: BatchBook, files: OpenAIFiles) -> None:
        self.api = api
        self._book = book
        self._files = files

    def handles(self, request: HTTPRequest) -> bool:
        return _ROUTE.fullmatch(request.path) is not None

    def answer(self, request: HTTPRequest, body: Any) -> Reply:
        route = _ROUTE.fullmatch(request.path)
        assert route is not None, "the server routes only handled paths here"
        batch_id = route["id"]
        if batch_id is None:
            if request.method == "POST":
                return self._create(body)
            if request.method == "GET":
                data = [self._json(batch) for batch in self._book.newest_first(self.vendor)]
                return Reply(
                    status=200,
                    body={
                        "object": "list",
                        "data": data,
                        "first_id": data[0]["id"] if data else None,
                        "last_id": data[-1]["id"] if data else None,
                        "has_more": False,
                    },
                )
            return self.api.error("method_not_allowed")
        batch = self._book.find(self.vendor, batch_id)
        if batch is None:
            return self.api.error("not_found", f"No such Batch object: {batch_id}", param="id")
        if route["cancel"] is not None and request.method == "POST":
            self._book.cancel(batch)
            return Reply(status=200, body=self._json(batch))
        if route["cancel"] is None and request.method == "GET":
            return Reply(status=200, body=self._json(batch))
        return self.api.error("method_not_allowed")

    def _create(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return self.api.error("invalid_request", "The request body must be a JSON object.")
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(name), str):
                return self.api.error(
                    "invalid_request", f"Missing required parameter: '{name}'.", param=name
                )
        if body["completion_window"] != COMPLETION_WINDOW:
            return self.api.error(
                "invalid_request",
                f"Invalid value for 'completion_window': expected '{COMPLETION_WINDOW}'.",
                param="completion_window",
            )
        endpoint = body["endpoint"]
        if endpoint not in ENDPOINTS:
            return self.api.error(
                "invalid_request",
                f"The simulator batches {' and '.join(ENDPOINTS)} only, not {endpoint}.",
                param="endpoint",
            )
        stored = self._files.find(body["input_file_id"])
        if stored is None:
            return self._files.missing(body["input_file_id"])
        requests, errors = _read_input(stored.data, endpoint)
        details = {
            "endpoint": endpoint,
            "input_file_id": stored.id,
            "metadata": body.get("metadata"),
            "errors": errors,
        }
        batch_id = random_id("batch_", 32, _HEX)
        batch = self._book.create(self.vendor, batch_id, [] if errors else requests, details)
        return Reply(status=200, body=self._json(batch))

    def _json(self, batch: Batch) -> dict[str, Any]:
        details = batch.details
        status, moments = self._status(batch)
        if batch.ended and not details["errors"] and "output_file_id" not in details:
            self._write_files(batch)
        total = len(batch.requests)
        completed = batch.count("succeeded")
        created = int(batch.created_at)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": details["endpoint"],
            "errors": (
                {"object": "list", "data": details["errors"]} if details["errors"] else None
            ),
            "input_file_id": details["input_file_id"],
            "completion_window": COMPLETION_WINDOW,
            "status": status,
            "output_file_id": details.get("output_file_id"),
            "error_file_id": details.get("error_file_id"),
            "created_at": created,
            "in_progress_at": None if details["errors"] else created,
            "expires_at": created + WINDOW_S,
            "cancelling_at": _second(batch.cancel_requested_at),
            **moments,
            "request_counts": {
                "total": total,
                "completed": completed,
                "failed": total - completed if batch.ended else 0,
            },
            "metadata": details["metadata"],
        }

    def _status(self, batch: Batch) -> tuple[str, dict[str, int | None]]:
        """The batch's status and the times it reached its ends (None for those it did not)."""
        ended = _second(batch.ended_at)
        moments: dict[str, int | None] = dict.fromkeys(
            ("finalizing_at", "completed_at", "failed_at", "expired_at", "cancelled_at")
        )
        if batch.details["errors"]:
            moments["failed_at"] = int(batch.created_at)
            return "failed", moments
        if not batch.ended:
            return ("in_progress" if batch.cancel_requested_at is None else "cancelling"), moments
        if batch.count("canceled"):
            moments["cancelled_at"] = ended
            return "cancelled", moments
        moments["finalizing_at"] = ended
        if batch.count("expired"):
            moments["expired_at"] = ended
            return "expired", moments
        moments["completed_at"] = ended
        return "completed", moments

    def _write_files(self, batch: Batch) -> None:
        """The output file (answers) and the error file (refusals, and requests never run)."""
        output: list[bytes] = []
        failed: list[bytes] = []
        for result in batch.results:
            line = self._line(result)
            (output if result.outcome == "succeeded" else failed).append(dump(line) + b"\n")
        details = batch.details
        details["output_file_id"] = details["error_file_id"] = None
        if output:
            name = f"batch_{batch.id}_output.jsonl"
            details["output_file_id"] = self._files.add(name, "batch_output", b"".join(output)).id
        if failed:
            name = f"batch_{batch.id}_error.jsonl"
            details["error_file_id"] = self._files.add(name, "batch_output", b"".join(failed)).id

    def _line(self, result: BatchResult) -> dict[str, Any]:
        line: dict[str, Any] = {
            "id": random_id("batch_req_", 32, _HEX),
            "custom_id": result.request.custom_id,
            "response": None,
            "error": None,
        }
        if result.outcome in NOT_RUN:
            line["error"] = NOT_RUN[result.outcome]
            return line
        reply = result.reply or self.api.error("server_error")
        line["response"] = {
            "status_code": reply.status,
            "request_id": random_id("", 32, _HEX),
            "body": reply.body,
        }
        return line


def _read_input(data: bytes, endpoint: str) -> tuple[list[BatchedRequest], list[dict[str, Any]]]:
    """The file's requests, and the problems of its lines (`code`, `message`, `param`, `line`)."""
    requests: list[BatchedRequest] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()

    def problem(code: str, message: str, number: int, param: str | None = None) -> None:
        errors.append({"code": code, "message": message, "param": param, "line": number})

    if len(data) > MAX_BYTES:
        problem("file_too_large", f"The input file is larger than {MAX_BYTES} bytes.", 1)
        return requests, errors
    lines = data.decode("utf-8", "replace").splitlines()
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            problem("invalid_json_line", "This line is not parseable as valid JSON.", number)
            continue
        if not isinstance(line, dict):
            problem("invalid_json_line", "This line is not a JSON object.", number)
            continue
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            problem("missing_required_parameter", "custom_id is required.", number, "custom_id")
            continue
        if custom_id in seen:
            problem(
                "duplicate_custom_id",
                f"The custom_id '{custom_id}' is used by more than one request.",
                number,
                "custom_id",
            )
            continue
        if line.get("method") != "POST":
            problem("invalid_method", "Only POST requests are supported.", number, "method")
            continue
        if line.get("url") != endpoint:
            problem(
                "mismatched_endpoint",
                f"The url of this request does not match the batch's endpoint {endpoint}.",
                number,
                "url",
            )
            continue
        request_body = line.get("body")
        if not isinstance(request_body, dict):
            problem("missing_required_parameter", "body is required.", number, "body")
            continue
        seen.add(custom_id)
        requests.append(BatchedRequest(custom_id, endpoint, request_body))
    if len(requests) > MAX_REQUESTS:
        problem("too_many_requests", f"A batch may hold at most {MAX_REQUESTS} requests.", 1)
    elif not requests and not errors:
        problem("empty_file", "The input file holds no requests.", 1)
    return requests, errors


def _second(moment: float | None) -> int | None:
    return None if moment is None else int(moment)
