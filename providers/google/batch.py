"""Gemini's batch mode as Grove's `BatchWire` (SPEC 20): inline requests sent to
`models/{model}:batchGenerateContent`, the batch polled, its inlined responses read by key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

from grove.providers.base import JSONObject, ProviderName
from grove.providers.batch_support import (
    BatchHTTP,
    ResultTally,
    checked_path_id,
    compact_json,
    split_within,
)
from grove.providers.batch_wire import (
    BatchItem,
    BatchLimits,
    BatchOutcome,
    BatchResults,
    BatchStatus,
    OutcomeKind,
)
from grove.providers.errors import ProviderError, ProviderProtocolError
from grove.providers.google import PROVIDER
from grove.providers.google.errors import GoogleError, map_error
from grove.providers.google.reply import reply_turn
from grove.providers.google.wire import GoogleWire
from grove.providers.http import Endpoint, join_url
from grove.providers.wirejson import json_object, json_str

API_VERSION = "/v1beta"
DISPLAY_NAME = "grove-batch"
# The docs keep inline requests to a total request size under 20 MB, and name no count:
# each request takes at least one byte, so the count never binds before the bytes do.
MAX_INLINE_BYTES = 20 * 1024 * 1024
LIMITS = BatchLimits(max_requests=MAX_INLINE_BYTES, max_bytes=MAX_INLINE_BYTES)
_BODY_OVERHEAD = len(
    compact_json(
        {"batch": {"displayName": DISPLAY_NAME, "inputConfig": {"requests": {"requests": []}}}}
    )
)
_BATCH_NAME = re.compile(r"batches/[A-Za-z0-9_-]{1,128}")
# A batch's end, whole, by its state (the REST API's BATCH_STATE_*, the SDKs' JOB_STATE_*).
ENDS: dict[str, OutcomeKind | None] = {
    "SUCCEEDED": None,
    "FAILED": "errored",
    "CANCELLED": "canceled",
    "EXPIRED": "expired",
}


class GeminiBatchWire:
    """`POST /v1beta/models/{model}:batchGenerateContent`, `GET /v1beta/batches/{id}` and
    `POST /v1beta/batches/{id}:cancel` (API-key auth in the `x-goog-api-key` header)."""

    provider: ProviderName = PROVIDER
    limits: BatchLimits = LIMITS

    def __init__(self) -> None:
        self._wire = GoogleWire()
        self._http = BatchHTTP(PROVIDER, map_error)

    def inline_request(self, item: BatchItem, endpoint: Endpoint) -> JSONObject:
        """One inline request: the body the streaming wire sends, its custom id as its key."""
        body = self._wire.prepare(item.request, endpoint).body
        return {"request": body, "metadata": {"key": item.custom_id}}

    def split(self, items: Sequence[BatchItem]) -> list[list[BatchItem]]:
        """Cut by model first (a batch is one model's), then within the limits."""
        by_model: dict[str, list[BatchItem]] = {}
        for item in items:
            by_model.setdefault(item.request.model, []).append(item)
        measuring = Endpoint(base_url="", api_key="")  # no feature dropped: the largest body
        batches: list[list[BatchItem]] = []
        for group in by_model.values():
            sizes = [len(compact_json(self.inline_request(i, measuring))) + 1 for i in group]
            batches += split_within(PROVIDER, group, sizes, self.limits, _BODY_OVERHEAD)
        return batches

    async def submit(self, items: Sequence[BatchItem], endpoint: Endpoint) -> str:
        models = sorted({item.request.model for item in items})
        if len(models) != 1:
            raise ValueError(f"google: a batch is one model's requests, got {models or 'none'}")
        requests = [self.inline_request(item, endpoint) for item in items]
        body = {
            "batch": {
                "displayName": DISPLAY_NAME,
                "inputConfig": {"requests": {"requests": requests}},
            }
        }
        path = f"{API_VERSION}/models/{quote(models[0], safe='')}:batchGenerateContent"
        url = join_url(endpoint.base_url, path)
        operation = await self._http.send_json("POST", url, endpoint, _headers(endpoint), body=body)
        name = json_str(operation, "name") or json_str(json_object(operation, "metadata"), "name")
        return checked_name(name)

    async def status(self, batch_id: str, endpoint: Endpoint) -> BatchStatus:
        operation = await self._operation(batch_id, endpoint)
        return "ended" if ended_state(operation) is not None else "in_progress"

    async def results(
        self, batch_id: str, custom_ids: Sequence[str], endpoint: Endpoint
    ) -> BatchResults:
        operation = await self._operation(batch_id, endpoint)
        state = ended_state(operation)
        if state is None:
            raise ProviderProtocolError(
                f"google: batch {batch_id} has not ended; its results are not ready",
                provider=PROVIDER,
            )
        return read_operation(operation, state, custom_ids)

    async def cancel(self, batch_id: str, endpoint: Endpoint) -> None:
        url = join_url(endpoint.base_url, f"{API_VERSION}/{checked_name(batch_id)}:cancel")
        await self._http.send_json("POST", url, endpoint, _headers(endpoint), body={})

    async def discard(self, batch_id: str, endpoint: Endpoint) -> None:
        url = join_url(endpoint.base_url, f"{API_VERSION}/{checked_name(batch_id)}")
        await self._http.send_json("DELETE", url, endpoint, _headers(endpoint))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _operation(self, batch_id: str, endpoint: Endpoint) -> JSONObject:
        url = join_url(endpoint.base_url, f"{API_VERSION}/{checked_name(batch_id)}")
        return await self._http.send_json("GET", url, endpoint, _headers(endpoint))


def _headers(endpoint: Endpoint) -> dict[str, str]:
    return {"x-goog-api-key": endpoint.api_key}


def checked_name(name: str | None) -> str:
    """A batch's name (`batches/...`) fit to go in a path (the answer is not trusted to be)."""
    return checked_path_id(name, _BATCH_NAME, "a batch name", PROVIDER)


def ended_state(operation: JSONObject) -> str | None:
    """The state a batch ended in (SUCCEEDED, FAILED, CANCELLED, EXPIRED), None while it runs."""
    metadata = json_object(operation, "metadata")
    state = json_str(metadata, "state") or json_str(operation, "state") or ""
    ending = state.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")
    if ending in ENDS:
        return ending
    return "FAILED" if operation.get("done") is True else None


def inlined_responses(operation: JSONObject) -> list[object]:
    """The batch's inline answers, from its `response` (or its metadata's `output`)."""
    for output in (
        json_object(operation, "response"),
        json_object(json_object(operation, "metadata"), "output"),
    ):
        listed = json_object(output, "inlinedResponses").get("inlinedResponses")
        if isinstance(listed, list):
            return listed
    return []


def read_operation(operation: JSONObject, state: str, custom_ids: Sequence[str]) -> BatchResults:
    """An ended batch's answers under their keys (`metadata.key`), never by position: the
    API has been seen to return them out of order. An answer without its key is malformed.
    A batch that failed, expired or was canceled whole ends its ids without an answer so."""
    tally = ResultTally(custom_ids)
    for inline in inlined_responses(operation):
        if not isinstance(inline, dict):
            tally.malformed_lines += 1
            continue
        custom_id = json_object(inline, "metadata").get("key")
        if not tally.knows(custom_id):
            continue
        assert isinstance(custom_id, str)
        outcome = read_outcome(custom_id, inline)
        if outcome is None:
            tally.malformed_lines += 1
        else:
            tally.add(outcome)
    whole = ENDS[state]
    if whole is not None:
        error = operation.get("error")
        text = GoogleError.read(error).describe(f"batch {state.lower()}")
        tally.fill(whole, text)
    return tally.results()


def read_outcome(custom_id: str, inline: JSONObject) -> BatchOutcome | None:
    """One inline answer: a response succeeded, an error errored; None when unreadable."""
    response, error = inline.get("response"), inline.get("error")
    if isinstance(response, dict):
        try:
            turn = reply_turn(response)
        except ProviderProtocolError:
            return None
        except ProviderError as exc:  # a blocked prompt: errored, in Gemini's words
            return BatchOutcome(custom_id=custom_id, kind="errored", error=str(exc))
        return BatchOutcome(custom_id=custom_id, kind="succeeded", turn=turn)
    if isinstance(error, dict):
        text = GoogleError.read(error).describe("in batch")
        return BatchOutcome(custom_id=custom_id, kind="errored", error=text)
    return None
